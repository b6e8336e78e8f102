"""Cancelling a running call: kill the tool's whole process group.

The dispatcher runs a call synchronously (on a worker thread here); the tool
is the leader of its own process group.  :class:`CallCanceller` learns the
pid through the dispatcher's ``on_start`` hook; :meth:`CallCanceller.cancel`
(from the event loop, when the client sends ``notifications/cancelled``)
kills that group, so the dispatcher's read loop sees the pipes close and
the worker thread returns.  A cancel that arrives before the tool started
kills it the moment it starts; a call waiting for the person's approval has
its broker connection ended (:meth:`CallCanceller.on_cancel`), so the broker
withdraws the dialog, and the MCP gate (:mod:`.gate`) turns any late
approval into a denial.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable

CANCELLED = "cancelled by the client"


class CallCanceller:
    """Thread-safe: ``started`` runs on the worker thread, ``cancel`` on the loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._aborts: list[Callable[[], None]] = []
        self.cancelled = False
        # Set while the call waits for the broker's answer (progress says so).
        self.awaiting_approval = False
        # Who answers it ("Ollie Tray", "ollie-broker", "the broker on PATH").
        self.approver = "the elevation broker"

    def on_cancel(self, abort: Callable[[], None]) -> None:
        """Run ``abort`` at the cancel (at once if it already happened): e.g. end the
        broker connection a call is waiting on, so the person's dialog is withdrawn."""
        with self._lock:
            cancelled = self.cancelled
            if not cancelled:
                self._aborts.append(abort)
        if cancelled:
            abort()

    def started(self, pid: int) -> None:
        with self._lock:
            self._pid = pid
            cancelled = self.cancelled
        if cancelled:
            _kill_group(pid)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            pid = self._pid
            aborts, self._aborts = self._aborts, []
        if pid is not None:
            _kill_group(pid)
        for abort in aborts:
            abort()


def _kill_group(pid: int) -> None:
    # SIGKILL at once: the client has gone away from this call, nobody reads the
    # output. A sudo'd tool runs as root and cannot be signalled by us (EPERM):
    # sudo's own process keeps it; its timeout still applies.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
