"""A program cannot approve: xdotool clicks and keys (XTEST) and an AT-SPI press are refused.

The real ``ollie-tray`` under Xvfb, started **without** the synthetic-input
test switch (the product as shipped), on its own D-Bus session bus with a
real ``at-spi-bus-launcher`` that the "attacker" switches on through
``org.a11y.Status.IsEnabled``.  An agent's elevated call waits for
approval; the attacker clicks Approve with xdotool, focuses it and presses
Space, presses Alt+A, and calls ``DoAction("Press")`` over AT-SPI.  None of
it may approve: the call keeps waiting, nothing is written, the dialog says
why.  Deny still works from any input (refusing is always safe).

Under Xvfb every input is XTEST, so the positive path (a real device) is
covered by the unit tests of the XInput2 reader with the server's own
device names (tests/unit/tray/test_approve_real_input.py) and, for the
end-to-end scenarios, by the loud test switch (docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import atspi_attacker as atspi
import desktop_session as ds
import pytest
from e2e_driver import (
    APPROVAL_TITLE,
    AgentCall,
    TrayProcess,
    approve_armed,
    click_button,
    find_window,
    texts_of,
)
from e2e_harness import E2E

from ollie_tray.dialogs.real_input import KEYBOARD_OFF_X11, SYNTHETIC_IGNORED

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "write_protected_note"
TITLE = APPROVAL_TITLE.format(tool=TOOL)
NOTE = "ollie-demo-note.txt"
DENIED = 77


@pytest.fixture
def a11y_session(tmp_path: Path, e2e: E2E) -> Iterator[dict[str, str]]:
    """A private session bus with the accessibility bus launcher, switched on."""
    base = tmp_path / "a11y"
    base.mkdir()
    with ds.dbus_session(base) as env:
        env["DISPLAY"] = e2e.desktop.display
        with atspi.accessibility_bus(env, base / "at-spi-bus-launcher.log"):
            atspi.switch_on(env["DBUS_SESSION_BUS_ADDRESS"])
            yield env


def says(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: any(text in t for t in texts_of(s, "ApprovalDialog"))


@dataclass
class Waiting:
    """A tray without the test switch, and an agent's call waiting at an armed dialog."""

    e2e: E2E
    tray: TrayProcess
    call: AgentCall
    window: int
    state: dict[str, Any]
    note: Path

    def not_approved(self, what: str) -> None:
        assert self.call.still_running_after(1.0), f"{what} approved the call"
        assert self.e2e.display.windows(TITLE), f"the dialog went away after {what}"
        assert not self.note.exists()

    def deny(self) -> None:
        """Refusing is always allowed, from any input."""
        self.e2e.display.key(self.window, "Escape")
        result = self.call.result()
        assert result.returncode == DENIED, result
        assert not self.note.exists()


def waiting_call(e2e: E2E, env: dict[str, str] | None = None) -> Waiting:
    tray = e2e.start_tray(demo=True, synthetic_input=False, env=env)
    agent = e2e.agent_env(tray)
    call = e2e.start_call(TOOL, agent, args='{"text": "a program said yes"}')
    window = e2e.display.wait_window(TITLE)
    state = tray.wait_state(approve_armed, "Approve armed")
    dialog = find_window(state, "ApprovalDialog")
    assert dialog is not None
    assert not any("TEST MODE" in t for t in dialog["texts"]), "the test switch is on"
    return Waiting(e2e, tray, call, window, state, Path(agent["HOME"]) / NOTE)


def test_an_xtest_click_does_not_approve(e2e: E2E) -> None:
    waiting = waiting_call(e2e)
    click_button(e2e.display, waiting.state, "ApprovalDialog", "Approve")
    waiting.not_approved("an XTEST click")
    waiting.tray.wait_state(says(SYNTHETIC_IGNORED), "the dialog saying the click was ignored")
    e2e.shot("xtest-click-refused", waiting.window)
    waiting.deny()


def test_xtest_keys_do_not_approve(e2e: E2E) -> None:
    waiting = waiting_call(e2e)
    e2e.display.key(waiting.window, "alt+a")  # the old mnemonic
    waiting.not_approved("Alt+A")
    e2e.display.key(waiting.window, "Tab", "space")  # Deny has the focus; Tab moves to Approve
    waiting.not_approved("Tab, Space")
    # The dialog says why: on X11 keys cannot be traced to a device.
    waiting.tray.wait_state(says(KEYBOARD_OFF_X11), "the dialog saying: click Approve")
    waiting.deny()


def test_an_accessibility_press_does_not_approve(e2e: E2E, a11y_session: dict[str, str]) -> None:
    bus = a11y_session["DBUS_SESSION_BUS_ADDRESS"]
    waiting = waiting_call(e2e, {"DBUS_SESSION_BUS_ADDRESS": bus})
    ds.wait_until(lambda: atspi.find_button(bus, "Approve"), "Approve on the AT-SPI bus")
    assert atspi.press(bus, "Approve")  # the bus says the action was done…
    waiting.not_approved("an AT-SPI DoAction(Press)")  # …and it did not approve
    waiting.deny()
