"""Audit records kept for one write (the broker server's event loop steps).

The store rules hold for a batch too: every write is whole lines or
nothing, a full disk leaves no fragment and the lost records are counted in
the next gap line, and rotation still keeps each file within its size.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

from test_audit_file import rec, tiny_tmpfs  # noqa: F401  (a fixture)

from registry_core.broker.record.audit import MAX_LINE, AuditError, AuditLog
from registry_core.broker.record.audit_file import rotated


def lines_of(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "the file ends inside a line"
    return [json.loads(line) for line in data.splitlines()]


def test_held_records_are_written_on_release_in_order(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.hold()
    for n in range(5):
        log.append(rec(n))
    assert not log.path.exists()  # nothing written while held
    assert log.release() == 5
    assert [r["request_id"] for r in lines_of(log.path)] == [f"r{n}" for n in range(5)]
    log.append(rec(5))  # released: written at once again
    assert len(lines_of(log.path)) == 6


def test_another_threads_records_are_not_held(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.hold()
    worker = threading.Thread(target=lambda: log.append(rec(1)))
    worker.start()
    worker.join(10)
    assert [r["request_id"] for r in lines_of(log.path)] == ["r1"]
    log.release()


def test_a_big_batch_is_written_in_whole_line_chunks_and_rotates(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=MAX_LINE * 2, keep=3)
    log.hold()
    for n in range(150):  # about 750 bytes each: more than the file may hold
        log.append(rec(n))
    log.release()
    files = [log.path, *(rotated(log.path, k) for k in (1, 2, 3))]
    seen = []
    for file in files:
        if file.exists():
            assert file.stat().st_size <= MAX_LINE * 2
            seen += [r["request_id"] for r in lines_of(file)]
    assert sorted(seen, key=lambda rid: int(rid[1:])) == [f"r{n}" for n in range(150)][-len(seen) :]
    assert len(seen) > 100


def test_a_full_disk_during_a_batch_leaves_whole_lines_and_counts_them(
    tiny_tmpfs: Path,  # noqa: F811
) -> None:
    log = AuditLog(tiny_tmpfs / "audit.jsonl")
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * (60 * 1024))  # leaves a few KiB
    log.hold()
    for n in range(200):
        log.append(rec(n))
    error = None
    try:
        log.release()
    except AuditError as exc:
        error = exc
    assert error is not None and "audit.jsonl" in str(error)
    written = lines_of(log.path)  # whole lines only
    lost = 200 - len(written)
    assert lost > 0
    filler.unlink()  # room again
    log.append(rec(999))
    after = lines_of(log.path)
    assert after[-2]["gap"] == lost
    assert after[-1]["request_id"] == "r999"
    assert log.read_tail(1000).lost == lost
    log.close()
