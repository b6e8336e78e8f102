"""Scenarios 9 and 10: the tray menu, opened with the mouse on the icon in trayer.

A right click on the icon opens the context menu (a popup that grabs the
keyboard); its entries are chosen with their mnemonics, as a person using
the keyboard would.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_driver import APPROVAL_TITLE, TrayProcess, find_window, open_tray_menu
from e2e_harness import E2E

from ollie_tray.app_id import APP_ID

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]


def menu_action(state: dict[str, Any], label: str) -> dict[str, Any]:
    menu = find_window(state, "QMenu")
    assert menu is not None, state
    return next(a for a in menu["actions"] if label in a["text"].replace("&", ""))


def menu_closed(tray: TrayProcess) -> None:
    tray.wait_state(lambda s: find_window(s, "QMenu") is None, "the menu closed")


def test_start_at_login_toggle_writes_a_valid_autostart_entry(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=False, wait_icon=True)
    # ~/.config/autostart of the tray's (temporary) home: XDG_CONFIG_HOME is ~/.config.
    entry = Path(tray.env["HOME"]) / ".config" / "autostart" / f"{APP_ID}.desktop"
    assert not entry.exists()
    menu = open_tray_menu(tray)
    assert menu_action(menu, "Start at login")["checked"] is False
    e2e.shot("tray-menu")
    e2e.display.key(None, "s")  # &Start at login
    menu_closed(tray)
    assert entry.is_file()
    check = subprocess.run(
        ["desktop-file-validate", str(entry)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0 and not check.stdout.strip(), check
    lines = entry.read_text().splitlines()
    assert "Type=Application" in lines
    assert any(line.startswith("Exec=") and "ollie-tray" in line for line in lines), lines

    menu = open_tray_menu(tray)
    assert menu_action(menu, "Start at login")["checked"] is True
    e2e.display.key(None, "s")  # untick: the entry goes away
    menu_closed(tray)
    assert not entry.exists()


def test_quit_with_a_pending_request_denies_it_and_removes_the_socket(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True, wait_icon=True)
    title = APPROVAL_TITLE.format(tool="write_protected_note")
    call = e2e.start_call("write_protected_note", e2e.agent_env(tray))
    window = e2e.display.wait_window(title)
    tray.wait_state(lambda s: s["pending"] == 1 and s["tray"] == "pending", "one pending")
    e2e.display.wait_painted(window)
    menu = open_tray_menu(tray)
    assert menu_action(menu, "1 pending request")["enabled"] is False
    assert menu_action(menu, "write_protected_note")["enabled"] is True
    e2e.shot("tray-menu-pending")
    e2e.display.key(None, "q")  # &Quit
    result = call.result()
    assert result.returncode == 77, result
    assert result.stderr.startswith("elevation denied"), result.stderr
    assert tray.proc.wait(15) == 0, tray.log_text()
    assert not tray.socket.exists()
    assert not e2e.display.windows(title)
