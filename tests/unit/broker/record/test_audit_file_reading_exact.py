"""The audit file read back, exactly: newest first across blocks and rotated files,
blank and over-long lines, a small file to its first byte, and a rotated file that
cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.broker.record.audit_file import MAX_LINE, AuditError, lines_backwards, rotated


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
