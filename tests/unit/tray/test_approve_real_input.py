"""Approve counts only real input: programmatic presses, mnemonics and synthetic devices do not.

The real X server and accessibility bus are in
``tests/e2e/test_synthetic_input.py``; here the rules of the button and the
dialog are tried one at a time, offscreen, and the XInput2 event reader is
fed hand-built events.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QAccessible, QAccessibleActionInterface, QMouseEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.real_input import (
    ACCEPT_SYNTHETIC_ENV,
    ACCEPT_SYNTHETIC_VALUE,
    KEYBOARD_OFF_X11,
    SYNTHETIC_IGNORED,
    TEST_BANNER,
    UNKNOWN_IGNORED,
    VIRTUAL_INPUT_NOTICE,
    InputJudge,
    SyntheticAcceptingJudge,
    WindowSystemJudge,
    X11Judge,
    build_judge,
)
from ollie_tray.dialogs.xinput import Phase, Verdict, XInputOrigin
from ollie_tray.wayland_globals import VirtualInputCheck, judge_globals
from registry_core.broker.question import Approval, ApprovalRequest

Factory = Callable[..., ApprovalRequest]


@dataclass(frozen=True)
class FakeJudge:
    """Judges every pointer event with one fixed verdict."""

    verdict: Verdict
    keyboard_ok: bool = True
    notice: str | None = None
    accepts_synthetic: bool = False

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return self.verdict


def armed(
    qtbot: QtBot, request: ApprovalRequest, judge: InputJudge | None = None
) -> ApprovalDialog:
    dialog = ApprovalDialog(request, arm_delay_ms=20, judge=judge)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=2000)
    return dialog


def answers(dialog: ApprovalDialog) -> list[Approval]:
    items: list[Approval] = []
    dialog.decided.connect(items.append)
    return items


def settle(qtbot: QtBot, ms: int = 250) -> None:
    """Let timers run (animateClick answers after 100 ms) before checking nothing happened."""
    qtbot.wait(ms)


# --- programmatic presses ------------------------------------------------------------


def test_click_does_not_approve(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    got = answers(dialog)
    dialog.approve_button.click()
    dialog.approve_button.animateClick()
    settle(qtbot)
    assert got == [] and dialog.isVisible()


def test_accessibility_press_does_not_approve(qtbot: QtBot, approval_request: Factory) -> None:
    """What an AT-SPI ``DoAction("Press")`` runs inside Qt: the button's press action."""
    dialog = armed(qtbot, approval_request())
    got = answers(dialog)
    clicked: list[bool] = []
    dialog.approve_button.clicked.connect(lambda: clicked.append(True))
    interface = QAccessible.queryAccessibleInterface(dialog.approve_button)
    assert interface is not None
    actions = interface.actionInterface()
    assert actions is not None
    actions.doAction(QAccessibleActionInterface.pressAction())
    qtbot.waitUntil(lambda: bool(clicked), timeout=2000)  # the press did happen…
    settle(qtbot)
    assert got == []  # …and did not approve


def test_events_sent_by_code_do_not_approve(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    got = answers(dialog)
    button = dialog.approve_button
    centre = QPointF(button.rect().center())
    for kind in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease):
        event = QMouseEvent(
            kind,
            centre,
            QPointF(button.mapToGlobal(centre.toPoint())),
            Qt.MouseButton.LeftButton,
            Qt.MouseButton.LeftButton
            if kind is QEvent.Type.MouseButtonPress
            else Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(button, event)  # not spontaneous: no window system involved
    settle(qtbot, 50)
    assert got == []


def test_alt_a_does_nothing(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    got = answers(dialog)
    qtbot.keyClick(dialog, Qt.Key.Key_A, Qt.KeyboardModifier.AltModifier)
    settle(qtbot)
    assert got == [] and dialog.isVisible()


def test_deny_keeps_its_mnemonic_and_escape(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.keyClick(dialog, Qt.Key.Key_D, Qt.KeyboardModifier.AltModifier)
    assert blocker.args[0].approved is False


# --- real input --------------------------------------------------------------------------


def test_a_real_click_approves(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].approved is True


def test_a_press_elsewhere_released_on_approve_does_not_approve(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = armed(qtbot, approval_request())
    got = answers(dialog)
    qtbot.mouseRelease(dialog.approve_button, Qt.MouseButton.LeftButton)
    settle(qtbot, 50)
    assert got == []


def test_space_on_approve_approves_where_the_keyboard_is_trusted(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = armed(qtbot, approval_request(), WindowSystemJudge())
    dialog.approve_button.setFocus()
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Space)
    assert blocker.args[0].approved is True


def test_space_does_not_approve_where_keys_have_no_device(
    qtbot: QtBot, approval_request: Factory
) -> None:
    judge = FakeJudge(Verdict.REAL, keyboard_ok=False, notice=KEYBOARD_OFF_X11)
    dialog = armed(qtbot, approval_request(), judge)
    assert dialog.input_note.isVisible() and "click Approve" in dialog.input_note.text()
    got = answers(dialog)
    dialog.approve_button.setFocus()
    qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Space)
    settle(qtbot, 50)
    assert got == []
    with qtbot.waitSignal(dialog.decided):  # a click still works
        qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)


@pytest.mark.parametrize(
    ("verdict", "said"),
    [(Verdict.SYNTHETIC, SYNTHETIC_IGNORED), (Verdict.UNKNOWN, UNKNOWN_IGNORED)],
)
def test_a_click_from_a_synthetic_or_unknown_device_is_ignored_and_said(
    qtbot: QtBot, approval_request: Factory, verdict: Verdict, said: str
) -> None:
    dialog = armed(qtbot, approval_request(), FakeJudge(verdict))
    got = answers(dialog)
    qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    settle(qtbot, 50)
    assert got == []
    assert dialog.input_note.isVisible() and dialog.input_note.text() == said


# --- the test switch ---------------------------------------------------------------------


def test_switch_is_off_by_default_and_needs_the_exact_value() -> None:
    assert not build_judge("offscreen", {}).accepts_synthetic
    assert not build_judge("offscreen", {ACCEPT_SYNTHETIC_ENV: "1"}).accepts_synthetic
    on = build_judge("xcb", {ACCEPT_SYNTHETIC_ENV: ACCEPT_SYNTHETIC_VALUE})
    assert on.accepts_synthetic and on.keyboard_ok


def test_switch_shows_a_banner_and_still_refuses_click(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = armed(qtbot, approval_request(), SyntheticAcceptingJudge())
    assert dialog.test_banner is not None and dialog.test_banner.isVisible()
    assert dialog.test_banner.text() == TEST_BANNER
    got = answers(dialog)
    dialog.approve_button.click()
    settle(qtbot)
    assert got == []


def test_no_banner_without_the_switch(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, approval_request())
    assert dialog.test_banner is None


# --- platforms ---------------------------------------------------------------------------


SWAY = frozenset({"wl_compositor", "xdg_wm_base", "zwp_virtual_keyboard_manager_v1"})
WESTON = frozenset({"wl_compositor", "xdg_wm_base", "zwp_text_input_manager_v1"})


@pytest.mark.parametrize(
    ("desktop", "globals_", "warned"),
    [
        ("sway", SWAY, True),
        ("KDE", SWAY, True),  # the desktop's name is not trusted: the compositor is asked
        ("sway", WESTON, False),
        ("", WESTON, False),
        ("GNOME", frozenset({"xdg_wm_base"}), True),  # no wl_compositor: cannot tell
    ],
)
def test_wayland_warns_and_turns_keys_off_where_the_compositor_offers_virtual_input(
    desktop: str, globals_: frozenset[str], warned: bool
) -> None:
    seen: list[str] = []

    def check(env: Mapping[str, str]) -> VirtualInputCheck:
        seen.append(env["XDG_CURRENT_DESKTOP"])
        return judge_globals(globals_)

    judge = build_judge("wayland", {"XDG_CURRENT_DESKTOP": desktop}, wayland_check=check)
    assert seen == [desktop]
    assert (judge.notice == VIRTUAL_INPUT_NOTICE) is warned
    assert judge.keyboard_ok is not warned


def test_space_does_not_approve_where_programs_can_type(
    qtbot: QtBot, approval_request: Factory
) -> None:
    judge = build_judge("wayland", {}, wayland_check=lambda _env: judge_globals(SWAY))
    dialog = armed(qtbot, approval_request(), judge)
    assert dialog.input_note.isVisible() and dialog.input_note.text() == VIRTUAL_INPUT_NOTICE
    got = answers(dialog)
    dialog.approve_button.setFocus()
    with qtbot.waitSignal(dialog.approve_button.ignored) as refused:
        qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Space)
    assert refused.args == [VIRTUAL_INPUT_NOTICE]
    assert got == []


def test_x11_without_a_display_refuses_everything() -> None:
    judge = build_judge("xcb", {"DISPLAY": ":4242"})  # no such server: cannot tell
    assert not judge.keyboard_ok
    assert judge.notice is not None and "unavailable" in judge.notice


# --- reading XInput2 events ----------------------------------------------------------------


OPCODE = 131
NAMES = {2: "Virtual core pointer", 4: "Virtual core XTEST pointer", 6: "Logitech USB Mouse"}


@dataclass
class FakeDevices:
    opcode: int = OPCODE

    def names(self) -> dict[int, str]:
        return dict(NAMES)


def xi_event(evtype: int, time: int, source: int, *, send_event: bool = False) -> bytes:
    head = struct.pack("<BBHIHHI", 35 | (0x80 if send_event else 0), OPCODE, 1, 0, evtype, 2, time)
    body = bytes(56 - len(head)) + struct.pack("<H", source)
    return head + body + bytes(8)


def core_button(kind: int, time: int) -> bytes:
    return struct.pack("<BBHI", kind, 1, 1, time) + bytes(28)


def origin_with(*events: bytes) -> XInputOrigin:
    origin = XInputOrigin(FakeDevices())
    for event in events:
        origin.feed(event)
    return origin


def test_xtest_source_is_synthetic_and_a_real_device_is_real() -> None:
    origin = origin_with(xi_event(4, 100, 4), xi_event(5, 101, 4), xi_event(4, 200, 6))
    assert origin.verdict(100, Phase.PRESS) is Verdict.SYNTHETIC
    assert origin.verdict(101, Phase.RELEASE) is Verdict.SYNTHETIC
    assert origin.verdict(200, Phase.PRESS) is Verdict.REAL


def test_what_cannot_be_attributed_is_unknown() -> None:
    origin = origin_with(
        xi_event(4, 300, 99),  # a device the server does not list
        xi_event(4, 301, 6, send_event=True),
        core_button(4, 302),
    )
    assert origin.verdict(300, Phase.PRESS) is Verdict.UNKNOWN
    assert origin.verdict(301, Phase.PRESS) is Verdict.UNKNOWN
    assert origin.verdict(302, Phase.PRESS) is Verdict.UNKNOWN
    assert origin.verdict(303, Phase.PRESS) is Verdict.UNKNOWN  # never seen


def test_one_synthetic_event_at_the_same_time_spoils_a_real_one() -> None:
    origin = origin_with(xi_event(5, 400, 6), xi_event(5, 400, 4))
    assert origin.verdict(400, Phase.RELEASE) is Verdict.SYNTHETIC
    assert origin.verdict(400, Phase.PRESS) is Verdict.UNKNOWN


def test_other_extensions_and_event_types_are_not_recorded() -> None:
    other = bytearray(xi_event(4, 500, 6))
    other[1] = OPCODE + 1
    origin = origin_with(bytes(other), xi_event(6, 501, 6))  # XI_Motion
    assert origin.verdict(500, Phase.PRESS) is Verdict.UNKNOWN
    assert origin.verdict(501, Phase.PRESS) is Verdict.UNKNOWN


def test_x11_judge_reads_the_qt_event_time() -> None:
    origin = origin_with(xi_event(4, 600, 6), xi_event(4, 601, 4))
    judge = X11Judge(origin)
    event = QMouseEvent(
        QEvent.Type.MouseButtonPress,
        QPointF(1, 1),
        QPointF(QPoint(1, 1)),
        Qt.MouseButton.LeftButton,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    event.setTimestamp(600)
    assert judge.pointer(event, Phase.PRESS) is Verdict.REAL
    event.setTimestamp(601)
    assert judge.pointer(event, Phase.PRESS) is Verdict.SYNTHETIC
    assert not judge.keyboard_ok
