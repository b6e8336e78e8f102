"""Flood limits of the broker: how many connections and pending requests one peer may hold.

Any process of the user can connect, so one of them must not be able to
starve the rest: 3,000 idle connections used to exhaust the tray's 1,024
descriptors (a legitimate ping then timed out), one connection could queue
3,000 requests, and accept errors were logged without end.  This module is
the bookkeeping, free of I/O so it is tested on its own; the server
(:mod:`registry_core.elevation.server`) asks it on every connection and
every request:

* :class:`FloodLimits` — the caps (per uid and per process for connections;
  per connection, per process and per uid for requests in flight);
* :class:`PeerBook` — live counts; :meth:`PeerBook.admit` and
  :meth:`PeerBook.start` return a refusal sentence (sent as a typed
  ``error``, docs/protocol.md §8) or ``None``;
* :class:`Throttle` — "log at most once per second, with a count", and
  :class:`QuietAcceptErrors`, the event loop handler that applies it to
  asyncio's accept errors;
* :func:`raise_fd_limit` — ``RLIMIT_NOFILE`` soft limit up to the hard one.

Threading: one event loop; nothing here blocks.
"""

from __future__ import annotations

import asyncio
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
    # connection with one request, are all served (docs/decisions.md, issue 19);
    # the per-process caps are what stops one flooding process.
    connections_per_uid: int = 8192
    connections_per_process: int = 64
    requests_per_connection: int = 32
    requests_per_process: int = 64
    requests_per_uid: int = 8192


@dataclass
class PeerBook:
    """Live connections and requests in flight, by uid and by process."""

    limits: FloodLimits = field(default_factory=FloodLimits)
    _conn_uid: Counter[int] = field(default_factory=Counter)
    _conn_pid: Counter[int] = field(default_factory=Counter)
    _req_uid: Counter[int] = field(default_factory=Counter)
    _req_pid: Counter[int] = field(default_factory=Counter)
    _req_conn: Counter[int] = field(default_factory=Counter)

    def admit(self, uid: int, pid: int) -> str | None:
        """Count a new connection, or say why it is refused (then nothing is counted)."""
        lim = self.limits
        if self._conn_uid.get(uid, 0) >= lim.connections_per_uid:
            return f"too many connections for uid {uid} (limit {lim.connections_per_uid})"
        if self._conn_pid.get(pid, 0) >= lim.connections_per_process:
            return f"too many connections from pid {pid} (limit {lim.connections_per_process})"
        self._conn_uid[uid] += 1
        self._conn_pid[pid] += 1
        return None

    def leave(self, uid: int, pid: int) -> None:
        _drop(self._conn_uid, uid)
        _drop(self._conn_pid, pid)

    def refusal(self, uid: int, pid: int, conn: int) -> str | None:
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
        return None

    def start(self, uid: int, pid: int, conn: int) -> str | None:
        """Count a request in flight on connection ``conn``, or say why it is refused."""
        refused = self.refusal(uid, pid, conn)
        if refused is None:
            self._req_conn[conn] += 1
            self._req_pid[pid] += 1
            self._req_uid[uid] += 1
        return refused

    def finish(self, uid: int, pid: int, conn: int) -> None:
        _drop(self._req_conn, conn)
        _drop(self._req_pid, pid)
        _drop(self._req_uid, uid)

    def connections(self, pid: int | None = None) -> int:
        return sum(self._conn_uid.values()) if pid is None else self._conn_pid[pid]

    def requests(self, pid: int | None = None) -> int:
        return sum(self._req_uid.values()) if pid is None else self._req_pid[pid]


def _drop(counter: Counter[int], key: int) -> None:
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
