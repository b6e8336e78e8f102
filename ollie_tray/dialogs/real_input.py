"""Approve counts only real input: a person's click or key press, from the window system.

The approval dialog is where a person's yes becomes power, so a program
must not be able to say it.  Three ways it could, and what stops them:

* **Programmatic presses** — ``click()``, ``animateClick()``, a mnemonic
  shortcut, and the accessibility bus (AT-SPI ``DoAction("Press")`` ends in
  ``click()`` with no input event at all).  :class:`ApproveButton` never
  approves from ``clicked``: only from its own mouse and key event handlers,
  for events Qt marks *spontaneous* (delivered by the window system), with
  the press and the release both on the armed button.
* **X11 XTEST** (``xdotool``): the event's XInput2 source device is an XTEST
  device; :class:`X11Judge` asks :class:`~ollie_tray.dialogs.xinput.XInputOrigin`.
  Keys cannot be attributed to a device on X11, so keyboard approval is off
  there (the dialog says "click Approve").
* **Compositors that offer virtual input to every client** (wlroots: sway,
  …): nothing in the client can tell a virtual device from a real one.
  :func:`build_judge` asks the compositor which globals it advertises
  (:mod:`ollie_tray.wayland_globals`); where virtual input is offered, or
  the question cannot be answered, keys cannot approve and the dialog says
  why (docs/security.md).

The test switch :data:`ACCEPT_SYNTHETIC_ENV` (never on by default; a banner
in every dialog while on) accepts synthetic *window-system* input so the
end-to-end tests can drive the real app with ``xdotool``.  It does not make
``click()`` or AT-SPI approve.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent, QMouseEvent
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs.xinput import Phase, Verdict, XDevices, XInputOrigin, XInputUnavailable
from ollie_tray.wayland_globals import VirtualInputCheck, check_virtual_input

log = logging.getLogger(__name__)

ACCEPT_SYNTHETIC_ENV = "OLLIE_TRAY_TEST_ACCEPT_SYNTHETIC_INPUT"
"""Test switch: set to exactly :data:`ACCEPT_SYNTHETIC_VALUE` to let XTEST input approve."""
ACCEPT_SYNTHETIC_VALUE = "yes-synthetic-input-approves"
TEST_BANNER = (
    "TEST MODE — synthetic input (xdotool, XTEST) can approve in this tray."
    f" Started with {ACCEPT_SYNTHETIC_ENV}; never use it for real work."
)
SYNTHETIC_IGNORED = "Synthetic input ignored: only a real click on Approve counts."
UNKNOWN_IGNORED = "Input from an unknown device ignored: click Approve with your mouse."
KEYBOARD_OFF_X11 = (
    "On X11 the keyboard cannot approve (keys cannot be traced to a device): click Approve."
)
VIRTUAL_INPUT_NOTICE = (
    "This desktop may let any program click or type into windows (virtual input),"
    " and Ollie cannot tell that from you. Keys cannot approve here: click Approve,"
    " and approve only what you asked for."
)


class InputJudge(Protocol):
    """Decides whether window-system input may count for Approve on this platform."""

    @property
    def keyboard_ok(self) -> bool:
        """True when a key press on Approve may approve."""
        ...

    @property
    def notice(self) -> str | None:
        """A caveat the dialog shows (what cannot be guaranteed here), or None."""
        ...

    @property
    def accepts_synthetic(self) -> bool:
        """True only under the test switch: every dialog shows :data:`TEST_BANNER`."""
        ...

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        """Where a spontaneous mouse event on Approve came from."""
        ...


@dataclass(frozen=True)
class WindowSystemJudge:
    """Trust what the window system delivers (Wayland, offscreen): no device to check."""

    keyboard_ok: bool = True
    notice: str | None = None
    accepts_synthetic: bool = False

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return Verdict.REAL


@dataclass(frozen=True)
class X11Judge:
    """X11: a click counts when its XI2 source device is not XTEST; keys never count."""

    origin: XInputOrigin
    keyboard_ok: bool = False
    notice: str | None = KEYBOARD_OFF_X11
    accepts_synthetic: bool = False

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return self.origin.verdict(int(event.timestamp()), phase)


@dataclass(frozen=True)
class BlindJudge:
    """X11 without XInput2 (or libXi): nothing can be attributed, so nothing approves."""

    reason: str
    keyboard_ok: bool = False
    accepts_synthetic: bool = False

    @property
    def notice(self) -> str:
        return (
            f"Approve is unavailable: Ollie cannot tell real input on this display ({self.reason})."
        )

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return Verdict.UNKNOWN


@dataclass(frozen=True)
class SyntheticAcceptingJudge:
    """The loud test switch: synthetic window-system input counts as real."""

    keyboard_ok: bool = True
    notice: str | None = None
    accepts_synthetic: bool = True

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return Verdict.REAL


def synthetic_switch_on(env: Mapping[str, str]) -> bool:
    return env.get(ACCEPT_SYNTHETIC_ENV) == ACCEPT_SYNTHETIC_VALUE


def build_judge(
    platform: str,
    env: Mapping[str, str],
    install: QCoreApplication | None = None,
    wayland_check: Callable[[Mapping[str, str]], VirtualInputCheck] = check_virtual_input,
) -> InputJudge:
    """The judge for this platform; on X11 installs the native filter on ``install``.

    On Wayland ``wayland_check`` asks the compositor whether it offers
    virtual input to clients (fail safe: an unanswered question counts as yes).
    """
    if synthetic_switch_on(env):
        log.warning("%s is set: synthetic input can approve (tests only)", ACCEPT_SYNTHETIC_ENV)
        return SyntheticAcceptingJudge()
    if platform == "xcb":
        try:
            devices = XDevices(env.get("DISPLAY"))
        except XInputUnavailable as exc:
            log.error("cannot tell real input from synthetic input: %s", exc)
            return BlindJudge(str(exc))
        origin = XInputOrigin(devices)
        if install is not None:
            install.installNativeEventFilter(origin)
        return X11Judge(origin)
    if platform.startswith("wayland"):
        check = wayland_check(env)
        if check.warn:
            log.warning("approval by keys is off: %s", check.describe())
            return WindowSystemJudge(keyboard_ok=False, notice=VIRTUAL_INPUT_NOTICE)
        log.info("%s", check.describe())
    return WindowSystemJudge()


def default_judge() -> InputJudge:
    """For a dialog built without a judge: X11 cannot be checked then, so refuse there."""
    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.platformName() == "xcb":
        return BlindJudge("no input check was set up")
    return WindowSystemJudge()


def synthetic_input_banner() -> QLabel:
    """The loud banner every dialog shows while the synthetic-input test switch is on."""
    banner = c.plain_label(
        TEST_BANNER, style=f"background: {c.RED}; color: white; font-weight: bold; padding: 6px;"
    )
    banner.setAccessibleName("Test mode warning")
    return banner


_APPROVE_KEYS = (Qt.Key.Key_Space, Qt.Key.Key_Select)


class ApproveButton(QPushButton):
    """A push button that says "approved" only for real input; ``clicked`` never approves.

    :attr:`approved` fires for a left click (spontaneous press and release,
    both inside the button, both judged real) or, where the judge allows the
    keyboard, a spontaneous Space press and release while the button has
    focus.  :attr:`ignored` fires with a sentence when an attempt was refused.
    """

    approved = Signal()
    ignored = Signal(str)

    def __init__(self, text: str, judge: InputJudge, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._judge = judge
        self._pointer_down = False
        self._key_down = False

    @property
    def judge(self) -> InputJudge:
        return self._judge

    def _refusal(self, verdict: Verdict) -> str | None:
        if verdict is Verdict.REAL:
            return None
        return SYNTHETIC_IGNORED if verdict is Verdict.SYNTHETIC else UNKNOWN_IGNORED

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._pointer_down = False
        if event.spontaneous() and event.button() == Qt.MouseButton.LeftButton and self.isEnabled():
            why = self._refusal(self._judge.pointer(event, Phase.PRESS))
            if why is not None:
                self.ignored.emit(why)
            self._pointer_down = why is None
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        was_down = self._pointer_down
        self._pointer_down = False
        super().mouseReleaseEvent(event)
        if not (
            was_down
            and event.spontaneous()
            and event.button() == Qt.MouseButton.LeftButton
            and self.isEnabled()
            and self.hitButton(event.position().toPoint())
        ):
            return
        why = self._refusal(self._judge.pointer(event, Phase.RELEASE))
        if why is not None:
            self.ignored.emit(why)
        else:
            self.approved.emit()

    def focusInEvent(self, event: QFocusEvent) -> None:
        # Said in --verbose logs: where a key would land is otherwise invisible.
        log.info("Approve has the keyboard focus (%s)", event.reason().name)
        super().focusInEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in _APPROVE_KEYS and not event.isAutoRepeat():
            self._key_down = event.spontaneous() and self.isEnabled()
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        super().keyReleaseEvent(event)
        if event.key() not in _APPROVE_KEYS or event.isAutoRepeat():
            return
        was_down = self._key_down
        self._key_down = False
        if not (was_down and event.spontaneous() and self.isEnabled()):
            return
        if not self._judge.keyboard_ok:
            self.ignored.emit(self._judge.notice or KEYBOARD_OFF_X11)
        else:
            self.approved.emit()
