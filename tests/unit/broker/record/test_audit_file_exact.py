"""The audit file's rules, exactly: gap lines, the size limits, the errors word for
word, losses and what is written after them, the file's mode and type, a disk that
fills (a real tmpfs) and an append-only file.

Rotation is in ``test_audit_file_rotation_exact.py``, reading back in
``test_audit_file_reading_exact.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from audit_file_helpers import NOW, _open_count
from test_audit_file import tiny_tmpfs  # noqa: F401  (a fixture)

from registry_core.broker.record.audit_file import (
    MAX_LINE,
    AuditError,
    AuditFile,
    gap_count,
    gap_line,
    lines_backwards,
    rotated,
)


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


def test_the_newline_that_ends_a_fragment_counts_toward_the_rotation_limit(
    full_disk: Path,
) -> None:
    path = full_disk / "audit.jsonl"
    audit = AuditFile(path, max_bytes=MAX_LINE, keep=1)
    audit.append(b'{"n":1}\n', NOW)
    with append_only(path), pytest.raises(AuditError):
        audit.append(b"l" * 9999 + b"\n", NOW)  # leaves a fragment it cannot cut
    (full_disk / "filler").unlink()
    size = path.stat().st_size
    gap = gap_line(1, "short write (disk full)", NOW)
    record = b"r" * (MAX_LINE - size - len(gap) - 1) + b"\n"
    # Exactly the limit, but the newline that ends the fragment would pass it.
    audit.append(record, NOW)
    audit.close()
    assert rotated(path, 1).read_bytes() == b'{"n":1}\n' + b"l" * 4088
    assert path.read_bytes() == gap + record


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
