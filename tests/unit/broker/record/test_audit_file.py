"""The audit file under faults: a full disk, rotation, FIFOs and links."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.record.audit import (
    AuditError,
    AuditLog,
    AuditRecord,
    AuditRequester,
    audit_log_from_env,
)
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind


def rec(n: int, pad: int = 600) -> AuditRecord:
    return AuditRecord(
        time=1_750_000_000.0 + n,
        request_id=f"r{n}",
        tool="greet",
        kind=Kind.SANDBOX,
        host="laptop",
        requester=AuditRequester(pid=42, exe="/usr/bin/python3"),
        decision=Decision.DENY,
        by=DecidedBy.POLICY,
        reason="x" * pad,
    )


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, mounted for this test (root only; CI must be able to)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs in CI: {exc}")
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _whole_lines(data: bytes) -> list[dict[str, Any]]:
    assert data == b"" or data.endswith(b"\n"), "the file ends inside a line"
    return [json.loads(line) for line in data.splitlines()]


def test_a_full_disk_leaves_whole_lines_and_records_the_gap(tiny_tmpfs: Path) -> None:
    log = AuditLog(tiny_tmpfs / "audit.jsonl")
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * (60 * 1024))  # leaves a few KiB
    written, lost, errors = 0, 0, set()
    for n in range(200):
        try:
            log.append(rec(n))
            written += 1
        except AuditError as exc:
            errors.add(str(exc))
            lost += 1
    assert all(str(tiny_tmpfs / "audit.jsonl") in e for e in errors)
    assert written > 0
    assert lost > 0
    lines = _whole_lines((tiny_tmpfs / "audit.jsonl").read_bytes())
    assert len(lines) == written  # no fragment survived a short write
    filler.unlink()  # the disk has room again
    log.append(rec(999))
    lines = _whole_lines((tiny_tmpfs / "audit.jsonl").read_bytes())
    gap, last = lines[-2], lines[-1]
    assert gap["gap"] == lost
    assert "disk full" in gap["reason"] or "short write" in gap["reason"]
    assert last["request_id"] == "r999"
    tail = log.read_tail(1000)
    assert tail.lost == lost
    assert tail.skipped == 0
    assert [r.request_id for r in tail.records][-1] == "r999"
    log.close()


def test_rotation_by_size_keeps_n_files_and_reads_across_them(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=64 * 1024, keep=2)
    line = len(rec(0).to_line())
    count = 3 * (64 * 1024) // line + 5
    for n in range(count):
        log.append(rec(n))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.lock"]
    for name in files[:3]:
        size = (tmp_path / name).stat().st_size
        assert 0 < size <= 64 * 1024
        _whole_lines((tmp_path / name).read_bytes())
    ids = [r.request_id for r in log.read_tail(10_000).records]
    assert ids == [f"r{n}" for n in range(count - len(ids), count)]  # newest, in order
    assert len(ids) > 2 * (64 * 1024) // line - 2
    log.close()


def test_rotation_is_configurable_from_the_environment(tmp_path: Path) -> None:
    log = audit_log_from_env(
        tmp_path / "a.jsonl", {"OLLIE_AUDIT_MAX_BYTES": "70000", "OLLIE_AUDIT_KEEP": "1"}
    )
    assert (log._file.max_bytes, log.keep) == (70000, 1)
    default = audit_log_from_env(tmp_path / "a.jsonl", {"OLLIE_AUDIT_KEEP": "zero"})
    assert (default._file.max_bytes, default.keep) == (10 * 1024 * 1024, 5)


def _bounded(action: Callable[[], object]) -> BaseException | None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "hung on a hostile audit path"
    return errors[0] if errors else None


@pytest.mark.parametrize("kind", ["fifo", "symlink", "device", "directory"])
def test_a_hostile_audit_path_is_a_clear_error_never_a_hang(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "audit.jsonl"
    target = tmp_path / "elsewhere"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "device":
        path.symlink_to("/dev/null")
    else:
        path.mkdir()
    log = AuditLog(path)
    error = _bounded(lambda: log.append(rec(1)))
    assert isinstance(error, AuditError)
    assert str(path) in str(error)
    error = _bounded(lambda: log.read_tail(5))
    assert isinstance(error, AuditError)
    assert "not a regular file" in str(error) or "Is a directory" in str(error)
    assert not target.exists()


def test_a_fifo_reader_on_the_path_gets_nothing(tmp_path: Path) -> None:
    # A FIFO with a reader attached: opening for writing would succeed; the type check refuses.
    path = tmp_path / "audit.jsonl"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        error = _bounded(lambda: AuditLog(path).append(rec(1)))
        assert isinstance(error, AuditError)
        assert "FIFO" in str(error)
        assert os.read(reader, 10) == b""  # no writer ever came
    finally:
        os.close(reader)
