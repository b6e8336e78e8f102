"""The audit record and log, exactly: every field of a line in both
directions, every refusal of a line word for word, the cuts of an over-long record
at their limits, the tail's counts, held records, and the environment's settings."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Remember
from registry_core.broker.record import audit
from registry_core.broker.record.audit import (
    MAX_LINE,
    AuditError,
    AuditLog,
    AuditRecord,
    AuditRequester,
    AuditTail,
    _shrink,
    audit_log_from_env,
)
from registry_core.broker.record.audit_file import gap_line, rotated
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind

T0 = 1_750_000_000.25
WHEN = "2025-06-15T15:06:40.250Z"
SANDBOXED = AuditRequester(
    pid=77, exe="/usr/bin/node", cmdline=("node", "agent.js"), cwd="/work", sandboxed=True
)


def full(**kw: Any) -> AuditRecord:
    """A record with every field set to something other than its default."""
    base: dict[str, Any] = {
        "time": T0,
        "request_id": "r9",
        "tool": "system_logs",
        "kind": Kind.SUDO,
        "host": "laptop",
        "requester": SANDBOXED,
        "decision": Decision.DENY,
        "by": DecidedBy.POLICY,
        "reason": "denied by policy",
        "remember": Remember.DENY_ALWAYS,
        "remote": True,
        "executable": "/opt/tools/system_logs",
        "sha256": "f" * 64,
        "argv": ("sudo", "-A", "--", "/opt/tools/system_logs"),
        "args": {"lines": 10, "unit": ["a", "b"]},
        "code": "journalctl -n 10",
        "claimed_host": "desk",
        "client": "claude",
    }
    base.update(kw)
    return AuditRecord(**base)


FULL_JSON: dict[str, Any] = {
    "time": WHEN,
    "request_id": "r9",
    "tool": "system_logs",
    "kind": "sudo",
    "host": "laptop",
    "remote": True,
    "requester": {
        "pid": 77,
        "exe": "/usr/bin/node",
        "cmdline": ["node", "agent.js"],
        "cwd": "/work",
        "sandboxed": True,
        "origin": "from inside the sandbox",
    },
    "executable": "/opt/tools/system_logs",
    "sha256": "f" * 64,
    "argv": ["sudo", "-A", "--", "/opt/tools/system_logs"],
    "args": {"lines": 10, "unit": ["a", "b"]},
    "code": "journalctl -n 10",
    "decision": "deny",
    "by": "policy",
    "remember": "deny_always",
    "reason": "denied by policy",
    "claimed_host": "desk",
    "client": "claude",
}


def test_every_field_is_written_and_read_back() -> None:
    record = full()
    assert record.to_json() == FULL_JSON
    line = record.to_line()
    assert line == json.dumps(FULL_JSON, separators=(",", ":")).encode() + b"\n"
    assert AuditRecord.from_json(json.loads(line)) == record


def test_an_agent_action_is_written_as_kind_action_and_read_back() -> None:
    action = {"agent": "claude", "tool": "Bash", "summary": "rm -rf build", "pattern": "rm *"}
    record = full(kind=Kind.SANDBOX, action=action, claimed_host=None, client=None)
    expected = {**FULL_JSON, "kind": "action", "action": action}
    del expected["claimed_host"], expected["client"]
    assert record.to_json() == expected
    line = record.to_line()
    assert line == json.dumps(expected, separators=(",", ":")).encode() + b"\n"
    back = AuditRecord.from_json(json.loads(line))
    assert back == record
    assert (back.kind, back.action) == (Kind.SANDBOX, action)


def test_empty_claimed_host_and_client_are_left_out() -> None:
    obj = full(claimed_host="", client="").to_json()
    assert "claimed_host" not in obj and "client" not in obj
    assert list(obj)[-1] == "reason"


def _minimal() -> dict[str, Any]:
    return {
        "time": WHEN,
        "tool": "greet",
        "kind": "sandbox",
        "requester": {"pid": 5},
        "decision": "allow",
        "by": "user",
    }


def test_a_line_with_only_the_required_keys_takes_every_default() -> None:
    assert AuditRecord.from_json(_minimal()) == AuditRecord(
        time=T0,
        tool="greet",
        kind=Kind.SANDBOX,
        host="",
        requester=AuditRequester(pid=5, exe="", cmdline=(), cwd="", sandboxed=False),
        decision=Decision.ALLOW,
        by=DecidedBy.USER,
        reason="",
        remember=None,
        request_id=None,
        remote=False,
        executable=None,
        sha256=None,
        argv=(),
        args=None,
        code=None,
        claimed_host=None,
        client=None,
        action=None,
    )


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        ({"remote": 1}, "remote", True),
        ({"remote": 0}, "remote", False),
        ({"remote": None}, "remote", False),
        ({"args": ["a", "b"]}, "args", {"_truncated": ["a", "b"]}),
        ({"args": "...[truncated all chars]"}, "args", {"_truncated": "...[truncated all chars]"}),
        ({"args": None}, "args", None),
        ({"args": {}}, "args", {}),
        ({"argv": None}, "argv", ()),
        ({"argv": []}, "argv", ()),
        ({"remember": "always"}, "remember", Remember.ALWAYS),
        ({"remember": None}, "remember", None),
        ({"kind": "action", "action": {"tool": "Bash"}}, "kind", Kind.SANDBOX),
        ({"kind": "action", "action": {"tool": "Bash"}}, "action", {"tool": "Bash"}),
        ({"kind": "sudo", "action": ["not", "an", "object"]}, "action", None),
        ({"request_id": 7}, "request_id", 7),
        ({"time": "2025-06-15T15:06:40.250"}, "time", T0),  # no offset: UTC
        ({"time": "2025-06-15T17:06:40.250+02:00"}, "time", T0),
    ],
)
def test_a_lines_values_are_read_as_written(change: dict[str, Any], field: str, value: Any) -> None:
    assert getattr(AuditRecord.from_json({**_minimal(), **change}), field) == value


@pytest.mark.parametrize(
    ("requester", "field", "value"),
    [
        ({"pid": 5, "sandboxed": True}, "sandboxed", True),
        ({"pid": 5, "sandboxed": 1}, "sandboxed", False),
        ({"pid": 5, "sandboxed": "yes"}, "sandboxed", False),
        ({"pid": 5, "cmdline": None}, "cmdline", ()),
        ({"pid": 5, "cmdline": ["a", "b"]}, "cmdline", ("a", "b")),
    ],
)
def test_the_requesters_values_are_read_as_written(
    requester: dict[str, Any], field: str, value: Any
) -> None:
    got = AuditRecord.from_json({**_minimal(), "requester": requester}).requester
    assert getattr(got, field) == value


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"requester": [5]}, ValueError, "requester.pid must be an integer"),
        ({"requester": {"pid": "5"}}, ValueError, "requester.pid must be an integer"),
        ({"requester": {}}, ValueError, "requester.pid must be an integer"),
        ({"time": 1750000000}, ValueError, "time must be a string"),
        ({"tool": 5}, TypeError, "expected a string, got int"),
        ({"host": None}, TypeError, "expected a string, got NoneType"),
        ({"reason": ["r"]}, TypeError, "expected a string, got list"),
        ({"executable": 1}, TypeError, "expected a string, got int"),
        ({"sha256": 1.5}, TypeError, "expected a string, got float"),
        ({"code": {}}, TypeError, "expected a string, got dict"),
        ({"claimed_host": True}, TypeError, "expected a string, got bool"),
        ({"client": 3}, TypeError, "expected a string, got int"),
        ({"argv": ["a", 2]}, TypeError, "expected a string, got int"),
        ({"requester": {"pid": 5, "exe": 1}}, TypeError, "expected a string, got int"),
        ({"requester": {"pid": 5, "cwd": None}}, TypeError, "expected a string, got NoneType"),
        ({"requester": {"pid": 5, "cmdline": [1]}}, TypeError, "expected a string, got int"),
        ({"kind": "root"}, ValueError, "'root' is not a valid Kind"),
        ({"decision": "maybe"}, ValueError, "'maybe' is not a valid Decision"),
        ({"by": "nobody"}, ValueError, "'nobody' is not a valid DecidedBy"),
        ({"remember": "forever"}, ValueError, "'forever' is not a valid Remember"),
    ],
)
def test_a_bad_value_is_refused_in_words(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        AuditRecord.from_json({**_minimal(), **change})
    assert str(caught.value) == message


@pytest.mark.parametrize("key", ["time", "tool", "kind", "requester", "decision", "by"])
def test_a_missing_required_key_is_refused(key: str) -> None:
    obj = _minimal()
    del obj[key]
    with pytest.raises(KeyError) as caught:
        AuditRecord.from_json(obj)
    assert caught.value.args == (key,)


def test_a_requester_without_a_pid_names_the_pid() -> None:
    with pytest.raises(ValueError, match=r"^requester\.pid must be an integer$"):
        AuditRecord.from_json({**_minimal(), "requester": {"exe": "/bin/sh"}})


def test_a_requesters_label_says_where_it_runs() -> None:
    assert SANDBOXED.label() == "77 /usr/bin/node (from inside the sandbox)"
    assert AuditRequester(pid=3).label() == "3 ?"
    assert AuditRequester(pid=3, exe="/bin/sh").label() == "3 /bin/sh"


def test_a_requesters_audit_view() -> None:
    requester = Requester(
        pid=7, uid=1000, gid=1000, exe="/bin/sh", cmdline=("sh", "-c"), cwd="/tmp", sandboxed=True
    )
    view = AuditRequester.from_requester(requester)
    assert view == AuditRequester(7, "/bin/sh", ("sh", "-c"), "/tmp", True)
    assert view.to_json() == {
        "pid": 7,
        "exe": "/bin/sh",
        "cmdline": ["sh", "-c"],
        "cwd": "/tmp",
        "sandboxed": True,
        "origin": "from inside the sandbox",
    }


# --- cutting a record down to one line ----------------------------------------------


def test_a_string_is_cut_only_past_its_limit() -> None:
    assert _shrink("x" * 32, 32) == "x" * 32
    assert _shrink("x" * 33, 32) == "x" * 32 + "...[truncated 1 chars]"
    assert _shrink("x" * 100, 32) == "x" * 32 + "...[truncated 68 chars]"


@pytest.mark.parametrize(("limit", "items"), [(32, 4), (39, 4), (40, 5), (47, 5), (48, 6)])
def test_a_container_keeps_an_eighth_of_the_limit_in_items_and_at_least_four(
    limit: int, items: int
) -> None:
    assert _shrink(list(range(items)), limit) == list(range(items))
    assert _shrink(list(range(items + 2)), limit) == [
        *range(items),
        "...[truncated 2 more items]",
    ]
    mapping = {n: n for n in range(items)}
    assert _shrink(mapping, limit) == {str(n): n for n in range(items)}
    assert _shrink({n: n for n in range(items + 3)}, limit) == {
        **{str(n): n for n in range(items)},
        "...": "[truncated 3 more keys]",
    }


def test_nesting_is_cut_at_sixteen_levels() -> None:
    def lists(levels: int, inner: Any) -> Any:
        for _ in range(levels):
            inner = [inner]
        return inner

    def dicts(levels: int, inner: Any) -> Any:
        for _ in range(levels):
            inner = {"k": inner}
        return inner

    deep = "...[truncated: nested too deeply]"
    assert _shrink(lists(16, "leaf"), 8192) == lists(16, "leaf")
    assert _shrink(lists(17, "leaf"), 8192) == lists(16, deep)
    assert _shrink(dicts(16, 1), 8192) == dicts(16, 1)
    assert _shrink(dicts(17, 1), 8192) == dicts(16, deep)
    assert _shrink(lists(16, {}), 8192) == lists(16, deep)
    assert _shrink(lists(16, "x" * 40), 32) == lists(16, "x" * 32 + "...[truncated 8 chars]")
    assert _shrink(lists(2, "leaf"), 8192, depth=15) == [deep]


def test_what_is_not_a_container_or_string_is_kept() -> None:
    assert _shrink(b"x" * 100, 32) == b"x" * 100
    assert _shrink(12345678901234567890, 32) == 12345678901234567890
    assert _shrink(None, 32) is None
    assert _shrink(("a", "b"), 32) == ["a", "b"]


def test_a_line_of_exactly_the_limit_is_kept_whole() -> None:
    action = {"tool": "Bash"}  # the general path: an action has no quick line
    base = len(full(action=action, reason="").to_line())
    reason = "r" * (MAX_LINE - base)
    line = full(action=action, reason=reason).to_line()
    assert len(line) == MAX_LINE
    assert json.loads(line)["reason"] == reason
    longer = full(action=action, reason=reason + "r").to_line()
    cut = len(reason) + 1 - 8192
    assert json.loads(longer)["reason"] == "r" * 8192 + f"...[truncated {cut} chars]"


def test_an_over_long_record_is_cut_at_the_first_limit_that_fits() -> None:
    args = {"blob": "b" * 9000, "small": "s" * 3000}
    line = full(args=args, code="c" * 70_000).to_line()
    obj = json.loads(line)
    assert obj["code"] == "c" * 8192 + "...[truncated 61808 chars]"
    assert obj["args"] == {"blob": "b" * 8192 + "...[truncated 808 chars]", "small": "s" * 3000}
    assert obj["requester"] == FULL_JSON["requester"]
    assert obj["reason"] == "denied by policy"


def test_circular_args_are_cut_by_depth_not_dropped() -> None:
    loop: dict[str, Any] = {"x": 1}
    loop["self"] = loop
    obj = json.loads(full(args={"loop": loop}).to_line())
    inner = obj["args"]["loop"]
    for _ in range(13):
        assert inner["x"] == 1
        inner = inner["self"]
    assert inner == {"x": 1, "self": "...[truncated: nested too deeply]"}


def _tree(levels: int) -> Any:
    level: Any = "x"
    for _ in range(levels):
        level = {"a": level, "b": level, "c": level, "d": level}
    return level


def test_args_too_big_at_every_limit_leave_the_decision_and_drop_the_payload() -> None:
    record = full(args={"tree": _tree(8)}, reason="r" * 40, tool="t" * 40)  # 4**8 leaves
    line = record.to_line()
    assert json.loads(line) == {
        **FULL_JSON,
        "tool": "t" * 32 + "...[truncated 8 chars]",
        "reason": "r" * 32 + "...[truncated 8 chars]",
        "requester": {**FULL_JSON["requester"], "cmdline": []},
        "argv": [],
        "args": "...[truncated all chars]",
        "code": None,
        "sha256": "f" * 32 + "...[truncated 32 chars]",
    }
    back = AuditRecord.from_json(json.loads(line))  # still a readable record
    assert (back.decision, back.by, back.remember) == (
        Decision.DENY,
        DecidedBy.POLICY,
        Remember.DENY_ALWAYS,
    )
    assert back.requester.sandboxed


def test_a_record_cut_hardest_keeps_every_key_of_its_own(tmp_path: Path) -> None:
    action = {
        "agent": "claude",
        "tool": "Bash",
        "summary": "s" * 40,
        "pattern_kind": "exact",
        "pattern": "p" * 40,
        "session": False,
    }
    # Args too long at every limit but the smallest (16 items a list at 128 characters:
    # 16**3 strings; 4**3 at 32).
    args = {"wide": [[["w" * 40] * 20] * 20] * 20}
    record = full(args=args, action=action, kind=Kind.SANDBOX)
    obj = json.loads(record.to_line())
    assert list(obj) == [*FULL_JSON, "action"]
    assert list(obj["requester"]) == list(FULL_JSON["requester"])
    assert obj["action"] == {
        **action,
        "summary": "s" * 32 + "...[truncated 8 chars]",
        "pattern": "p" * 32 + "...[truncated 8 chars]",
    }
    cut = "w" * 32 + "...[truncated 8 chars]"
    assert obj["args"]["wide"][3][3] == [cut] * 4 + ["...[truncated 16 more items]"]
    assert obj["args"]["wide"][4] == "...[truncated 16 more items]"
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(record)
    (back,) = log.tail(5)
    assert (back.decision, back.by, back.action) == (Decision.DENY, DecidedBy.POLICY, obj["action"])
    log.close()


# --- the log ----------------------------------------------------------------------------


def record(n: int) -> AuditRecord:
    return full(request_id=f"r{n}", time=T0 + n)


def test_a_tail_counts_every_gap_and_corrupt_line_it_passes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    lines = [
        record(1).to_line(),
        gap_line(2, "disk full", T0),
        b"not json\n",
        record(2).to_line(),
        gap_line(3, "disk full", T0),
        b"[1]\n",
        b"{}\n",
        record(3).to_line(),
    ]
    log.path.write_bytes(b"".join(lines))
    assert log.read_tail(10) == AuditTail((record(1), record(2), record(3)), skipped=3, lost=5)
    assert log.read_tail(2) == AuditTail((record(2), record(3)), skipped=2, lost=3)
    assert log.read_tail(1) == AuditTail((record(3),), skipped=0, lost=0)
    assert log.read_tail(0) == AuditTail((), skipped=0, lost=0)
    assert log.read_tail(-1) == AuditTail(())


def test_a_tail_reads_only_the_files_its_log_keeps(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(record(3).to_line())
    rotated(path, 1).write_bytes(record(2).to_line())
    rotated(path, 2).write_bytes(record(1).to_line())
    assert AuditLog(path, keep=1).tail(10) == [record(2), record(3)]
    assert AuditLog(path, keep=2).tail(10) == [record(1), record(2), record(3)]


def test_a_log_passes_its_limits_to_its_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=MAX_LINE, keep=1)
    first = record(1).to_line()
    count = MAX_LINE // len(first)
    for _ in range(count):
        log.append(record(1))
    log.append(record(2))  # past the limit: rotated first
    log.close()
    assert rotated(path, 1).read_bytes() == first * count
    assert path.read_bytes() == record(2).to_line()
    assert log.path == path and log.keep == 1


def test_a_gap_line_carries_the_time_of_the_append_that_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "_now", lambda: T0 + 5)
    blocker = tmp_path / "state"
    blocker.write_text("")
    log = AuditLog(blocker / "audit.jsonl")
    with pytest.raises(AuditError):
        log.append(record(1))
    blocker.unlink()
    log.append(record(2))
    assert log.path.read_bytes() == gap_line(1, "File exists", T0 + 5) + record(2).to_line()
    blocker_again = log.path
    log.close()
    blocker_again.unlink()
    blocker_again.mkdir()
    with pytest.raises(AuditError):
        log.append(record(3))
    blocker_again.rmdir()
    log.hold()
    log.append(record(4))
    assert log.release() == 1
    assert log.path.read_bytes() == gap_line(1, "Is a directory", T0 + 5) + record(4).to_line()
    log.close()


def test_held_records_are_this_threads_and_written_together_on_release(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    assert not log.holding
    assert log.release() == 0
    log.hold()
    assert log.holding
    log.append(record(1))
    log.append_line(record(2).to_line())
    other = threading.Thread(target=lambda: log.append(record(3)))
    other.start()
    other.join()
    assert log.path.read_bytes() == record(3).to_line()  # another thread's: at once
    log.hold()  # holding already: the kept records stay
    log.append(record(4))
    assert log.release() == 3
    assert not log.holding
    assert log.path.read_bytes() == b"".join(record(n).to_line() for n in (3, 1, 2, 4))
    log.append(record(5))  # no longer held
    assert log.path.read_bytes().endswith(record(5).to_line())
    log.close()


# --- the environment --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "max_bytes", "keep"),
    [
        ({}, 10 * 1024 * 1024, 5),
        ({"OLLIE_AUDIT_MAX_BYTES": "", "OLLIE_AUDIT_KEEP": "   "}, 10 * 1024 * 1024, 5),
        ({"OLLIE_AUDIT_MAX_BYTES": "65536", "OLLIE_AUDIT_KEEP": "1"}, 65536, 1),
        ({"OLLIE_AUDIT_MAX_BYTES": " 70000\n", "OLLIE_AUDIT_KEEP": " 12 "}, 70000, 12),
        ({"ollie_audit_max_bytes": "70000", "ollie_audit_keep": "2"}, 10 * 1024 * 1024, 5),
    ],
)
def test_the_environment_sets_the_rotation(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    env: dict[str, str],
    max_bytes: int,
    keep: int,
) -> None:
    caplog.set_level(logging.WARNING, logger="registry_core.broker.record.audit")
    log = audit_log_from_env(tmp_path / "audit.jsonl", env)
    assert (log._file.max_bytes, log._file.keep, log.keep) == (max_bytes, keep, keep)
    assert log.path == tmp_path / "audit.jsonl"
    assert caplog.messages == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OLLIE_AUDIT_MAX_BYTES": "65535"},
            "OLLIE_AUDIT_MAX_BYTES='65535': not a whole number >= 65536; using 10485760",
        ),
        (
            {"OLLIE_AUDIT_MAX_BYTES": "10M"},
            "OLLIE_AUDIT_MAX_BYTES='10M': not a whole number >= 65536; using 10485760",
        ),
        ({"OLLIE_AUDIT_KEEP": "0"}, "OLLIE_AUDIT_KEEP='0': not a whole number >= 1; using 5"),
        ({"OLLIE_AUDIT_KEEP": "-3"}, "OLLIE_AUDIT_KEEP='-3': not a whole number >= 1; using 5"),
        ({"OLLIE_AUDIT_KEEP": " x "}, "OLLIE_AUDIT_KEEP='x': not a whole number >= 1; using 5"),
    ],
)
def test_a_bad_setting_is_logged_and_the_default_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, env: dict[str, str], message: str
) -> None:
    caplog.set_level(logging.WARNING, logger="registry_core.broker.record.audit")
    log = audit_log_from_env(tmp_path / "audit.jsonl", env)
    assert (log._file.max_bytes, log.keep) == (10 * 1024 * 1024, 5)
    assert caplog.messages == [message]


def test_the_default_time_is_taken_when_the_record_is_made() -> None:
    before = time.time()
    made = AuditRecord(
        tool="t",
        kind=Kind.SUDO,
        host="h",
        requester=AuditRequester(pid=1),
        decision=Decision.DENY,
        by=DecidedBy.TIMEOUT,
    )
    assert before <= made.time <= time.time()


def test_a_time_without_an_offset_is_utc_whatever_the_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "XST-5:30")  # a POSIX rule: no zone files needed
    time.tzset()
    try:
        got = AuditRecord.from_json({**_minimal(), "time": "2025-06-15T15:06:40.250"})
    finally:
        monkeypatch.undo()
        time.tzset()
    assert got.time == T0


def test_a_cut_records_args_keep_fifteen_levels_below_the_record() -> None:
    def lists(levels: int, inner: Any) -> Any:
        for _ in range(levels):
            inner = [inner]
        return inner

    deep = "...[truncated: nested too deeply]"
    long = "c" * 70_000  # the code makes the record too long: every value is cut
    kept = json.loads(full(args={"n": lists(14, "leaf")}, code=long).to_line())
    assert kept["args"] == {"n": lists(14, "leaf")}
    assert kept["code"] == "c" * 8192 + "...[truncated 61808 chars]"
    cut = json.loads(full(args={"n": lists(15, "leaf")}, code=long).to_line())
    assert cut["args"] == {"n": lists(14, deep)}
