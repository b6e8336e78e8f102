"""The audit log's file handling: whole-line appends, gap lines, rotation, reading back.

:class:`AuditFile` appends byte lines to ``audit.jsonl`` and knows nothing of
what they say (:mod:`registry_core.broker.record.audit` makes the records).

Whole lines or nothing: each line is one ``write(2)`` on an ``O_APPEND``
descriptor, so lines of threads and processes never interleave.  When the
disk is full a write can be short: the fragment is cut off again
(``ftruncate`` back to where the line began, the last newline), so the next
line is never glued to half of this one; where it cannot be cut (an
append-only file, ``chattr +a``), the next write begins with a newline that
ends it, so it reads as one corrupt line.  The lost line is counted; the next
append that succeeds writes a *gap line*,
``{"time": ..., "gap": N, "reason": "..."}``, recording that ``N`` decisions
could not be written and why, in the same ``write`` as the line after it
(both land, or neither).  Readers count gap lines as lost decisions, not as
corrupt lines.

Rotation by size: an append that would take the file past ``max_bytes``
first renames ``audit.jsonl.(keep-1)`` to ``audit.jsonl.keep`` (dropping the
oldest), ..., ``audit.jsonl`` to ``audit.jsonl.1``, under an ``flock`` on
``audit.jsonl.lock`` so two processes never rotate twice; a writer still
holding the old file notices by its inode and reopens the path.
:func:`lines_backwards` reads the current file, then ``.1``, ``.2``...

Every file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular
file (:mod:`registry_core.safe_open`): a FIFO or link at the path is an
error naming it, never a hang or a write elsewhere.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from registry_core.errors import ElevationError, OllieError
from registry_core.file_lock import exclusive, lock_path_for
from registry_core.safe_open import check_regular, open_regular

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
"""Rotate the audit log when it would grow past this many bytes (10 MiB)."""
DEFAULT_KEEP = 5
"""Rotated files kept: ``audit.jsonl.1`` (newest) to ``audit.jsonl.5``."""
MAX_LINE = 64 * 1024
"""Largest record line in bytes, newline included."""

_BLOCK = 64 * 1024


class AuditError(ElevationError):
    """The audit log could not be written or read; ``reason`` is the short cause."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def gap_line(lost: int, reason: str, now: float) -> bytes:
    """The line recording ``lost`` decisions that could not be written."""
    when = dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="milliseconds")
    obj = {"time": when.replace("+00:00", "Z"), "gap": lost, "reason": reason}
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def gap_count(line: bytes) -> int | None:
    """The count of lost decisions if ``line`` is a gap line, else ``None``."""
    if b'"gap"' not in line:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and set(obj) == {"time", "gap", "reason"}:
        gap = obj["gap"]
        if isinstance(gap, int) and not isinstance(gap, bool) and gap > 0:
            return gap
    return None


class _Appender:
    """One open ``O_APPEND`` descriptor and the identity of the file it is open on."""

    def __init__(self, fd: int, st: os.stat_result) -> None:
        self.fd = fd
        self.file_id = (st.st_dev, st.st_ino)
        # Closes the descriptor if the AuditFile is dropped without close().
        self.closer = weakref.finalize(self, os.close, fd)


class AuditFile:
    """Appends whole lines to one audit file, rotating it by size; thread-safe."""

    def __init__(
        self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, keep: int = DEFAULT_KEEP
    ) -> None:
        if max_bytes < MAX_LINE:
            raise ValueError(f"audit max_bytes must be at least {MAX_LINE}, got {max_bytes}")
        if keep < 1:
            raise ValueError(f"audit keep must be at least 1, got {keep}")
        self._path = Path(path)
        self._fspath = os.fspath(self._path)  # what the per-decision lstat takes
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock = threading.Lock()
        self._appender: _Appender | None = None
        self._lost = 0
        self._lost_reason = ""
        # (device, inode) of a file whose tail is a fragment that could not be cut
        self._fragment: tuple[int, int] | None = None

    @property
    def path(self) -> Path:
        """The audit file (fixed: its text is kept for the lstat of every decision)."""
        return self._path

    @property
    def lost(self) -> int:
        """Decisions not written yet recorded by a gap line."""
        return self._lost

    def append(self, line: bytes, now: float, *, count: int = 1) -> None:
        """Write ``line`` (``count`` records, newline-terminated) whole; raises
        :class:`AuditError`.

        Records that could not be written are counted and recorded by a gap
        line before the next line that can be.
        """
        with self._lock:
            try:
                if self._lost:  # the gap and the line in one write: both land, or neither
                    self._write(gap_line(self._lost, self._lost_reason, now) + line)
                    self._lost, self._lost_reason = 0, ""
                else:
                    self._write(line)
            except AuditError as exc:
                self._lost += count
                self._lost_reason = self._lost_reason or exc.reason
                raise

    def append_lines(self, lines: list[bytes], now: float) -> None:
        """Write ``lines`` (whole records, each newline-terminated) in as few writes
        as whole lines allow: up to :data:`MAX_LINE` bytes each (a size every
        rotation limit admits).  Each write lands whole or not at all; the lines
        of a write that failed are counted for a gap line and the error raised
        once the rest has been tried.
        """
        failure: AuditError | None = None
        for chunk in _chunks(lines, MAX_LINE):
            try:
                self.append(b"".join(chunk), now, count=len(chunk))
            except AuditError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Close the append descriptor (a later append opens the file again)."""
        with self._lock:
            self._drop()

    # --- internals (lock held) ----------------------------------------------------

    def _write(self, line: bytes) -> None:
        appender, st = self._current()
        pending = self._fragment == (st.st_dev, st.st_ino)  # a newline goes first
        if st.st_size and st.st_size + pending + len(line) > self.max_bytes:
            self._rotate()
            appender, st = self._current()
        if self._fragment == (st.st_dev, st.st_ino):
            line = b"\n" + line  # ends the fragment: the line starts a line of its own
        fd = appender.fd
        # Where this line begins, from the status just taken of this very file (the
        # cut-back below checks that nothing was appended after the fragment).
        start = st.st_size
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            try:
                os.fchmod(fd, 0o600)  # an older or hand-made file: keep it private
            except OSError as exc:
                self._drop()
                raise _error(self.path, "cannot write", exc) from exc
        try:
            written = os.write(fd, line)
        except OSError as exc:
            self._drop()
            raise _error(self.path, "cannot write", exc) from exc
        if written != len(line):
            outcome = self._cut_back(fd, start, written)
            self._drop()
            raise _short(self.path, written, len(line), outcome)
        self._fragment = None

    def _cut_back(self, fd: int, start: int, written: int) -> str:
        """Remove the fragment of a short write, if it is still the file's tail; what
        became of it, for the message."""
        try:
            if os.fstat(fd).st_size != start + written:
                return "the fragment was left: another line follows it"
            os.ftruncate(fd, start)
        except OSError as exc:
            with contextlib.suppress(OSError):
                st = os.fstat(fd)
                self._fragment = (st.st_dev, st.st_ino)
            return f"the fragment could not be cut: {exc.strerror or exc}"
        return "the fragment was cut"

    def _current(self) -> tuple[_Appender, os.stat_result]:
        """The appender for the file the path names now, and that file's status."""
        appender = self._appender
        if appender is not None:
            try:
                st = os.lstat(self._fspath)
            except OSError:
                st = None  # gone (or unreachable): reopen, which recreates or reports it
            if st is not None and (st.st_dev, st.st_ino) == appender.file_id:
                return appender, st
            self._drop()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _error(self.path, "cannot open", exc) from exc
        try:
            st = check_regular(fd, self.path)
        except OSError as exc:
            os.close(fd)
            raise _error(self.path, "cannot write", exc) from exc
        self._appender = _Appender(fd, st)
        return self._appender, st

    def _rotate(self) -> None:
        """Shift ``audit.jsonl`` to ``.1`` (and ``.1`` to ``.2``...), once across processes."""
        try:
            with exclusive(lock_path_for(self.path), timeout=5.0):
                try:
                    size = os.lstat(self.path).st_size
                except FileNotFoundError:
                    return
                if size <= self.max_bytes - MAX_LINE:  # another process rotated meanwhile
                    return
                for n in range(self.keep - 1, 0, -1):
                    with contextlib.suppress(FileNotFoundError):
                        os.rename(rotated(self.path, n), rotated(self.path, n + 1))
                os.rename(self.path, rotated(self.path, 1))
        except (OSError, OllieError) as exc:
            raise AuditError(f"cannot rotate {self.path}: {exc}") from exc
        finally:
            self._drop()

    def _drop(self) -> None:
        if self._appender is not None:
            self._appender.closer()  # closes the descriptor once, however often called
            self._appender = None


def _error(path: Path, what: str, exc: OSError) -> AuditError:
    reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return AuditError(f"{what} {path}: {exc.strerror or exc}", reason)


def _short(path: Path, written: int, total: int, outcome: str) -> AuditError:
    message = f"short write to {path} ({written} of {total} bytes; {outcome})"
    return AuditError(message, "short write (disk full)")


def _chunks(lines: list[bytes], limit: int) -> Iterator[list[bytes]]:
    """``lines`` in order, grouped so a group's bytes stay within ``limit`` (a
    longer line alone)."""
    group: list[bytes] = []
    size = 0
    for line in lines:
        if group and size + len(line) > limit:
            yield group
            group, size = [], 0
        group.append(line)
        size += len(line)
    if group:
        yield group


def rotated(path: Path, n: int) -> Path:
    """The ``n``-th rotated file of ``path`` (1 is the newest)."""
    return path.with_name(f"{path.name}.{n}")


def lines_backwards(path: Path, keep: int = DEFAULT_KEEP) -> Iterator[bytes]:
    """Non-empty lines of the log and its rotated files, newest first; raises AuditError."""
    for n in range(keep + 1):
        file = path if n == 0 else rotated(path, n)
        try:
            fd = open_regular(file)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _error(file, "cannot read", exc) from exc
        with os.fdopen(fd, "rb") as fh, contextlib.suppress(OSError):
            yield from _file_lines_backwards(fh)


def _file_lines_backwards(fh: Any) -> Iterator[bytes]:
    """Yield the file's non-empty lines from the last to the first, reading blocks from the end."""
    end = fh.seek(0, os.SEEK_END)
    rest = b""
    while end > 0:
        start = max(0, end - _BLOCK)
        fh.seek(start)
        chunk = fh.read(end - start) + rest
        end = start
        lines = chunk.split(b"\n")
        rest = lines.pop(0) if start > 0 else b""
        if len(rest) > 4 * MAX_LINE:
            rest = b"\0"  # inside an over-long line: it will count as one corrupt line
        for line in reversed(lines):
            if line.strip():
                yield line
    if rest.strip():
        yield rest
