"""Virtual input on real compositors: asked, not guessed; and ``wtype`` cannot approve.

headless sway (wlroots) advertises the virtual keyboard and pointer
protocols to every client; headless weston does not.  The tray asks the
compositor it runs on (``ollie_tray/wayland_globals.py``) and, on sway,
shows the warning and turns keyboard approval off, so a program typing
with ``wtype`` — indistinguishable from the person there — cannot approve.
The synthetic-input test switch is off in every test here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sudo_user
import wayland_harness as wh
from e2e_driver import wait_for
from sudo_user import SudoUser

from ollie_tray.dialogs.real_input import ACCEPT_SYNTHETIC_ENV, VIRTUAL_INPUT_NOTICE

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

DENIED = 77
TOOL = "write_protected_note"
WLROOTS_VIRTUAL_INPUT = {"zwp_virtual_keyboard_manager_v1", "zwlr_virtual_pointer_manager_v1"}
KEYS_OFF = "approval by keys is off: the compositor offers virtual input to every client"
NO_VIRTUAL_INPUT = "the compositor offers no virtual input to clients"


@pytest.fixture(scope="module")
def vi_user() -> Iterator[SudoUser]:
    wh.require_wayland("sway", "swaymsg", "wtype", "weston", "dbus-daemon")
    with sudo_user.throwaway() as user:
        yield user


@pytest.fixture
def ws(
    vi_user: SudoUser, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[wh.WaylandSession]:
    # A short directory name: sway's IPC socket path must fit in sun_path.
    name = f"v{len(list(vi_user.base.glob('v*')))}"
    with wh.session(vi_user, name, request.node.name, tmp_path / "logs") as session:
        assert ACCEPT_SYNTHETIC_ENV not in session.env
        yield session


def _ask_compositor(ws: wh.WaylandSession) -> dict[str, Any]:
    """The check, run as the desktop's user against the compositor of ``ws``."""
    out = ws.run([str(ws.user.python), "-m", "ollie_tray.wayland_globals"])
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_the_check_finds_virtual_input_on_sway(ws: wh.WaylandSession) -> None:
    wh.sway(ws)
    found = _ask_compositor(ws)
    assert found["error"] is None, found
    assert "wl_compositor" in found["globals"], found
    assert set(found["offered"]) >= WLROOTS_VIRTUAL_INPUT, found
    assert found["warn"] is True


def test_the_check_finds_no_virtual_input_on_weston(ws: wh.WaylandSession) -> None:
    wh.weston(ws)
    found = _ask_compositor(ws)
    assert found["error"] is None, found
    assert "wl_compositor" in found["globals"], found
    assert found["offered"] == [], found
    assert found["warn"] is False
    # The tray itself, on weston (whatever the desktop claims to be): no warning.
    ws.start_tray("--verbose", XDG_CURRENT_DESKTOP="sway")
    wait_for(lambda: NO_VIRTUAL_INPUT in ws.log("tray"), "the tray's answer from weston")
    assert "approval by keys is off" not in ws.log("tray")


def _dialog(ws: wh.WaylandSession) -> dict[str, Any] | None:
    found = [n for n in ws.toplevels() if "approve" in str(n.get("name", "")).lower()]
    return found[0] if found else None


def _focused(ws: wh.WaylandSession, con_id: int) -> bool:
    return any(n.get("focused") and n["id"] == con_id for n in ws.toplevels())


def test_wtype_cannot_approve_on_sway_and_the_dialog_warns(ws: wh.WaylandSession) -> None:
    wh.sway(ws)
    # The desktop's name claims KDE: the compositor is asked, not the name.
    ws.start_tray("--verbose", "--countdown", "60", XDG_CURRENT_DESKTOP="KDE")
    wait_for(lambda: KEYS_OFF in ws.log("tray"), "the tray's answer from sway")
    # Deny has the focus; Tab moves it to Approve, Space presses it: sway's
    # virtual keyboard, exactly what a person's keys would send.  A key sway
    # delivers before Qt has the keyboard is lost (then Space may press Deny):
    # such a round proves nothing, and another request is tried.
    refused = f": {VIRTUAL_INPUT_NOTICE}"
    for attempt in range(1, 6):
        agent = ws.start_call(TOOL)
        dialog = wait_for(lambda: _dialog(ws), "the approval dialog in sway's tree")
        wait_for(lambda: _focused(ws, dialog["id"]), "the dialog focused")  # noqa: B023
        armed = f"approval dialog for r{attempt}: Approve is armed"
        wait_for(lambda: armed in ws.log("tray"), "Approve armed")  # noqa: B023
        # A new virtual keyboard's first key may be lost while Qt takes its keymap:
        # let that be a harmless Shift.
        assert ws.run(["wtype", "-k", "Shift_L", "-k", "Tab", "-k", "space"]).returncode == 0
        wait_for(
            lambda: agent.poll() is not None or refused in ws.log("tray"),  # noqa: B023
            "the key press on Approve refused, or the call ended",
        )
        assert agent.returncode in (None, DENIED), f"the call ended ({agent.returncode}): approved"
        if agent.poll() is None:
            break
        wait_for(lambda: _dialog(ws) is None, "the denied dialog gone")
    assert agent.poll() is None, "no round reached Approve"
    assert refused in ws.log("tray")
    ws.shot("refused")

    def escape_denies() -> bool:
        if agent.poll() is None:
            assert ws.run(["wtype", "-k", "Escape"]).returncode == 0
        return agent.poll() is not None

    wait_for(escape_denies, "Escape to deny and the agent's call to end")
    assert agent.returncode == DENIED
    assert "approved by the user" not in ws.log("tray")
