"""The audit file's rules, exactly: gap lines, the size limits, the errors word for
word, rotation against another writer, and a disk that fills (a real tmpfs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_audit_file import tiny_tmpfs  # noqa: F401  (a fixture)

from registry_core.elevation.audit_file import (
    MAX_LINE,
    AuditError,
    AuditFile,
    gap_count,
    gap_line,
    lines_backwards,
    rotated,
)
from registry_core.file_lock import LockTimeoutError, exclusive, lock_path_for

NOW = 1_750_000_000.5


def test_a_gap_line_says_how_many_decisions_were_lost_and_why() -> None:
    assert gap_line(3, "disk full", NOW) == (
        b'{"time":"2025-06-15T15:06:40.500Z","gap":3,"reason":"disk full"}\n'
    )


@pytest.mark.parametrize(
    ("line", "count"),
    [
        (b'{"time":"2025-06-15T15:06:40.500Z","gap":3,"reason":"disk full"}', 3),
        (b'{"reason":"r","gap":1,"time":"t"}', 1),
        (b'{"time":"t","gap":0,"reason":"r"}', None),
        (b'{"time":"t","gap":-2,"reason":"r"}', None),
        (b'{"time":"t","gap":true,"reason":"r"}', None),
        (b'{"time":"t","gap":2.0,"reason":"r"}', None),
        (b'{"time":"t","gap":"2","reason":"r"}', None),
        (b'{"time":"t","gap":2}', None),
        (b'{"time":"t","gap":2,"reason":"r","tool":"greet"}', None),
        (b'["time","gap","reason"]', None),
        (b'{"time":"t","gap":2,"reason":', None),
        (b"[" * 100_000 + b'"gap"', None),
        (b'{"time":"t","gap ":2,"reason":"r"}', None),
    ],
)
def test_only_a_gap_line_counts_as_one(line: bytes, count: int | None) -> None:
    assert gap_count(line) == count


def test_the_size_limits_are_checked_when_the_file_is_made(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with pytest.raises(ValueError, match=r"^audit max_bytes must be at least 65536, got 65535$"):
        AuditFile(path, max_bytes=MAX_LINE - 1)
    with pytest.raises(ValueError, match=r"^audit keep must be at least 1, got 0$"):
        AuditFile(path, keep=0)
    smallest = AuditFile(path, max_bytes=MAX_LINE, keep=1)
    assert (smallest.max_bytes, smallest.keep, smallest.path) == (MAX_LINE, 1, path)


def test_an_audit_errors_reason_defaults_to_its_message() -> None:
    assert AuditError("cannot write x").reason == "cannot write x"
    assert AuditError("cannot write x", "disk full").reason == "disk full"


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


def _open_count(file: Path) -> int:
    """How many descriptors of this process are open on ``file``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == str(file)
    return count


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


def test_lost_decisions_keep_the_first_reason_and_their_count(tmp_path: Path) -> None:
    parent = tmp_path / "state"
    parent.write_text("a file where the directory should be")
    path = parent / "audit.jsonl"
    audit = AuditFile(path)
    with pytest.raises(AuditError) as first:
        audit.append(b'{"n":1}\n', NOW)
    assert str(first.value) == f"cannot open {path}: File exists"
    assert first.value.reason == "File exists"
    parent.unlink()
    path.mkdir(parents=True)  # now the path itself is a directory: another reason
    with pytest.raises(AuditError, match=r"^cannot open .*: Is a directory$"):
        audit.append(b'{"n":2}\n{"n":3}\n', NOW, count=2)
    assert audit.lost == 3
    path.rmdir()
    audit.append(b'{"n":4}\n', NOW)
    assert audit.lost == 0
    assert path.read_bytes() == gap_line(3, "File exists", NOW) + b'{"n":4}\n'
    audit.close()


def test_a_missing_directory_is_made_private_with_its_parents(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "audit.jsonl"
    AuditFile(path).append(b"{}\n", NOW)
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o600


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


@pytest.fixture
def full_disk(tiny_tmpfs: Path) -> Path:  # noqa: F811
    """The tmpfs with one free block of 4 KiB left."""
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * (60 * 1024))
    assert os.statvfs(tiny_tmpfs).f_bavail == 1
    return tiny_tmpfs


def test_a_short_write_is_cut_back_to_the_last_whole_line(full_disk: Path) -> None:
    path = full_disk / "audit.jsonl"
    audit = AuditFile(path)
    audit.append(b'{"n":1}\n', NOW)
    long = b"l" * 9999 + b"\n"
    with pytest.raises(AuditError) as caught:
        audit.append(long, NOW)
    assert str(caught.value) == (
        f"short write to {path} (4088 of 10000 bytes; the fragment was cut)"
    )
    assert caught.value.reason == "short write (disk full)"
    assert path.read_bytes() == b'{"n":1}\n'
    assert audit.lost == 1
    (full_disk / "filler").unlink()
    audit.append(b'{"n":2}\n', NOW)
    assert path.read_bytes() == (
        b'{"n":1}\n' + gap_line(1, "short write (disk full)", NOW) + b'{"n":2}\n'
    )
    audit.close()


def test_a_write_to_a_full_disk_is_a_disk_full_error(full_disk: Path) -> None:
    (full_disk / "last block").write_bytes(b"\0" * 4096)
    path = full_disk / "audit.jsonl"
    audit = AuditFile(path)
    with pytest.raises(AuditError) as caught:
        audit.append(b'{"n":1}\n', NOW)
    assert str(caught.value) == f"cannot write {path}: No space left on device"
    assert caught.value.reason == "disk full"
    (full_disk / "last block").unlink()
    audit.append(b'{"n":2}\n', NOW)
    assert path.read_bytes() == gap_line(1, "disk full", NOW) + b'{"n":2}\n'
    audit.close()


def test_a_rotated_file_that_cannot_be_read_is_an_audit_error(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"current\n")
    rotated(path, 1).mkdir()
    with pytest.raises(AuditError) as caught:
        list(lines_backwards(path))
    assert str(caught.value) == (
        f"cannot read {rotated(path, 1)}: not a regular file (a directory)"
    )


def test_blank_lines_are_not_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"first\n\n  \nsecond\n\n")
    assert list(lines_backwards(path)) == [b"second", b"first"]


def test_an_older_file_of_ours_is_made_private_before_a_write(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(0o644)
    audit = AuditFile(path)
    audit.append(b"new\n", NOW)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path.read_bytes() == b"old\nnew\n"
    audit.close()


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_file_of_another_user_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(0o644)
    os.chown(path, 1, 1)
    audit = AuditFile(path)
    audit.append(b"new\n", NOW)
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert path.read_bytes() == b"old\nnew\n"
    audit.close()


def test_a_fifo_with_a_reader_is_refused_by_its_type(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        audit = AuditFile(path)
        with pytest.raises(AuditError) as caught:
            audit.append(b"x\n", NOW)
        assert str(caught.value) == f"cannot open {path}: not a regular file (a FIFO)"
        assert caught.value.reason == "not a regular file (a FIFO)"
        assert _open_count(path) == 1  # the writer's descriptor was closed again
        assert os.read(reader, 10) == b""
    finally:
        os.close(reader)


def test_a_symlink_at_the_path_is_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AuditError) as caught:
        AuditFile(path).append(b"x\n", NOW)
    assert str(caught.value) == (
        f"cannot open {path}: not a regular file (a symbolic link, not followed)"
    )
    assert not (tmp_path / "elsewhere").exists()


def test_a_file_removed_or_replaced_is_opened_again_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditFile(path)
    audit.append(b"one\n", NOW)
    path.unlink()
    audit.append(b"two\n", NOW)
    assert path.read_bytes() == b"two\n"
    other = tmp_path / "other"
    other.write_bytes(b"other\n")
    os.rename(other, path)
    audit.append(b"three\n", NOW)
    assert path.read_bytes() == b"other\nthree\n"
    assert _open_count(path) == 1
    audit.close()
    assert _open_count(path) == 0
    audit.append(b"four\n", NOW)  # a closed file opens again
    assert path.read_bytes() == b"other\nthree\nfour\n"
    audit.close()


def test_lines_are_read_back_across_blocks(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    lines = [b"%05d" % n + b"." * (n % 97) for n in range(3000)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert path.stat().st_size > 2 * 64 * 1024
    assert list(lines_backwards(path)) == lines[::-1]


def test_an_over_long_line_is_read_as_one_corrupt_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    huge = b"h" * (5 * MAX_LINE)
    path.write_bytes(b"first\n" + huge + b"\nlast\n")
    got = list(lines_backwards(path))
    assert [got[0], got[2]] == [b"last", b"first"]
    assert len(got) == 3
    assert got[1] != huge and len(got[1]) < 2 * MAX_LINE


# --- written against the mutants of the first run ----------------------------------


def test_a_second_loss_is_recorded_with_its_own_reason(tmp_path: Path) -> None:
    parent = tmp_path / "state"
    parent.write_text("a file where the directory should be")
    path = parent / "audit.jsonl"
    audit = AuditFile(path)
    with pytest.raises(AuditError):
        audit.append(b'{"n":1}\n', NOW)
    parent.unlink()
    audit.append(b'{"n":2}\n', NOW)
    audit.close()
    path.unlink()
    path.mkdir()
    with pytest.raises(AuditError):
        audit.append(b'{"n":3}\n', NOW)
    path.rmdir()
    audit.append(b'{"n":4}\n', NOW)
    assert path.read_bytes() == gap_line(1, "Is a directory", NOW) + b'{"n":4}\n'
    audit.close()


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


def test_the_rotated_files_are_read_while_the_current_one_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    rotated(path, 1).write_bytes(b"one\n")
    rotated(path, 3).write_bytes(b"three\n")  # .2 missing too
    assert list(lines_backwards(path, keep=3)) == [b"one", b"three"]
    assert list(lines_backwards(path, keep=2)) == [b"one"]


@pytest.mark.parametrize(
    ("content", "lines"),
    [
        (b"x", [b"x"]),
        (b"\n", []),
        (b"", []),
        (b"ab\ncd", [b"cd", b"ab"]),
    ],
)
def test_a_small_file_is_read_back_to_its_first_byte(
    tmp_path: Path, content: bytes, lines: list[bytes]
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(content)
    assert list(lines_backwards(path)) == lines


def test_a_file_one_byte_longer_than_a_block_is_read_to_its_first_byte(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = b"x" * 10
    second = b"y" * (64 * 1024 + 1 - len(first) - 2)
    path.write_bytes(first + b"\n" + second + b"\n")
    assert path.stat().st_size == 64 * 1024 + 1
    assert list(lines_backwards(path)) == [second, first]


def test_a_line_of_exactly_four_times_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    long = b"L" * (4 * MAX_LINE)
    # The long line begins exactly on a block boundary counted from the end, so the
    # partial line carried between blocks is the whole line at that moment.
    tail = b"t" * (64 * 1024 - 2)
    path.write_bytes(b"first\n" + long + b"\n" + tail + b"\n")
    assert (path.stat().st_size - len(b"first\n")) % (64 * 1024) == 0
    assert list(lines_backwards(path)) == [tail, long, b"first"]


def test_an_over_long_first_line_reached_at_the_files_start_is_read_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    long = b"L" * (4 * MAX_LINE + 100)  # over the carried limit, but it starts the file
    path.write_bytes(long + b"\nlast\n")
    assert list(lines_backwards(path)) == [b"last", long]


_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_APPEND_FL = 0x80086601, 0x40086602, 0x20


@contextlib.contextmanager
def append_only(path: Path) -> Iterator[None]:
    """``chattr +a path`` for the block: the file may only be appended to (no
    truncation, no change of mode), as some keep audit logs."""
    flags = _set_flags(path, lambda flags: flags | _FS_APPEND_FL)
    try:
        yield
    finally:
        _set_flags(path, lambda _: flags)


def _set_flags(path: Path, change: Callable[[int], int]) -> int:
    """Change the inode flags of ``path``; the flags it had."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        (flags,) = struct.unpack("i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, struct.pack("i", 0)))
        try:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("i", change(flags)))
        except OSError as exc:
            if os.environ.get("CI") == "true":
                pytest.fail(f"cannot make a file append-only in CI: {exc}")
            pytest.skip(f"cannot make a file append-only here: {exc}")
        return int(flags)
    finally:
        os.close(fd)


def test_an_append_only_file_that_is_private_already_is_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(0o600)
    audit = AuditFile(path)
    with append_only(path):
        audit.append(b"new\n", NOW)  # its mode is left alone: changing it is refused
        audit.close()
    assert path.read_bytes() == b"old\nnew\n"


def test_an_append_only_file_that_cannot_be_made_private_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(0o644)
    audit = AuditFile(path)
    with append_only(path):
        with pytest.raises(AuditError) as caught:
            audit.append(b"new\n", NOW)
        assert _open_count(path) == 0  # the descriptor was given up
    assert str(caught.value) == f"cannot write {path}: Operation not permitted"
    assert caught.value.reason == "Operation not permitted"
    assert audit.lost == 1
    assert path.read_bytes() == b"old\n"
    audit.append(b"newer\n", NOW)
    assert path.read_bytes() == b"old\n" + gap_line(1, "Operation not permitted", NOW) + b"newer\n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    audit.close()


def test_a_fragment_that_cannot_be_cut_is_ended_before_the_next_line(full_disk: Path) -> None:
    path = full_disk / "audit.jsonl"
    audit = AuditFile(path)
    audit.append(b'{"n":1}\n', NOW)
    with append_only(path):
        with pytest.raises(AuditError) as caught:
            audit.append(b"l" * 9999 + b"\n", NOW)
        assert str(caught.value) == (
            f"short write to {path} (4088 of 10000 bytes; the fragment could not be cut:"
            " Operation not permitted)"
        )
        assert caught.value.reason == "short write (disk full)"
        assert path.read_bytes() == b'{"n":1}\n' + b"l" * 4088  # left in place
        (full_disk / "filler").unlink()
        audit.append(b'{"n":2}\n', NOW)
        audit.close()
    # The fragment is a line of its own (a corrupt one); the gap line stays readable.
    assert path.read_bytes() == (
        b'{"n":1}\n'
        + b"l" * 4088
        + b"\n"
        + gap_line(1, "short write (disk full)", NOW)
        + b'{"n":2}\n'
    )
    assert [gap_count(line) for line in lines_backwards(path)] == [None, 1, None, None]


def test_a_fragment_left_in_a_file_another_process_rotated_away_is_not_ended_in_the_new_one(
    full_disk: Path,
) -> None:
    path = full_disk / "audit.jsonl"
    audit = AuditFile(path)
    audit.append(b'{"n":1}\n', NOW)
    with append_only(path), pytest.raises(AuditError):
        audit.append(b"l" * 9999 + b"\n", NOW)
    os.rename(path, rotated(path, 1))  # what another writer's rotation does
    (full_disk / "filler").unlink()
    audit.append(b'{"n":2}\n', NOW)
    audit.close()
    assert rotated(path, 1).read_bytes() == b'{"n":1}\n' + b"l" * 4088
    # The new file starts with a record: no empty line for a fragment it never held.
    assert path.read_bytes() == gap_line(1, "short write (disk full)", NOW) + b'{"n":2}\n'


def test_a_file_no_longer_open_to_us_is_still_written_through_the_kept_descriptor(
    shared_dir: Path, unprivileged: Callable[[Callable[[], None]], None]
) -> None:
    def keep_writing(path: Path) -> None:
        audit = AuditFile(path)
        audit.append(b"one\n", NOW)
        path.chmod(0o400)  # opening it for writing would now be refused
        audit.append(b"two\n", NOW)
        audit.close()

    keep_writing(shared_dir / "as-root.jsonl")  # the same in this process (root or not)
    assert (shared_dir / "as-root.jsonl").read_bytes() == b"one\ntwo\n"
    path = shared_dir / "audit.jsonl"
    unprivileged(lambda: keep_writing(path))
    assert path.read_bytes() == b"one\ntwo\n"
