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

A requester inside a sandbox (see ``confinement.py``) carries two more keys in
``requester``: ``"sandboxed": true, "origin": "from inside the sandbox"``.

``by`` is who decided: user, policy, timeout, no_front_end, shutdown,
client_gone or paused.  ``remember`` is the remember choice (``null`` when
none applied).  ``args`` and ``code`` are what the agent sent; no record
field is meant for, or ever fed from, a password or grant token: the
credential gate's secrets have no path into this module.

A line is at most :data:`MAX_LINE` bytes: long strings (code, args, command
lines) are cut with a ``...[truncated N chars]`` marker, long lists and
objects lose their tail with a similar marker.  The record's own keys, the
requester's and the action's are never cut, so a cut line is still a record.

Writing, rotation and reading back (across rotated files) are
:mod:`registry_core.broker.record.audit_file`'s job: whole lines or nothing, a
gap line for decisions a full disk swallowed, rotation by size (default
10 MiB, 5 files kept; ``OLLIE_AUDIT_MAX_BYTES`` / ``OLLIE_AUDIT_KEEP``,
see :func:`audit_log_from_env`).  :meth:`AuditLog.read_tail` skips (and
counts) corrupt lines and sums the decisions gap lines say were lost.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import time as _now
from typing import Any

from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Remember
from registry_core.broker.record.audit_file import (
    DEFAULT_KEEP,
    DEFAULT_MAX_BYTES,
    MAX_LINE,
    AuditError,
    AuditFile,
    gap_count,
    lines_backwards,
)
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind, RequestId

_log = logging.getLogger(__name__)

__all__ = [
    "MAX_LINE",
    "AuditError",
    "AuditLog",
    "AuditRecord",
    "AuditRequester",
    "AuditTail",
    "audit_log_from_env",
]
_LIMITS = (8192, 2048, 512, 128, 32)  # string lengths tried until a record fits
_MARK = "...[truncated {} chars]"
_MAX_DEPTH = 16  # the protocol allows 64; an audit line keeps the outer levels
_OWN_OBJECTS = ("requester", "action")  # objects of a fixed shape: every key is kept


@dataclass(frozen=True)
class AuditRequester:
    """The requesting process, as the kernel and /proc reported it."""

    pid: int
    exe: str = ""
    cmdline: tuple[str, ...] = ()
    cwd: str = ""
    sandboxed: bool = False

    @classmethod
    def from_requester(cls, requester: Requester) -> AuditRequester:
        """The requester's audit view."""
        return cls(
            requester.pid, requester.exe, requester.cmdline, requester.cwd, requester.sandboxed
        )

    def label(self) -> str:
        where = f" ({SANDBOX_LABEL})" if self.sandboxed else ""
        return f"{self.pid} {self.exe or '?'}{where}"

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "pid": self.pid,
            "exe": self.exe,
            "cmdline": list(self.cmdline),
            "cwd": self.cwd,
        }
        if self.sandboxed:
            obj.update(sandboxed=True, origin=SANDBOX_LABEL)
        return obj


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
    # An agent's own action (``action`` request): agent, tool, summary, pattern.
    action: Mapping[str, Any] | None = field(default=None, hash=False)
    time: float = field(default_factory=_now)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (not yet size-limited; see :meth:`to_line`)."""
        return {
            "time": _iso(self.time),
            "request_id": self.request_id,
            "tool": self.tool,
            "kind": "action" if self.action is not None else self.kind.value,
            "host": self.host,
            "remote": self.remote,
            "requester": self.requester.to_json(),
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
            **({"action": dict(self.action)} if self.action is not None else {}),
        }

    def to_line(self) -> bytes:
        """One ASCII JSON line of at most :data:`MAX_LINE` bytes, newline included."""
        obj = self.to_json()
        for limit in (None, *_LIMITS):
            try:
                line = _dump(obj if limit is None else _shrink_record(obj, limit))
            except (ValueError, RecursionError):  # circular or absurdly deep args
                continue
            if len(line) <= MAX_LINE:
                return line
        # Only pathological args get here: keep the decision, drop the payload.
        obj.update(args=_MARK.format("all"), argv=[], code=None)
        obj["requester"]["cmdline"] = []
        return _dump(_shrink_record(obj, 32))

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
            kind=Kind.SANDBOX if obj["kind"] == "action" else Kind(obj["kind"]),
            action=obj["action"] if isinstance(obj.get("action"), dict) else None,
            host=_str(obj.get("host", "")),
            remote=bool(obj.get("remote", False)),
            requester=AuditRequester(
                pid=req["pid"],
                exe=_str(req.get("exe", "")),
                cmdline=tuple(_str(a) for a in req.get("cmdline") or ()),
                cwd=_str(req.get("cwd", "")),
                sandboxed=req.get("sandboxed") is True,
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


# The audit log's one encoder (stateless: shared); ``repr`` for what JSON lacks.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=repr)


def _dump(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode() + b"\n"


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object) -> str | None:
    return None if value is None else _str(value)


def _shrink_record(obj: dict[str, Any], limit: int) -> dict[str, Any]:
    """A record's JSON object with its values cut as :func:`_shrink` cuts them; its
    own keys and those of the requester and the action are all kept (only the
    agent's payload can be long: args, argv, code, the command line)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in _OWN_OBJECTS and isinstance(value, dict):
            out[key] = {k: _shrink(v, limit, 2) for k, v in value.items()}
        else:
            out[key] = _shrink(value, limit, 1)
    return out


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
    """The last records (oldest first), how many corrupt lines were skipped, and how
    many decisions gap lines report lost (a full disk) among the lines read."""

    records: tuple[AuditRecord, ...]
    skipped: int = 0
    lost: int = 0


class AuditLog:
    """Appends to and reads from one audit file (and its rotated files); thread-safe."""

    def __init__(
        self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, keep: int = DEFAULT_KEEP
    ) -> None:
        self.path = Path(path)
        self.keep = keep
        self._file = AuditFile(self.path, max_bytes=max_bytes, keep=keep)
        self._held: list[bytes] | None = None  # see hold()
        self._holder: int | None = None

    def append(self, record: AuditRecord) -> None:
        """Write ``record`` as one line; raises :class:`AuditError`.

        Between :meth:`hold` and :meth:`release` on the same thread the line is
        kept instead and written by :meth:`release`."""
        self.append_line(record.to_line())

    def append_line(self, line: bytes) -> None:
        """:meth:`append` for a record already made into its line (``AuditRecord.to_line``)."""
        held = self._held
        if held is not None and self._holder == threading.get_ident():
            held.append(line)
            return
        self._file.append(line, _now())

    def hold(self) -> None:
        """Keep this thread's records from now on until :meth:`release` (the
        broker's server: the records of one event loop step in one write)."""
        if self._held is None:
            self._held, self._holder = [], threading.get_ident()

    @property
    def holding(self) -> bool:
        return self._held is not None

    def release(self) -> int:
        """Write the kept records (whole lines, in order) and stop keeping; how many
        there were.  Raises :class:`AuditError` when some could not be written
        (they are counted for a gap line)."""
        held, self._held, self._holder = self._held, None, None
        if held:
            self._file.append_lines(held, _now())
        return len(held or ())

    def close(self) -> None:
        """Close the append descriptor (a later append opens the file again)."""
        self._file.close()

    def tail(self, n: int) -> list[AuditRecord]:
        """The last ``n`` valid records, oldest first (corrupt lines skipped)."""
        return list(self.read_tail(n).records)

    def read_tail(self, n: int) -> AuditTail:
        """The last ``n`` valid records, across rotated files, and what was met on the way."""
        if n <= 0:
            return AuditTail(())
        records: list[AuditRecord] = []
        skipped = lost = 0
        for raw in lines_backwards(self.path, self.keep):
            gap = gap_count(raw)
            if gap is not None:
                lost += gap
                continue
            try:
                records.append(AuditRecord.from_json(json.loads(raw)))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                skipped += 1
                continue
            if len(records) == n:
                break
        return AuditTail(tuple(reversed(records)), skipped, lost)


def _env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        _log.warning("%s=%r: not a whole number >= %d; using %d", name, text, minimum, default)
        return default
    return value


def audit_log_from_env(path: Path, env: Mapping[str, str]) -> AuditLog:
    """The audit log at ``path``, rotated as ``OLLIE_AUDIT_MAX_BYTES``/``OLLIE_AUDIT_KEEP`` say.

    Defaults: 10 MiB (at least 64 KiB), 5 rotated files (at least 1); a bad
    value is logged and the default used (an audit log is never refused).
    """
    max_bytes = _env_int(env, "OLLIE_AUDIT_MAX_BYTES", DEFAULT_MAX_BYTES, MAX_LINE)
    keep = _env_int(env, "OLLIE_AUDIT_KEEP", DEFAULT_KEEP, 1)
    return AuditLog(path, max_bytes=max_bytes, keep=keep)
