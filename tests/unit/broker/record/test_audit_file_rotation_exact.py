"""The audit file's rotation, exactly: past its limit only, every kept file shifted,
another writer's rotation not repeated, the lock and its wait, and writes of whole
lines landing in one file."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from audit_file_helpers import NOW, _open_count

from registry_core.broker.record.audit_file import (
    MAX_LINE,
    AuditError,
    AuditFile,
    gap_line,
    lines_backwards,
    rotated,
)
from registry_core.file_lock import LockTimeoutError, exclusive, lock_path_for


def test_a_file_is_rotated_only_past_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=2)
    first = b"a" * 999 + b"\n"
    audit.append(first, NOW)
    exact = b"b" * (MAX_LINE - len(first) - 1) + b"\n"
    audit.append(exact, NOW)  # exactly the limit: not rotated
    assert path.read_bytes() == first + exact
    assert not rotated(path, 1).exists()
    audit.append(b"c\n", NOW)  # one byte more would pass it
    assert rotated(path, 1).read_bytes() == first + exact
    assert path.read_bytes() == b"c\n"
    audit.close()


def test_rotation_shifts_every_kept_file_and_drops_the_oldest(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=3)
    big = b"x" * (MAX_LINE - 10) + b"\n"
    for n in range(5):
        audit.append(bytes([ord("0") + n]) + big[1:], NOW)
    audit.close()
    heads = [p.read_bytes()[:1] for p in (path, *(rotated(path, k) for k in (1, 2, 3)))]
    assert heads == [b"4", b"3", b"2", b"1"]
    assert not rotated(path, 4).exists()
    assert [line[:1] for line in lines_backwards(path, keep=3)] == [b"4", b"3", b"2", b"1"]
    assert [line[:1] for line in lines_backwards(path, keep=1)] == [b"4", b"3"]


def test_a_file_another_writer_rotated_meanwhile_is_not_rotated_again(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=2 * MAX_LINE)
    full = b"f" * (2 * MAX_LINE - 1) + b"\n"
    audit.append(full, NOW)
    lock = lock_path_for(path)
    errors: list[BaseException] = []
    with exclusive(lock):  # the other writer rotates, holding the lock
        writer = threading.Thread(target=lambda: _append(audit, b"late\n", errors))
        writer.start()
        # The writer saw the full file once it has the lock file open: it waits for the lock.
        _wait_until(lambda: _open_count(lock) == 2)
        os.rename(path, rotated(path, 1))
        fresh = b"n" * (MAX_LINE - 1) + b"\n"  # the most a just-rotated file holds
        path.write_bytes(fresh)
    writer.join(10)
    assert not writer.is_alive() and errors == []
    assert path.read_bytes() == fresh + b"late\n"
    assert rotated(path, 1).read_bytes() == full
    assert not rotated(path, 2).exists()


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.001)


def _append(audit: AuditFile, line: bytes, errors: list[BaseException]) -> None:
    try:
        audit.append(line, NOW)
    except BaseException as exc:  # reported to the test
        errors.append(exc)


def test_a_rotation_that_cannot_rename_is_an_audit_error(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=1)
    line = b"x" * (MAX_LINE - 1) + b"\n"
    audit.append(line, NOW)
    (rotated(path, 1) / "in the way").mkdir(parents=True)  # a non-empty directory at .1
    with pytest.raises(AuditError) as caught:
        audit.append(b"y\n", NOW)
    assert str(caught.value) == (
        f"cannot rotate {path}: [Errno 21] Is a directory: '{path}' -> '{rotated(path, 1)}'"
    )
    assert audit.lost == 1
    assert path.read_bytes() == line


def test_a_rotation_waits_five_seconds_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=1)
    audit.append(b"x" * (MAX_LINE - 1) + b"\n", NOW)
    lock = lock_path_for(path)
    with exclusive(lock), pytest.raises(AuditError) as caught:
        audit.append(b"y\n", NOW)
    cause = caught.value.__cause__
    assert isinstance(cause, LockTimeoutError)
    assert (cause.path, cause.timeout) == (lock, 5.0)
    assert str(caught.value) == f"cannot rotate {path}: {cause}"
    assert audit.lost == 1


def test_lines_are_written_in_chunks_of_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE)
    half = b"h" * (MAX_LINE // 2 - 1) + b"\n"
    # Two halves fill one write exactly; the third line starts the next write,
    # which passes the limit: the file rotates between the writes, never inside one.
    audit.append_lines([half, half, b"third\n"], NOW)
    assert rotated(path, 1).read_bytes() == half + half
    assert path.read_bytes() == b"third\n"


def test_the_lines_of_one_write_land_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=2 * MAX_LINE)
    audit.append(b"p" * 99 + b"\n", NOW)
    whole = b"w" * (MAX_LINE - 1) + b"\n"  # a write of its own
    half = b"h" * (MAX_LINE // 2 - 1) + b"\n"  # two of them fill the next write
    audit.append_lines([whole, half, half], NOW)
    # The second write would pass the limit: the file rotates before it, never
    # between its lines.
    assert rotated(path, 1).read_bytes() == b"p" * 99 + b"\n" + whole
    assert path.read_bytes() == half + half
    audit.close()


def test_a_failed_chunk_does_not_stop_the_next_one(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=1)
    audit.append(b"x" * (MAX_LINE - 1) + b"\n", NOW)
    (rotated(path, 1) / "in the way").mkdir(parents=True)
    half = b"h" * (MAX_LINE // 2 - 1) + b"\n"
    with pytest.raises(AuditError) as caught:
        audit.append_lines([half, half, b"third\n"], NOW)  # each chunk must rotate: both fail
    reason = f"cannot rotate {path}: [Errno 21] Is a directory: '{path}' -> '{rotated(path, 1)}'"
    assert str(caught.value) == reason
    assert audit.lost == 3
    (rotated(path, 1) / "in the way").rmdir()
    rotated(path, 1).rmdir()
    audit.append(b"fourth\n", NOW)
    assert path.read_bytes() == gap_line(3, reason, NOW) + b"fourth\n"
    audit.close()


# --- written against the mutants of the first run ----------------------------------


def test_a_write_that_needs_no_rotation_never_takes_the_rotation_lock(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE)
    audit.append(b"first\n", NOW)
    with exclusive(lock_path_for(path)):  # another process rotating would wait; we need not
        audit.append(b"second\n", NOW)
    assert path.read_bytes() == b"first\nsecond\n"
    audit.close()


def test_lines_that_fill_one_write_exactly_are_written_together(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path, max_bytes=2 * MAX_LINE)
    before = b"b" * (2 * MAX_LINE - 40_001) + b"\n"  # room for one half, not for two
    audit.append(before, NOW)
    half = b"h" * (MAX_LINE // 2 - 1) + b"\n"
    audit.append_lines([half, half], NOW)  # one write of exactly MAX_LINE bytes: rotates first
    assert rotated(path, 1).read_bytes() == before
    assert path.read_bytes() == half + half
    audit.close()


def test_a_stray_file_numbered_zero_is_no_rotated_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    stray = path.with_name("audit.jsonl.0")
    stray.write_bytes(b"stray\n")
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=3)
    audit.append(b"x" * (MAX_LINE - 1) + b"\n", NOW)
    audit.append(b"y\n", NOW)
    audit.close()
    assert stray.read_bytes() == b"stray\n"
    assert rotated(path, 1).read_bytes() == b"x" * (MAX_LINE - 1) + b"\n"
    assert not rotated(path, 2).exists()
    assert list(lines_backwards(path, keep=3)) == [b"y", b"x" * (MAX_LINE - 1)]
