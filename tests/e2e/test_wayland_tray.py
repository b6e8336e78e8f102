"""The tray on real Wayland compositors: sway with waybar as the StatusNotifierItem host, weston.

The app runs as a native Wayland client (``QT_QPA_PLATFORM=wayland``) as the
ordinary test user.  What a person sees is read from the real parts: the
watcher's item list and the item's properties over D-Bus (waybar is the
watcher and host), the compositor's window tree (``swaymsg -t get_tree``),
screenshots (``grim``, kept under ``$OLLIE_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sudo_user
import wayland_harness as wh
from e2e_driver import wait_for
from sudo_user import SudoUser

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

DENIED = 77
TOOL = "write_protected_note"


@pytest.fixture(scope="module")
def wl_user() -> Iterator[SudoUser]:
    wh.require_wayland("sway", "swaymsg", "waybar", "grim", "wtype", "dbus-daemon")
    with sudo_user.throwaway() as user:
        yield user


@pytest.fixture
def ws(
    wl_user: SudoUser, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[wh.WaylandSession]:
    # A short directory name: sway's IPC socket path must fit in sun_path.
    name = f"w{len(list(wl_user.base.glob('w*')))}"
    with wh.session(wl_user, name, request.node.name, tmp_path / "logs") as session:
        yield session


def _menu(ws: wh.WaylandSession, item: str) -> list[dict[str, Any]]:
    return list(ws.probe("layout", item)["items"])


def _entry(items: list[dict[str, Any]], label_part: str) -> dict[str, Any]:
    found = [i for i in items if label_part in str(i.get("label", "")).replace("_", "")]
    assert found, f"no menu item with {label_part!r} in {[i.get('label') for i in items]}"
    return found[0]


def test_sway_waybar_attention_while_pending_and_native_dialog(ws: wh.WaylandSession) -> None:
    wh.sway(ws)
    wh.waybar(ws)
    ws.start_tray("--countdown", "60")
    idle = ws.wait_item(lambda p: p.get("Status") == "Active", "our item registered, Active")
    item = idle["item"]
    # One icon: ours, not a second one from Qt's own export.
    assert ws.probe("items") == [item]
    assert idle["IconName"] == "io.github.ollie_tray.OllieTray"
    assert idle["AttentionIconName"] == "ollie-tray-pending"
    assert idle["Title"] == "Ollie Tray"
    monitor = subprocess.Popen(
        [str(ws.user.python), str(ws.dirs.root / "sni_probe.py"), "monitor", item, "120"],
        env=ws.env,
        user=ws.user.uid,
        group=ws.user.gid,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert monitor.stdout is not None
        assert json.loads(monitor.stdout.readline())["member"] == "ready"
        # The Tool Browser takes one half of the screen, so the dialog tiles into the other.
        ws.probe("click", item, str(_entry(_menu(ws, item), "Tool Browser")["id"]))
        wait_for(
            lambda: any("Tool Browser" in str(n.get("name")) for n in ws.toplevels()),
            "the Tool Browser as a sway window",
        )
        agent = ws.start_call(TOOL)
        pending = ws.wait_item(
            lambda p: p.get("Status") == "NeedsAttention", "NeedsAttention while pending"
        )
        assert pending["IconName"] == "ollie-tray-pending"
        assert "1 pending" in pending["Title"]
        assert "1 request waiting" in pending["ToolTip"][3]
        # The approval dialog is a native Wayland toplevel of ours, on screen.
        wait_for(
            lambda: any("approve" in str(n.get("name", "")).lower() for n in ws.toplevels()),
            "the approval dialog in sway's tree",
        )
        dialog = next(n for n in ws.toplevels() if "approve" in str(n.get("name", "")).lower())
        assert dialog.get("shell") == "xdg_shell", dialog
        assert dialog.get("app_id") == "io.github.ollie_tray.OllieTray", dialog
        assert dialog["rect"]["width"] <= wh.SCREEN[0] // 2, dialog["rect"]  # a half tile
        ws.shot("pending")
        # A real key press from sway's virtual keyboard: Escape denies.
        wait_for(lambda: _focused_is(ws, dialog["id"]), "the dialog focused")

        def escape_denies() -> bool:
            # Pressed again while the call runs: sway may report the focus before
            # Qt has the keyboard.
            if agent.poll() is None:
                assert ws.run(["wtype", "-k", "Escape"]).returncode == 0
            return agent.poll() is not None

        wait_for(escape_denies, "Escape to deny and the agent's call to end")
        assert agent.returncode == DENIED
        back = ws.wait_item(lambda p: p.get("Status") == "Active", "Active after the decision")
        assert back["IconName"] == "io.github.ollie_tray.OllieTray"
        assert back["Title"] == "Ollie Tray"
        ws.shot("decided")
    finally:
        monitor.terminate()
        out, _ = monitor.communicate(timeout=10)
    signals = [json.loads(line) for line in out.splitlines() if line.strip()]
    layouts = [s for s in signals if s["member"] == "LayoutUpdated"]
    # One request: its item appears once and goes once (Qt's export sent 47).
    assert 1 <= len(layouts) <= 2, signals
    statuses = [s["body"][0] for s in signals if s["member"] == "NewStatus"]
    assert statuses == ["NeedsAttention", "Active"], signals


def _focused_is(ws: wh.WaylandSession, con_id: int) -> bool:
    return any(n.get("focused") and n["id"] == con_id for n in ws.toplevels())


def test_late_watcher_menu_clicks_and_restarted_panel(ws: wh.WaylandSession) -> None:
    wh.sway(ws)
    ws.start_tray()
    # No watcher yet: nothing registered; then the panel starts.
    bar = wh.waybar(ws)
    ws.wait_item(lambda p: p.get("Status") == "Active", "registered with a late waybar")
    item = ws.our_item()
    assert item is not None
    items = _menu(ws, item)
    pause = _entry(items, "Pause")
    assert pause.get("toggle-type") == "checkmark" and pause.get("toggle-state") == 0
    ws.probe("click", item, str(pause["id"]))
    paused = ws.wait_item(lambda p: p.get("IconName") == "ollie-tray-paused", "paused icon")
    assert "paused" in paused["ToolTip"][3]
    after = _entry(_menu(ws, item), "Pause")
    assert after["id"] == pause["id"] and after["toggle-state"] == 1
    browser = _entry(_menu(ws, item), "Tool Browser")
    ws.probe("click", item, str(browser["id"]))
    wait_for(
        lambda: any("Tool Browser" in str(n.get("name")) for n in ws.toplevels()),
        "the Tool Browser as a sway window",
    )
    ws.shot("browser")
    # The panel restarts: the item registers again with the new watcher.
    wh.ds.stop(bar)
    wait_for(lambda: ws.our_item() is None, "the watcher gone")
    wh.waybar(ws)
    ws.wait_item(lambda p: p.get("IconName") == "ollie-tray-paused", "registered again")


def _weston_views(ws: wh.WaylandSession) -> str:
    """weston's scene graph (its debug protocol), one dump."""
    result = ws.run(["timeout", "5", "weston-debug", "scene-graph"])
    return result.stdout


def test_weston_dialog_is_a_native_toplevel(ws: wh.WaylandSession) -> None:
    wh.require_wayland("weston", "weston-debug", "weston-screenshooter")
    wh.weston(ws)
    ws.start_tray("--countdown", "60")
    agent = ws.start_call(TOOL)
    wait_for(
        lambda: "approve write_protected_note" in _weston_views(ws),
        "the approval dialog in weston's scene graph",
    )
    views = _weston_views(ws)
    assert "xdg_toplevel" in views, views
    assert "io.github.ollie_tray.OllieTray" in views, views  # the app id
    ws.shot("weston", ["weston-screenshooter"])
    agent.terminate()
    wait_for(lambda: agent.poll() is not None, "the agent gone")
    wait_for(
        lambda: "approve write_protected_note" not in _weston_views(ws),
        "the dialog withdrawn with its requester",
    )
