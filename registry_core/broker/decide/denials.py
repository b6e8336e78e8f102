"""Denials the person did not make by hand, kept so the desktop can show them.

When a request is denied by a remembered deny, because requests are paused,
because nobody answered in time, or because the broker does not know the
tool, the agent gets its exit 77 but the person saw nothing, so "why did my
agent fail?" had no answer on the desktop.  The broker records each such
denial in a :class:`DenialLog` (the last few, in memory); the tray shows them
in its menu and, through a :class:`DenialBatcher`, as one low-urgency
notification per burst: rate-limited and grouped, never one per request.

Sans-I/O: no clock of its own (callers pass ``now``), no timers; the tray
schedules the flush the batcher asks for.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from registry_core.broker.wire.messages import DecidedBy

KEEP = 20
MIN_INTERVAL = 30.0  # seconds between two denial notifications


class DeniedBy(enum.StrEnum):
    """Why a denial happened without the person deciding it there and then."""

    POLICY = "remembered deny"
    PAUSED = "paused"
    TIMEOUT = "no answer in time"
    UNKNOWN_TOOL = "unknown tool"


UNATTENDED = {
    DecidedBy.POLICY: DeniedBy.POLICY,
    DecidedBy.PAUSED: DeniedBy.PAUSED,
    DecidedBy.TIMEOUT: DeniedBy.TIMEOUT,
}


@dataclass(frozen=True)
class Denial:
    time: float  # wall clock, for people
    tool: str
    host: str
    why: DeniedBy
    reason: str

    def line(self) -> str:
        """``tool — why: reason`` (the reason only when it adds something)."""
        detail = "" if self.reason in ("", self.why.value) else f": {self.reason}"
        return f"{self.tool} — {self.why.value}{detail}"


class DenialLog:
    """The last :data:`KEEP` unattended denials, newest last; listeners hear each one."""

    def __init__(self, keep: int = KEEP) -> None:
        self._items: deque[Denial] = deque(maxlen=keep)
        self._listeners: list[Callable[[Denial], None]] = []

    def subscribe(self, listener: Callable[[Denial], None]) -> None:
        self._listeners.append(listener)

    def add(self, denial: Denial) -> None:
        self._items.append(denial)
        for listener in list(self._listeners):
            listener(denial)

    def recent(self, count: int = 5) -> list[Denial]:
        """The newest ``count``, newest first."""
        return list(reversed(self._items))[:count]


class DenialBatcher:
    """At most one notification per ``interval`` seconds; what arrives between is grouped.

    :meth:`add` returns ``0`` when the caller should :meth:`flush` now, or the
    seconds to wait before flushing (the caller's timer), or ``None`` when a
    flush is already due/scheduled.  :meth:`flush` hands out what is pending.
    """

    def __init__(self, interval: float = MIN_INTERVAL) -> None:
        self.interval = interval
        self._pending: list[Denial] = []
        self._last: float | None = None
        self._scheduled = False

    def add(self, denial: Denial, now: float) -> float | None:
        self._pending.append(denial)
        if self._scheduled:
            return None
        self._scheduled = True
        if self._last is None or now - self._last >= self.interval:
            return 0.0
        return self._last + self.interval - now

    def flush(self, now: float) -> list[Denial]:
        batch, self._pending = self._pending, []
        self._scheduled = False
        if batch:
            self._last = now
        return batch


def summary_text(batch: list[Denial], shown: int = 4) -> tuple[str, str]:
    """(summary, body) of one notification for ``batch`` (oldest first)."""
    if len(batch) == 1:
        denial = batch[0]
        return f"Ollie denied {denial.tool}", denial.line()
    lines = [d.line() for d in batch[-shown:]]
    if len(batch) > shown:
        lines.insert(0, f"… and {len(batch) - shown} earlier")
    return f"Ollie denied {len(batch)} requests", "\n".join(lines)
