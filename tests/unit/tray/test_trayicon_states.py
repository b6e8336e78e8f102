"""Tray icon states, tooltip words and the menu's entries (offscreen Qt)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QApplication
from tray_actions import recording_actions

from ollie_tray.icons import TrayState, icon_path, state_icon
from ollie_tray.tray import TrayIcon, tooltip_text
from registry_core.broker.decide.core import Pending
from registry_core.broker.question import ApprovalRequest


def test_every_state_has_its_own_icon_file() -> None:
    files = {icon_path(f"ollie-tray-{s.value}").read_bytes() for s in TrayState}
    assert len(files) == len(TrayState)


def test_pending_icon_carries_a_badge(qapp: QApplication) -> None:
    plain = state_icon(TrayState.PENDING, 0).pixmap(64, 64).toImage()
    badged = state_icon(TrayState.PENDING, 3).pixmap(64, 64).toImage()
    assert plain != badged


def test_tooltip_says_the_state_in_words() -> None:
    assert "no pending" in tooltip_text(TrayState.IDLE, 0)
    assert "2 requests waiting" in tooltip_text(TrayState.PENDING, 2)
    assert "1 request waiting" in tooltip_text(TrayState.PENDING, 1)
    assert "denied" in tooltip_text(TrayState.PAUSED, 0)
    assert "socket" in tooltip_text(TrayState.ERROR, 0, "socket could not be bound")


def test_menu_lists_pending_requests_and_actions(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    calls: list[tuple[str, Any]] = []
    tray = TrayIcon(recording_actions(calls))
    assert tray.state is TrayState.IDLE
    texts = tray.action_texts()
    for entry in ("Tool &Browser…", "&Policies…", "&Audit log…", "&Quit"):
        assert entry in texts
    assert any("Pause" in t for t in texts)
    assert any("Start at login" in t for t in texts)

    req = approval_request(id="r1", tool="system_logs")
    tray.set_pending([Pending(req, time.monotonic(), showing=True)])
    assert tray.state is TrayState.PENDING
    assert "1 request waiting" in tray.toolTip()
    entry = next(a for a in tray.menu.actions() if a.text().startswith("system_logs"))
    entry.trigger()
    assert ("open", ("r1",)) in calls

    quit_action = next(a for a in tray.menu.actions() if a.text() == "&Quit")
    quit_action.trigger()
    assert calls[-1][0] == "quit"


def test_pause_toggle_changes_state_and_reports(qapp: QApplication) -> None:
    calls: list[tuple[str, Any]] = []
    tray = TrayIcon(recording_actions(calls))
    pause = next(a for a in tray.menu.actions() if "Pause" in a.text())
    pause.trigger()
    assert ("paused", (True,)) in calls
    assert tray.state is TrayState.PAUSED
    assert "denied" in tray.toolTip()


def test_error_state_sticks(qapp: QApplication) -> None:
    tray = TrayIcon(recording_actions([]))
    tray.set_error("cannot bind /run/x.sock")
    tray.set_pending([])
    assert tray.state is TrayState.ERROR
    assert "cannot bind" in tray.toolTip()


def test_menu_lists_recent_unattended_denials_with_their_reason(qapp: QApplication) -> None:
    from registry_core.broker.decide.denials import Denial, DeniedBy

    calls: list[tuple[str, Any]] = []
    recent = [
        Denial(time.time(), "write_note", "laptop", DeniedBy.PAUSED, "requests are paused"),
        Denial(time.time(), "ghost", "laptop", DeniedBy.UNKNOWN_TOOL, "no tool named 'ghost'"),
    ]
    tray = TrayIcon(recording_actions(calls, recent_denials=lambda: recent))
    texts = tray.action_texts()
    assert "Recently denied (not by you):" in texts
    lines = [t for t in texts if "—" in t and ("write_note" in t or "ghost" in t)]
    assert [line.split("  ", 1)[1] for line in lines] == [
        "write_note — paused: requests are paused",
        "ghost — unknown tool: no tool named 'ghost'",
    ]
    entry = next(a for a in tray.menu.actions() if a.text() == lines[0])
    entry.trigger()
    assert calls[-1][0] == "audit"  # the whole story is in the audit log
    assert "Recently denied (not by you):" not in TrayIcon(recording_actions(calls)).action_texts()


def test_demo_mode_marks_the_demo_tools_in_the_menu(qapp: QApplication) -> None:
    calls: list[tuple[str, Any]] = []
    text = "Demo tools: 12 bundled examples (read-only)"
    tray = TrayIcon(recording_actions(calls, demo_tools=lambda: text))
    entry = next(a for a in tray.menu.actions() if a.text() == text)
    entry.trigger()
    assert calls[-1][0] == "browser"
    plain = TrayIcon(recording_actions(calls, demo_tools=lambda: ""))
    assert not [t for t in plain.action_texts() if t.startswith("Demo tools")]


def test_menu_offers_deny_all_pending(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    calls: list[tuple[str, Any]] = []
    tray = TrayIcon(recording_actions(calls, deny_all=lambda: calls.append(("deny_all", ()))))
    assert not any(t.startswith("Deny all") for t in tray.action_texts())  # nothing pending
    now = time.monotonic()
    tray.set_pending(
        [
            Pending(approval_request(id="r1"), now, showing=True),
            Pending(approval_request(id="r2"), now),
        ]
    )
    deny_all = next(a for a in tray.menu.actions() if a.text() == "Deny all 2 pending")
    deny_all.trigger()
    assert calls[-1] == ("deny_all", ())
