"""The broker records a decision without building an ``AuditRecord`` (issue 19).

``record_decision`` makes the common line straight from the approval request
(``recording.line_parts`` and ``audit_quick.assemble``); what it writes must be, byte for byte, the
general encoding of the record the same decision makes (``audit_record``).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.elevation import recording
from registry_core.elevation.audit import MAX_LINE, AuditLog
from registry_core.elevation.identity import Requester
from registry_core.elevation.messages import DecidedBy, Decision, Kind, PatternKind
from registry_core.elevation.prompter import ActionDetails, ApprovalRequest, Remember

text = st.text(max_size=12)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=12,
)
actions = st.one_of(
    st.none(),
    st.builds(
        ActionDetails,
        agent=text,
        tool=text,
        summary=text,
        detail=st.none(),
        display=st.none(),
        command=st.one_of(st.none(), text),
        path=st.none(),
        pattern_kind=st.sampled_from(list(PatternKind)),
        pattern=text,
    ),
)


@st.composite
def decisions(draw: st.DrawFn) -> dict[str, Any]:
    requester = Requester(
        pid=draw(st.integers(1, 2**22)),
        uid=1000,
        gid=1000,
        exe=draw(text),
        cmdline=tuple(draw(st.lists(text, max_size=3))),
        cwd=draw(text),
        sandboxed=draw(st.booleans()),
    )
    big = draw(st.sampled_from([0, 100, MAX_LINE]))
    ar = ApprovalRequest(
        id=draw(text),
        tool=draw(text),
        kind=draw(st.sampled_from(list(Kind))),
        description=draw(text),
        variant=None,
        executable=draw(st.one_of(st.none(), text)),
        sha256=draw(st.one_of(st.none(), st.just("ab" * 32))),
        argv=tuple(draw(st.lists(text, max_size=3))),
        args=draw(st.dictionaries(text, json_values, max_size=4)),
        cwd="/",
        requester=requester,
        host=draw(text),
        timeout=60.0,
        code=draw(st.one_of(st.none(), text.map(lambda c: c + "c" * big))),
        remote=draw(st.booleans()),
        claimed_host=draw(st.one_of(st.none(), text)),
        client=draw(st.one_of(st.none(), text)),
        action=draw(actions),
    )
    return {
        "ar": ar,
        "decision": draw(st.sampled_from(list(Decision))),
        "by": draw(st.sampled_from(list(DecidedBy))),
        "remember": draw(st.one_of(st.none(), st.sampled_from(list(Remember)))),
        "reason": draw(text),
        "time": draw(st.one_of(st.floats(0, 4e9), st.just(-1.5))),
    }


@settings(max_examples=300, deadline=None)
@given(decisions())
def test_the_recorded_line_is_the_records_general_line(case: dict[str, Any]) -> None:
    when = case.pop("time")
    expected = recording.audit_record(**case, time=when)._general_line()
    clock = recording._now
    recording._now = lambda: when  # the record's time, fixed for the comparison
    try:
        with tempfile.TemporaryDirectory() as tmp:
            audit = AuditLog(Path(tmp) / "audit.jsonl")
            recording.record_decision(audit, **case)
            written = (Path(tmp) / "audit.jsonl").read_bytes()
    finally:
        recording._now = clock
    assert written == expected


def test_an_agents_action_is_recorded_with_its_action(tmp_path: Path) -> None:
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
    ar = ApprovalRequest(
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
        recording.write_line(AuditLog(path), b'{"x":1}\n')
    [message] = [r.getMessage() for r in caplog.records]
    assert message == f"could not write the audit log {path}: cannot open {path}: Is a directory"
