"""The Audit window over a real AuditLog on a temporary audit.jsonl."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ollie_tray.windows.audit import AuditWindow
from registry_core.broker.question import Remember
from registry_core.broker.record.audit import AuditLog, AuditRecord, AuditRequester
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind

T0 = 1_750_000_000.0
REQUESTER = AuditRequester(4242, "/usr/bin/python3.11", ("python3", "agent.py"), "/home/alice")


def record(
    tool: str,
    decision: Decision,
    by: DecidedBy,
    reason: str,
    minute: int,
    host: str = "laptop",
    kind: Kind = Kind.SUDO,
) -> AuditRecord:
    return AuditRecord(
        tool=tool,
        kind=kind,
        host=host,
        requester=REQUESTER,
        decision=decision,
        by=by,
        reason=reason,
        remember=Remember.ONCE,
        time=T0 + minute * 60,
        executable=f"/opt/tools/{tool}",
        argv=("sudo", "-A", "--", f"/opt/tools/{tool}"),
    )


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    log = AuditLog(tmp_path / "state" / "audit.jsonl")
    for item in [
        record("system_logs", Decision.ALLOW, DecidedBy.USER, "approved by the user", 0),
        record("apt_upgrade", Decision.DENY, DecidedBy.POLICY, "remembered: deny", 1, "build"),
        record("disk_usage", Decision.ALLOW, DecidedBy.POLICY, "remembered: allow", 2),
        record("execute_code", Decision.DENY, DecidedBy.TIMEOUT, "no answer within 60 s", 3),
        record("net_scan", Decision.DENY, DecidedBy.USER, "Denied by the user", 4),
    ]:
        log.append(item)
    return log


def make(qtbot: QtBot, log: AuditLog, **kwargs: int) -> AuditWindow:
    window = AuditWindow(log, **kwargs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def shown_tools(window: AuditWindow) -> list[str]:
    return [r.tool for r in window.visible_records()]


def cell(window: AuditWindow, row: int, column: int) -> str:
    return str(window.proxy.index(row, column).data())


def test_newest_first(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    assert shown_tools(window) == [
        "net_scan",
        "execute_code",
        "disk_usage",
        "apt_upgrade",
        "system_logs",
    ]
    assert window.status_label.text() == "5 most recent decisions."
    assert window.windowTitle() == "Ollie — audit log"


def test_columns(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    local = dt.datetime.fromtimestamp(T0 + 4 * 60).strftime("%Y-%m-%d %H:%M:%S")
    assert [cell(window, 0, c) for c in range(8)] == [
        local,
        "net_scan",
        "sudo",
        "laptop",
        "deny",
        "user",
        "4242 /usr/bin/python3.11",
        "Denied by the user",
    ]
    tooltip = str(window.proxy.index(0, 1).data(Qt.ItemDataRole.ToolTipRole))
    assert "/opt/tools/net_scan" in tooltip
    assert "python3 agent.py" in tooltip


def test_text_filter_is_case_insensitive_over_all_columns(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    qtbot.keyClicks(window.filter_edit, "DENIED BY")  # the reason column
    assert shown_tools(window) == ["net_scan"]
    window.filter_edit.setText("build")  # the host column
    assert shown_tools(window) == ["apt_upgrade"]
    window.filter_edit.setText("policy")  # the "by" column
    assert shown_tools(window) == ["disk_usage", "apt_upgrade"]
    assert window.status_label.text() == "2 of 5 most recent decisions match."
    window.filter_edit.clear()
    assert len(shown_tools(window)) == 5


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("All decisions", ["net_scan", "execute_code", "disk_usage", "apt_upgrade", "system_logs"]),
        ("Allowed", ["disk_usage", "system_logs"]),
        ("Denied", ["net_scan", "execute_code", "apt_upgrade"]),
    ],
)
def test_decision_filter(qtbot: QtBot, log: AuditLog, label: str, expected: list[str]) -> None:
    window = make(qtbot, log)
    window.decision_combo.setCurrentIndex(window.decision_combo.findText(label))
    assert shown_tools(window) == expected


def test_both_filters_combine(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    window.decision_combo.setCurrentIndex(window.decision_combo.findText("Denied"))
    window.filter_edit.setText("user")
    assert shown_tools(window) == ["net_scan"]


def test_refresh_reads_new_records(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    log.append(record("backup", Decision.DENY, DecidedBy.CLIENT_GONE, "the requester went away", 9))
    assert "backup" not in shown_tools(window)
    window.refresh_button.click()
    assert shown_tools(window)[0] == "backup"


def test_limit(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log, limit=2)
    assert shown_tools(window) == ["net_scan", "execute_code"]


def test_empty_and_missing_log(qtbot: QtBot, tmp_path: Path) -> None:
    window = make(qtbot, AuditLog(tmp_path / "nothing.jsonl"))
    assert window.model.rowCount() == 0
    assert window.status_label.text() == "No decisions recorded yet."


def test_unreadable_log_is_reported(qtbot: QtBot, tmp_path: Path) -> None:
    window = make(qtbot, AuditLog(tmp_path))  # a directory cannot be read as the log
    assert window.status_label.text().startswith("Could not read the audit log:")


def test_accessible_names(qtbot: QtBot, log: AuditLog) -> None:
    window = make(qtbot, log)
    for widget in (window.table, window.filter_edit, window.decision_combo, window.refresh_button):
        assert widget.accessibleName()
