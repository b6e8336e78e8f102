"""The broker's audit record of a decision (``recording.py``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ActionDetails, ApprovalRequest
from registry_core.broker.record import recording
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind, PatternKind


def _action_request() -> ApprovalRequest:
    requester = Requester(pid=7, uid=1000, gid=1000, exe="/usr/bin/agent")
    details = ActionDetails(
        agent="claude",
        tool="Bash",
        summary="rm -rf build",
        detail=None,
        display=None,
        command="rm -rf build",
        path=None,
        pattern_kind=PatternKind.PROGRAM,
        pattern="rm",
        session="s-1",
    )
    return ApprovalRequest(
        id="r9",
        tool="Bash",
        kind=Kind.SANDBOX,
        description="rm -rf build",
        variant=None,
        executable=None,
        sha256=None,
        argv=(),
        args={"command": "rm -rf build"},
        cwd="/home/a",
        requester=requester,
        host="laptop",
        timeout=60.0,
        client="claude",
        action=details,
    )


def test_an_agents_action_is_recorded_with_its_action(tmp_path: Path) -> None:
    ar = _action_request()
    audit = AuditLog(tmp_path / "audit.jsonl")
    recording.record_decision(audit, ar, Decision.DENY, DecidedBy.USER, None, "denied by the user")
    [record] = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert record["action"] == {
        "agent": "claude",
        "tool": "Bash",
        "summary": "rm -rf build",
        "pattern_kind": "program",
        "pattern": "rm",
        "session": "s-1",
    }
    assert (record["request_id"], record["decision"], record["by"]) == ("r9", "deny", "user")


def test_an_unwritable_audit_log_is_reported_with_its_path_and_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    path.mkdir()  # a directory where the log should be
    with caplog.at_level(logging.ERROR):
        recording.record_decision(
            AuditLog(path), _action_request(), Decision.DENY, DecidedBy.USER, None, "no"
        )
    [message] = [r.getMessage() for r in caplog.records]
    assert message == f"could not write the audit log {path}: cannot open {path}: Is a directory"
