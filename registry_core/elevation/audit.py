"""The audit log: one JSON line per elevation decision, ``$XDG_STATE_HOME/ollie/audit.jsonl``.

Each line is one :class:`AuditRecord` (keys in this order)::

    {"time": "2025-05-04T12:00:00.123Z", "request_id": "r7", "tool": "system_logs",
     "kind": "sudo", "host": "laptop", "remote": false,
     "requester": {"pid": 4242, "exe": "/usr/bin/python3.11",
                   "cmdline": ["python3", "agent.py"], "cwd": "/home/me/project"},
     "executable": "/home/me/.config/ollie/tools/system_logs_journald",
     "sha256": "9f86d0...", "argv": ["sudo", "-A", "--", "..."], "args": {"lines": 10},
     "code": null, "decision": "allow", "by": "user", "remember": "once",
     "reason": "approved by the user"}

``by`` is who decided: user, policy, timeout, no_front_end, shutdown,
client_gone or paused.  ``remember`` is the remember choice (``null`` when
none applied).  ``args`` and ``code`` are what the agent sent; no record
field is meant for, or ever fed from, a password or grant token: the
credential gate's secrets have no path into this module.

A line is at most :data:`MAX_LINE` bytes: long strings (code, args, command
lines) are cut with a ``...[truncated N chars]`` marker, long lists and
objects lose their tail with a similar marker.

Writing: the directory is created 0700 and the file 0600; each record is
one ``write(2)`` on an ``O_APPEND`` descriptor, so records from threads
and processes never interleave.  The descriptor stays open between appends
(opening the file per line cost more than everything else a decision
does); before each append a ``stat`` of the path checks that it still names
the open file, so a log rotated, removed or replaced meanwhile is reopened
(recreated) and the line lands at the path.  Appends hold a lock, so an
:class:`AuditLog` may be shared by threads; :meth:`AuditLog.close` (or
garbage collection) closes the descriptor.  Reading:
:meth:`AuditLog.read_tail` reads backwards from the end in blocks and skips
(and counts) corrupt lines.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import time as _now
from typing import Any, BinaryIO

from registry_core.elevation.identity import Requester
from registry_core.elevation.messages import DecidedBy, Decision, Kind, RequestId
from registry_core.elevation.prompter import Remember
from registry_core.errors import ElevationError

MAX_LINE = 64 * 1024
"""Largest record line in bytes, newline included."""

_BLOCK = 64 * 1024
_LIMITS = (8192, 2048, 512, 128, 32)  # string lengths tried until a record fits
_MARK = "...[truncated {} chars]"
_MAX_DEPTH = 16  # the protocol allows 64; an audit line keeps the outer levels


class AuditError(ElevationError):
    """The audit log could not be written."""


@dataclass(frozen=True)
class AuditRequester:
    """The requesting process, as the kernel and /proc reported it."""

    pid: int
    exe: str = ""
    cmdline: tuple[str, ...] = ()
    cwd: str = ""

    @classmethod
    def from_requester(cls, requester: Requester) -> AuditRequester:
        return cls(requester.pid, requester.exe, requester.cmdline, requester.cwd)

    def label(self) -> str:
        return f"{self.pid} {self.exe or '?'}"


def _iso(ts: float) -> str:
    when = dt.datetime.fromtimestamp(ts, dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_iso(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError("time must be a string")
    when = dt.datetime.fromisoformat(value)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One decision.  ``time`` is epoch seconds (written as ISO-8601 UTC)."""

    tool: str
    kind: Kind
    host: str
    requester: AuditRequester
    decision: Decision
    by: DecidedBy
    reason: str = ""
    remember: Remember | None = None
    request_id: RequestId | None = None
    remote: bool = False
    executable: str | None = None
    sha256: str | None = None
    argv: tuple[str, ...] = ()
    args: Mapping[str, Any] | None = field(default=None, hash=False)
    code: str | None = None
    claimed_host: str | None = None
    client: str | None = None  # the agent/client the request came through (its claim)
    time: float = field(default_factory=_now)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (not yet size-limited; see :meth:`to_line`)."""
        return {
            "time": _iso(self.time),
            "request_id": self.request_id,
            "tool": self.tool,
            "kind": self.kind.value,
            "host": self.host,
            "remote": self.remote,
            "requester": {
                "pid": self.requester.pid,
                "exe": self.requester.exe,
                "cmdline": list(self.requester.cmdline),
                "cwd": self.requester.cwd,
            },
            "executable": self.executable,
            "sha256": self.sha256,
            "argv": list(self.argv),
            "args": None if self.args is None else dict(self.args),
            "code": self.code,
            "decision": self.decision.value,
            "by": self.by.value,
            "remember": None if self.remember is None else self.remember.value,
            "reason": self.reason,
            **({"claimed_host": self.claimed_host} if self.claimed_host else {}),
            **({"client": self.client} if self.client else {}),
        }

    def to_line(self) -> bytes:
        """One ASCII JSON line of at most :data:`MAX_LINE` bytes, newline included."""
        obj = self.to_json()
        for limit in (None, *_LIMITS):
            try:
                line = _dump(obj if limit is None else _shrink(obj, limit))
            except (ValueError, RecursionError):  # circular or absurdly deep args
                continue
            if len(line) <= MAX_LINE:
                return line
        # Only pathological args get here: keep the decision, drop the payload.
        obj.update(args=_MARK.format("all"), argv=[], code=None)
        obj["requester"]["cmdline"] = []
        return _dump(_shrink(obj, 32))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AuditRecord:
        """A record from its JSON object; raises ``ValueError`` (or ``KeyError``/``TypeError``)."""
        req = obj["requester"]
        if not isinstance(req, Mapping) or not isinstance(req.get("pid"), int):
            raise ValueError("requester.pid must be an integer")
        remember = obj.get("remember")
        args = obj.get("args")
        return cls(
            time=_parse_iso(obj["time"]),
            request_id=obj.get("request_id"),
            tool=_str(obj["tool"]),
            kind=Kind(obj["kind"]),
            host=_str(obj.get("host", "")),
            remote=bool(obj.get("remote", False)),
            requester=AuditRequester(
                pid=req["pid"],
                exe=_str(req.get("exe", "")),
                cmdline=tuple(_str(a) for a in req.get("cmdline") or ()),
                cwd=_str(req.get("cwd", "")),
            ),
            executable=_opt_str(obj.get("executable")),
            sha256=_opt_str(obj.get("sha256")),
            argv=tuple(_str(a) for a in obj.get("argv") or ()),
            args=args if isinstance(args, dict) or args is None else {"_truncated": args},
            code=_opt_str(obj.get("code")),
            claimed_host=_opt_str(obj.get("claimed_host")),
            client=_opt_str(obj.get("client")),
            decision=Decision(obj["decision"]),
            by=DecidedBy(obj["by"]),
            remember=None if remember is None else Remember(remember),
            reason=_str(obj.get("reason", "")),
        )


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=repr)  # stateless: shared


def _dump(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode() + b"\n"


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object) -> str | None:
    return None if value is None else _str(value)


def _shrink(value: Any, limit: int, depth: int = 0) -> Any:
    """``value`` with strings cut to ``limit`` chars, containers to ``limit // 8`` items
    and nesting to :data:`_MAX_DEPTH` levels."""
    items = max(4, limit // 8)
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + _MARK.format(len(value) - limit)
    if isinstance(value, Mapping | Sequence) and depth >= _MAX_DEPTH:
        return "...[truncated: nested too deeply]"
    if isinstance(value, Mapping):
        keys = list(value)
        out = {str(k): _shrink(value[k], limit, depth + 1) for k in keys[:items]}
        if len(keys) > items:
            out["..."] = f"[truncated {len(keys) - items} more keys]"
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out_list = [_shrink(v, limit, depth + 1) for v in value[:items]]
        if len(value) > items:
            out_list.append(f"...[truncated {len(value) - items} more items]")
        return out_list
    return value


@dataclass(frozen=True)
class AuditTail:
    """The last records (oldest first) and how many corrupt lines were skipped."""

    records: tuple[AuditRecord, ...]
    skipped: int = 0


class _Appender:
    """One open ``O_APPEND`` descriptor and the identity of the file it is open on."""

    def __init__(self, fd: int, st: os.stat_result) -> None:
        self.fd = fd
        self.file_id = (st.st_dev, st.st_ino)
        # Closes the descriptor if the AuditLog is dropped without close().
        self.closer = weakref.finalize(self, os.close, fd)


class AuditLog:
    """Appends to and reads from one audit file; thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._appender: _Appender | None = None

    def append(self, record: AuditRecord) -> None:
        """Write ``record`` as one line; raises :class:`AuditError`."""
        line = record.to_line()
        with self._lock:
            appender, st = self._current()
            try:
                if st.st_mode & 0o077 and st.st_uid == os.getuid():
                    os.fchmod(appender.fd, 0o600)  # an older or hand-made file: keep it private
                written = os.write(appender.fd, line)
                if written != len(line):  # a full disk: do not leave half a line unterminated
                    os.write(appender.fd, b"\n")
                    raise AuditError(f"short write to {self.path} ({written} of {len(line)} bytes)")
            except OSError as exc:
                self._drop()  # the next append starts afresh
                raise AuditError(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        """Close the append descriptor (a later append opens the file again)."""
        with self._lock:
            self._drop()

    def _current(self) -> tuple[_Appender, os.stat_result]:
        """The appender for the file the path names now, and that file's status.

        Called with the lock held.  A ``stat`` of the path tells whether the
        open descriptor (if any) is still that file; if not (rotated, removed,
        replaced), the file is opened (created) anew.
        """
        appender = self._appender
        if appender is not None:
            try:
                st = os.stat(self.path)
            except OSError:
                st = None  # gone (or unreachable): reopen, which recreates or reports it
            if st is not None and (st.st_dev, st.st_ino) == appender.file_id:
                return appender, st
            self._drop()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise AuditError(f"cannot open {self.path}: {exc.strerror or exc}") from exc
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise AuditError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self._appender = _Appender(fd, st)
        return self._appender, st

    def _drop(self) -> None:
        if self._appender is not None:
            self._appender.closer()  # closes the descriptor once, however often called
            self._appender = None

    def tail(self, n: int) -> list[AuditRecord]:
        """The last ``n`` valid records, oldest first (corrupt lines skipped)."""
        return list(self.read_tail(n).records)

    def read_tail(self, n: int) -> AuditTail:
        """The last ``n`` valid records and the count of corrupt lines met on the way."""
        if n <= 0:
            return AuditTail(())
        records: list[AuditRecord] = []
        skipped = 0
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            return AuditTail(())
        except OSError as exc:
            raise AuditError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        with fh, contextlib.suppress(OSError):
            for raw in _lines_backwards(fh):
                try:
                    records.append(AuditRecord.from_json(json.loads(raw)))
                except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                    skipped += 1
                    continue
                if len(records) == n:
                    break
        return AuditTail(tuple(reversed(records)), skipped)


def _lines_backwards(fh: BinaryIO) -> Iterator[bytes]:
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
