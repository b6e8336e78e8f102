"""Flood limits of the broker: how many connections and pending requests one peer may hold.

Any process of the user can connect, so one of them must not be able to
starve the rest: 3,000 idle connections used to exhaust the tray's 1,024
descriptors (a legitimate ping then timed out), one connection could queue
3,000 requests, and accept errors were logged without end.  This module is
the bookkeeping, free of I/O so it is tested on its own; the server
(:mod:`registry_core.broker.serve.server`) asks it on every connection and
every request:

* :class:`FloodLimits` — the caps (per uid and per process for connections;
  per connection, per process and per uid for requests in flight; and the
  *sandbox budget*, below);
* :class:`PeerBook` — live counts; :meth:`PeerBook.admit` and
  :meth:`PeerBook.start` return a refusal sentence (sent as a typed
  ``error``, docs/protocol.md §8) or ``None``;
* :class:`Throttle` — "log at most once per second, with a count", and
  :class:`QuietAcceptErrors`, the event loop handler that applies it to
  asyncio's accept errors;
* :func:`raise_fd_limit` — ``RLIMIT_NOFILE`` soft limit up to the hard one.

The sandbox budget (containment II, finding 8).  A sandboxed tool must never
starve the agent: 130 sandboxed processes of 64 connections each used to hold
the uid's 8,192, and the agent's next call (a remembered allow) was refused.
So a peer the broker recognises as sandboxed (``Requester.sandboxed``:
another namespace, ``no_new_privs`` or unreadable, see ``confinement.py``)
also counts against

* its own sandbox: ``connections_per_sandbox`` (16) and
  ``requests_per_sandbox`` (16).  Which sandbox it is in is the key
  :func:`registry_core.broker.peer.confinement.sandbox_id` reads at accept time:
  its PID namespace when that is not the broker's (the namespace sandbox gives
  every call a fresh one), else its session (the dispatcher starts every call
  in a session of its own); a sandboxed process can make itself new ones, so
  this key only shares the budget fairly among sandboxes, and
* all sandboxed peers of its uid together: ``sandboxed_connections_per_uid``
  (256) and ``sandboxed_requests_per_uid`` (256).  That is the guarantee:
  however many sandboxes there are and whatever they do, at least
  ``connections_per_uid - sandboxed_connections_per_uid`` connections (and as
  many requests) stay free for peers outside any sandbox, the agent's.

:meth:`FloodLimits.fitted` keeps the sandboxed caps at a quarter of the
broker's descriptor limit at most (``raise_fd_limit`` runs first), so
sandboxed peers can never take the descriptors an accept needs.

Threading: one event loop; nothing here blocks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ACCEPT_ERROR = "socket.accept() out of system resource"
"""How asyncio reports EMFILE/ENFILE/ENOBUFS/ENOMEM from ``accept()``."""


@dataclass(frozen=True)
class FloodLimits:
    """Caps on what peers may hold at once.  Beyond them: a typed ``error``."""

    # Per uid: sized so that 5,000 agents of one person, each on its own
    # connection with one request, are all served (docs/decisions.md);
    # the per-process caps are what stops one flooding process.
    connections_per_uid: int = 8192
    connections_per_process: int = 64
    requests_per_connection: int = 32
    requests_per_process: int = 64
    requests_per_uid: int = 8192
    # The sandbox budget (finding 8): per sandbox, and for all sandboxed peers of a uid
    # together, far below the uid's caps so that the rest stays free for the agent.
    connections_per_sandbox: int = 16
    requests_per_sandbox: int = 16
    sandboxed_connections_per_uid: int = 256
    sandboxed_requests_per_uid: int = 256

    def fitted(self, descriptors: int) -> FloodLimits:
        """These caps for a broker that may hold ``descriptors`` open files: sandboxed
        peers get at most a quarter of them (the rest stays for the agent's connections,
        the accept loop and the broker's own files)."""
        share = max(1, descriptors // 4)
        if self.sandboxed_connections_per_uid <= share:
            return self
        return dataclasses.replace(
            self,
            sandboxed_connections_per_uid=share,
            connections_per_sandbox=min(self.connections_per_sandbox, share),
        )


def descriptor_limit() -> int:
    """This process's soft ``RLIMIT_NOFILE`` (unlimited: the kernel's default nr_open)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


@dataclass
class PeerBook:
    """Live connections and requests in flight, by uid and by process, and for sandboxed
    peers (``sandbox``: the key of :func:`~registry_core.broker.peer.confinement.sandbox_id`,
    ``None`` outside any sandbox) by sandbox and for all sandboxed peers of a uid."""

    limits: FloodLimits = field(default_factory=FloodLimits)
    _conn_uid: Counter[int] = field(default_factory=Counter)
    _conn_pid: Counter[int] = field(default_factory=Counter)
    _req_uid: Counter[int] = field(default_factory=Counter)
    _req_pid: Counter[int] = field(default_factory=Counter)
    _req_conn: Counter[int] = field(default_factory=Counter)
    _conn_box: Counter[tuple[int, str]] = field(default_factory=Counter)
    _conn_boxed: Counter[int] = field(default_factory=Counter)
    _req_box: Counter[tuple[int, str]] = field(default_factory=Counter)
    _req_boxed: Counter[int] = field(default_factory=Counter)

    def connection_refusal(self, uid: int, pid: int, sandbox: str | None = None) -> str | None:
        """Why one more connection is refused, or ``None``; nothing is counted.

        Without ``sandbox`` only the caps every peer has (the server asks so before
        it reads who the peer is, then again with the sandbox through :meth:`admit`)."""
        lim = self.limits
        if self._conn_uid.get(uid, 0) >= lim.connections_per_uid:
            return f"too many connections for uid {uid} (limit {lim.connections_per_uid})"
        if self._conn_pid.get(pid, 0) >= lim.connections_per_process:
            return f"too many connections from pid {pid} (limit {lim.connections_per_process})"
        if sandbox is None:
            return None
        if self._conn_box.get((uid, sandbox), 0) >= lim.connections_per_sandbox:
            limit = lim.connections_per_sandbox
            return f"too many connections from one sandbox ({sandbox}) (limit {limit})"
        if self._conn_boxed.get(uid, 0) >= lim.sandboxed_connections_per_uid:
            limit = lim.sandboxed_connections_per_uid
            return f"too many connections from sandboxed processes of uid {uid} (limit {limit})"
        return None

    def admit(self, uid: int, pid: int, sandbox: str | None = None) -> str | None:
        """Count a new connection, or say why it is refused (then nothing is counted)."""
        refused = self.connection_refusal(uid, pid, sandbox)
        if refused is None:
            self._conn_uid[uid] += 1
            self._conn_pid[pid] += 1
            if sandbox is not None:
                self._conn_box[uid, sandbox] += 1
                self._conn_boxed[uid] += 1
        return refused

    def leave(self, uid: int, pid: int, sandbox: str | None = None) -> None:
        _drop(self._conn_uid, uid)
        _drop(self._conn_pid, pid)
        if sandbox is not None:
            _drop(self._conn_box, (uid, sandbox))
            _drop(self._conn_boxed, uid)

    def refusal(self, uid: int, pid: int, conn: int, sandbox: str | None = None) -> str | None:
        """Why one more request in flight on connection ``conn`` is refused, or
        ``None``; nothing is counted (a request answered at once never is)."""
        lim = self.limits
        # get(..., 0), not [...]: a Counter's missing key costs a __missing__ call.
        if self._req_conn.get(conn, 0) >= lim.requests_per_connection:
            limit = lim.requests_per_connection
            return f"too many requests pending on this connection (limit {limit})"
        if self._req_pid.get(pid, 0) >= lim.requests_per_process:
            return f"too many requests pending from pid {pid} (limit {lim.requests_per_process})"
        if self._req_uid.get(uid, 0) >= lim.requests_per_uid:
            return f"too many requests pending for uid {uid} (limit {lim.requests_per_uid})"
        if sandbox is None:
            return None
        if self._req_box.get((uid, sandbox), 0) >= lim.requests_per_sandbox:
            limit = lim.requests_per_sandbox
            return f"too many requests pending from one sandbox ({sandbox}) (limit {limit})"
        if self._req_boxed.get(uid, 0) >= lim.sandboxed_requests_per_uid:
            limit = lim.sandboxed_requests_per_uid
            return (
                f"too many requests pending from sandboxed processes of uid {uid} (limit {limit})"
            )
        return None

    def start(self, uid: int, pid: int, conn: int, sandbox: str | None = None) -> str | None:
        """Count a request in flight on connection ``conn``, or say why it is refused."""
        refused = self.refusal(uid, pid, conn, sandbox)
        if refused is None:
            self._req_conn[conn] += 1
            self._req_pid[pid] += 1
            self._req_uid[uid] += 1
            if sandbox is not None:
                self._req_box[uid, sandbox] += 1
                self._req_boxed[uid] += 1
        return refused

    def finish(self, uid: int, pid: int, conn: int, sandbox: str | None = None) -> None:
        _drop(self._req_conn, conn)
        _drop(self._req_pid, pid)
        _drop(self._req_uid, uid)
        if sandbox is not None:
            _drop(self._req_box, (uid, sandbox))
            _drop(self._req_boxed, uid)

    def connections(self, pid: int | None = None) -> int:
        return sum(self._conn_uid.values()) if pid is None else self._conn_pid[pid]

    def requests(self, pid: int | None = None) -> int:
        return sum(self._req_uid.values()) if pid is None else self._req_pid[pid]

    def sandboxed(self, uid: int, sandbox: str | None = None) -> tuple[int, int]:
        """(connections, requests in flight) of sandbox ``sandbox`` of ``uid``, or of all
        the uid's sandboxed peers."""
        if sandbox is None:
            return self._conn_boxed[uid], self._req_boxed[uid]
        return self._conn_box[uid, sandbox], self._req_box[uid, sandbox]


def _drop(counter: Counter[Any], key: Any) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


@dataclass
class Throttle:
    """Let one message through per ``interval`` seconds; count the ones held back."""

    interval: float = 1.0
    clock: Callable[[], float] = time.monotonic
    _last: float | None = None
    _held: int = 0

    def ready(self) -> int | None:
        """None: stay quiet.  Otherwise log now; the value is how many were held back."""
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            self._held += 1
            return None
        held, self._held, self._last = self._held, 0, now
        return held


LoopHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


class QuietAcceptErrors:
    """An event loop exception handler: accept errors once per second with a count.

    Everything else goes to the handler that was there before (or asyncio's
    default)."""

    def __init__(
        self, log: logging.Logger, previous: LoopHandler | None, throttle: Throttle | None = None
    ) -> None:
        self._log = log
        self._previous = previous
        self._throttle = throttle or Throttle()

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith(ACCEPT_ERROR):
            held = self._throttle.ready()
            if held is not None:
                more = f" ({held} more in the last second)" if held else ""
                self._log.error("cannot accept connections: %s%s", context.get("exception"), more)
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit: stop at the kernel's default nr_open.
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    return soft, target
