"""Unit tests of the audit log (JSON lines, permissions, truncation, tail)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Remember
from registry_core.broker.record.audit import (
    MAX_LINE,
    AuditError,
    AuditLog,
    AuditRecord,
    AuditRequester,
)
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind

T0 = 1_750_000_000.0
REQUESTER = AuditRequester(
    pid=4242, exe="/usr/bin/python3", cmdline=("python3", "agent.py"), cwd="/w"
)


def record(**kw: Any) -> AuditRecord:
    base: dict[str, Any] = {
        "time": T0,
        "request_id": "r1",
        "tool": "greet",
        "kind": Kind.SANDBOX,
        "host": "laptop",
        "requester": REQUESTER,
        "executable": "/opt/tools/greet",
        "sha256": "a" * 64,
        "argv": ("/opt/tools/greet",),
        "args": {"name": "Ada"},
        "decision": Decision.ALLOW,
        "by": DecidedBy.USER,
        "remember": Remember.ONCE,
        "reason": "approved by the user",
    }
    base.update(kw)
    return AuditRecord(**base)


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "state" / "ollie" / "audit.jsonl")


def test_append_and_tail_round_trip(log: AuditLog) -> None:
    records = [record(request_id=i, time=T0 + i) for i in range(5)]
    for r in records:
        log.append(r)
    assert log.tail(3) == records[2:]
    assert log.tail(100) == records
    assert log.tail(0) == []


def test_line_format(log: AuditLog) -> None:
    log.append(record(time=T0 + 0.25, remote=True, by=DecidedBy.POLICY, remember=None))
    (line,) = log.path.read_text().splitlines()
    obj = json.loads(line)
    assert list(obj) == [
        "time",
        "request_id",
        "tool",
        "kind",
        "host",
        "remote",
        "requester",
        "executable",
        "sha256",
        "argv",
        "args",
        "code",
        "decision",
        "by",
        "remember",
        "reason",
    ]
    assert obj["time"] == "2025-06-15T15:06:40.250Z"
    assert obj["requester"] == {
        "pid": 4242,
        "exe": "/usr/bin/python3",
        "cmdline": ["python3", "agent.py"],
        "cwd": "/w",
    }
    assert (obj["decision"], obj["by"], obj["remember"], obj["remote"]) == (
        "allow",
        "policy",
        None,
        True,
    )


def test_every_decider_round_trips(log: AuditLog) -> None:
    for by in DecidedBy:
        log.append(record(by=by, decision=Decision.DENY, remember=Remember.DENY_ALWAYS))
    assert [r.by for r in log.tail(100)] == list(DecidedBy)


def test_permissions(log: AuditLog) -> None:
    log.append(record())
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700


def test_existing_loose_file_is_made_private(log: AuditLog) -> None:
    log.path.parent.mkdir(parents=True)
    log.path.write_text("")
    log.path.chmod(0o644)
    log.append(record())
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600


def test_corrupt_lines_are_skipped_and_counted(log: AuditLog) -> None:
    log.append(record(request_id=1))
    with log.path.open("a") as fh:
        fh.write('not json\n\n[1, 2]\n{"tool": "x"}\n')
    log.append(record(request_id=2))
    with log.path.open("a") as fh:
        fh.write('{"time": "2025-06-15T15:06:40Z", "tool": "half a li')  # a crash mid-line
    tail = log.read_tail(10)
    assert [r.request_id for r in tail.records] == [1, 2]
    assert tail.skipped == 4
    assert [r.request_id for r in log.tail(1)] == [2]


def test_tail_reads_across_blocks(log: AuditLog) -> None:
    records = [record(request_id=i, code="x" * (i * 997 % 9000)) for i in range(300)]
    for r in records:
        log.append(r)
    assert log.path.stat().st_size > 4 * 64 * 1024
    assert log.tail(7) == records[-7:]
    assert log.tail(1000) == records


def test_over_long_garbage_counts_as_one_corrupt_line(log: AuditLog) -> None:
    log.append(record(request_id=1))
    with log.path.open("a") as fh:
        fh.write("g" * (5 * MAX_LINE) + "\n")
    log.append(record(request_id=2))
    tail = log.read_tail(5)
    assert [r.request_id for r in tail.records] == [1, 2]
    assert tail.skipped == 1


def test_missing_file_is_empty(log: AuditLog) -> None:
    assert log.tail(5) == []
    assert log.read_tail(5).skipped == 0


def test_long_fields_are_truncated_with_a_marker(log: AuditLog) -> None:
    code = "echo hi; " * 50_000
    log.append(record(code=code, args={"blob": "z" * 200_000}, reason="r" * 100_000))
    raw = log.path.read_bytes()
    assert len(raw) <= MAX_LINE
    assert raw.endswith(b"\n")
    assert raw.count(b"\n") == 1
    (got,) = log.tail(1)
    assert got.code is not None
    assert got.code.startswith("echo hi; ")
    assert "...[truncated " in got.code
    assert got.args is not None
    assert "...[truncated " in got.args["blob"]
    assert got.decision is Decision.ALLOW
    assert got.tool == "greet"


def test_many_items_are_truncated(log: AuditLog) -> None:
    args = {f"k{i}": i for i in range(20_000)}
    argv = tuple(f"arg{i}" for i in range(50_000))
    log.append(record(args=args, argv=argv))
    assert len(log.path.read_bytes()) <= MAX_LINE
    (got,) = log.tail(1)
    assert got.argv[0] == "arg0"
    assert "more items" in got.argv[-1]
    assert got.args is not None
    assert "more keys" in got.args["..."]


def test_pathological_nesting_still_fits(log: AuditLog) -> None:
    nested: Any = "leaf"
    for i in range(60):
        nested = {"a": nested, "b": [f"{i}-{j}" * 50 for j in range(40)]}
    r = record(args={"n": nested})
    line = r.to_line()
    assert len(line) <= MAX_LINE
    assert line.endswith(b"\n")
    log.append(r)
    assert log.tail(1)[0].tool == "greet"


def test_circular_or_odd_args_still_fit(log: AuditLog) -> None:
    loop: dict[str, Any] = {"x": 1}
    loop["self"] = loop
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    for args in ({"loop": loop}, {"deep": deep}, {"set": {1, 2}}):
        log.append(record(args=args))
    assert [r.tool for r in log.tail(5)] == ["greet"] * 3


def test_concurrent_appends_write_whole_lines(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=64 << 20)  # 16 MB: no rotation here

    def work(n: int) -> None:
        for i in range(100):
            log.append(record(request_id=f"{n}-{i}", code=str(n) * 20_000))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = log.path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = [AuditRecord.from_json(json.loads(line)) for line in lines[:-1]]
    assert len(parsed) == 800
    for r in parsed:
        n = str(r.request_id).split("-")[0]
        assert r.code == n * 20_000
    assert log.read_tail(1000).skipped == 0


def test_no_field_can_hold_a_secret() -> None:
    names = {f.name for f in dataclasses.fields(AuditRecord)}
    names |= {f.name for f in dataclasses.fields(AuditRequester)}
    for word in ("password", "secret", "grant", "token", "credential", "env"):
        assert not any(word in name for name in names), word
    obj = record().to_json()
    obj["password"] = "hunter2"  # a foreign key in a line is never carried along
    parsed = AuditRecord.from_json(obj)
    assert "hunter2" not in json.dumps(parsed.to_json())


def test_from_requester() -> None:
    requester = Requester(pid=7, uid=1000, gid=1000, exe="/bin/sh", cmdline=("sh",), cwd="/tmp")
    assert AuditRequester.from_requester(requester) == AuditRequester(7, "/bin/sh", ("sh",), "/tmp")
    assert AuditRequester.from_requester(requester).label() == "7 /bin/sh"


def test_append_failure_is_typed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AuditError, match="cannot open"):
        AuditLog(blocker / "audit.jsonl").append(record())


def test_default_time_is_now() -> None:
    import time

    before = time.time()
    r = AuditRecord(
        tool="t",
        kind=Kind.SUDO,
        host="h",
        requester=REQUESTER,
        decision=Decision.DENY,
        by=DecidedBy.TIMEOUT,
    )
    assert before <= r.time <= time.time()


# --- the descriptor kept open between appends ----------------------------------------


def fds_on(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
    return count


def test_appends_reuse_one_descriptor_and_close_releases_it(log: AuditLog) -> None:
    log.append(record(request_id=1))
    assert fds_on(log.path) == 1
    for i in range(2, 20):
        log.append(record(request_id=i))
    assert fds_on(log.path) == 1
    log.close()
    assert fds_on(log.path) == 0
    log.close()  # twice is harmless
    log.append(record(request_id=20))  # and a closed log opens the file again
    assert [r.request_id for r in log.tail(100)] == list(range(1, 21))
    log.close()


def test_a_dropped_log_closes_its_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append(record())
    assert fds_on(path) == 1
    del log
    gc.collect()
    assert fds_on(path) == 0


def test_a_rotated_log_is_reopened_at_its_path(log: AuditLog) -> None:
    log.append(record(request_id=1))
    rotated = log.path.with_name("audit.jsonl.1")
    log.path.rename(rotated)
    log.append(record(request_id=2))
    assert [r.request_id for r in AuditLog(rotated).tail(10)] == [1]
    assert [r.request_id for r in log.tail(10)] == [1, 2]  # read across the rotated file
    assert log.path.read_bytes().count(b"\n") == 1
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    log.close()


def test_a_removed_log_and_directory_are_created_again(log: AuditLog) -> None:
    log.append(record(request_id=1))
    log.path.unlink()
    log.path.parent.rmdir()
    log.append(record(request_id=2))
    assert [r.request_id for r in log.tail(10)] == [2]
    assert stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    log.close()


def test_a_replaced_log_gets_the_next_lines(log: AuditLog) -> None:
    log.append(record(request_id=1))
    replacement = log.path.with_name("new.jsonl")
    replacement.write_bytes(record(request_id="r").to_line())
    replacement.chmod(0o644)
    os.replace(replacement, log.path)
    log.append(record(request_id=2))
    assert [r.request_id for r in log.tail(10)] == ["r", 2]
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600  # made private on the way
    log.close()


def test_a_file_loosened_while_open_is_made_private_again(log: AuditLog) -> None:
    log.append(record(request_id=1))
    log.path.chmod(0o644)
    log.append(record(request_id=2))
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    log.close()


def test_a_path_that_became_unwritable_is_reported(log: AuditLog) -> None:
    log.append(record(request_id=1))
    log.path.unlink()
    log.path.mkdir()  # the path now names a directory
    with pytest.raises(AuditError, match="cannot open"):
        log.append(record(request_id=2))
    log.close()
