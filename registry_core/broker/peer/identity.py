"""Who is asking: the process on the other end of a broker connection.

The kernel vouches for pid and uid (``SO_PEERCRED``); everything else is read
from ``/proc`` at connect time and shown to the person as context.  A process
can lie about its command line, so the dialog labels these as "reported by
the system for pid N", and the tool facts shown come from the broker's own
registry, never from the requester.

Whether the peer is inside a sandbox (other namespaces, ``no_new_privs``, or
unreadable: fail closed) is decided by :mod:`.confinement` at connect time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from registry_core.broker.peer.confinement import (
    SANDBOX_LABEL,
    read_proc_file,
    sandbox_id,
    sandbox_reasons,
)

_MAX_PARENTS = 8


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    exe: str
    cmdline: tuple[str, ...]

    def label(self) -> str:
        cmd = " ".join(self.cmdline) or self.exe or "?"
        return f"{self.pid} {cmd}"


@dataclass(frozen=True)
class Requester:
    """The peer of one connection, as far as the kernel and /proc tell."""

    pid: int
    uid: int
    gid: int
    exe: str = ""
    cmdline: tuple[str, ...] = ()
    cwd: str = ""
    # The ancestors, nearest first: given, or (``ancestry``) read from /proc the first
    # time :meth:`ancestors` is asked (only a dialog shows them); see describe_peer.
    parents: tuple[ProcessInfo, ...] = field(default=())
    host: str = ""
    remote: bool = False
    # The account on the remote host (ollie-remote's record), for the password dialog,
    # and the tools directory there (requests run files deployed into it).
    user: str = ""
    tools_dir: str = ""
    # Inside a sandbox (see confinement.py): labelled so, never given a password.
    sandboxed: bool = False
    sandbox_reasons: tuple[str, ...] = ()
    # Which sandbox (confinement.sandbox_id; "" outside any): whose broker budget it spends.
    sandbox: str = ""
    ancestry: Callable[[], tuple[ProcessInfo, ...]] | None = field(
        default=None, compare=False, repr=False
    )

    def ancestors(self) -> tuple[ProcessInfo, ...]:
        """The parent chain: ``parents``, or read once through ``ancestry``."""
        if self.ancestry is None:
            return self.parents
        chain: tuple[ProcessInfo, ...] | None = self.__dict__.get("_ancestors")
        if chain is None:
            chain = self.ancestry()
            object.__setattr__(self, "_ancestors", chain)
        return chain

    @property
    def origin(self) -> str:
        """Where the request comes from, in words ("" for an ordinary local process)."""
        return SANDBOX_LABEL if self.sandboxed else ""

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "uid": self.uid,
            "exe": self.exe,
            "cmdline": list(self.cmdline),
            "cwd": self.cwd,
            "parents": [
                {"pid": p.pid, "exe": p.exe, "cmdline": list(p.cmdline)} for p in self.ancestors()
            ],
            "host": self.host,
            "remote": self.remote,
            "sandboxed": self.sandboxed,
            "sandbox_reasons": list(self.sandbox_reasons),
        }


def _read(path: str) -> bytes:
    try:
        return read_proc_file(path)
    except OSError:
        return b""


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _cmdline(pid: int) -> tuple[str, ...]:
    raw = _read(f"/proc/{pid}/cmdline")
    return tuple(p.decode("utf-8", "replace") for p in raw.split(b"\0") if p)


def _status_ppid(status: bytes) -> int:
    """The ``PPid:`` line's number in a status text (0: none or not a number)."""
    start = status.find(b"\nPPid:")
    if start < 0:
        return 0
    end = status.find(b"\n", start + 1)
    try:
        return int(status[start + 6 : end if end >= 0 else None])
    except ValueError:
        return 0


def _ppid(pid: int) -> int:
    return _status_ppid(_read(f"/proc/{pid}/status"))


def process_info(pid: int) -> ProcessInfo:
    return ProcessInfo(pid, _link(f"/proc/{pid}/exe"), _cmdline(pid))


def parent_chain(pid: int, limit: int = _MAX_PARENTS) -> tuple[ProcessInfo, ...]:
    """The ancestors of ``pid``, nearest first."""
    chain: list[ProcessInfo] = []
    current = _ppid(pid)
    while current > 1 and len(chain) < limit:
        chain.append(process_info(current))
        current = _ppid(current)
    return tuple(chain)


def start_time(pid: int, stat: bytes | None = None) -> bytes:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot), b"" when unreadable;
    ``stat``: that file's text when the caller has just read it.

    With the pid it names one process: a pid reused later has another start time."""
    raw = _read(f"/proc/{pid}/stat") if stat is None else stat
    fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold anything
    return fields[19] if len(fields) > 19 else b""


def _ancestry(pid: int, started: bytes) -> Callable[[], tuple[ProcessInfo, ...]]:
    """Reads ``pid``'s parent chain when called, if ``pid`` is still the process that
    started at ``started`` before and after the walk (else no chain: never the
    ancestors of a process that took over the pid)."""

    def read() -> tuple[ProcessInfo, ...]:
        if not started or start_time(pid) != started:
            return ()
        chain = parent_chain(pid)
        return chain if start_time(pid) == started else ()

    return read


def describe_peer(pid: int, uid: int, gid: int, host: str) -> Requester:
    """Who ``pid`` is: sandbox check, exe, command line and cwd now; the parent chain
    (up to eight processes, three reads each) only when a dialog asks for it; for a
    sandboxed peer, which sandbox it is in (its broker budget, ``limits.py``)."""
    status = _read(f"/proc/{pid}/status")
    reasons = sandbox_reasons(pid, status=status)
    stat = _read(f"/proc/{pid}/stat")
    started = start_time(pid, stat)
    info = process_info(pid)
    return Requester(
        pid=pid,
        uid=uid,
        gid=gid,
        exe=info.exe,
        cmdline=info.cmdline,
        cwd=_link(f"/proc/{pid}/cwd"),
        ancestry=_ancestry(pid, started),
        host=host,
        sandboxed=bool(reasons),
        sandbox_reasons=reasons,
        sandbox=sandbox_id(pid, stat=stat) if reasons else "",
    )
