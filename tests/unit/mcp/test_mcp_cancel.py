"""The cancel hook kills the call's whole process group, before or after it starts."""

from __future__ import annotations

import os
import subprocess
import time

from registry_core.mcp.cancel import CallCanceller

DEADLINE = 10.0


def _group() -> subprocess.Popen[bytes]:
    # A leader with a child in its own session (= process group), like a tool.
    return subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60 & wait"], start_new_session=True, stdout=subprocess.DEVNULL
    )


def _wait(proc: subprocess.Popen[bytes]) -> int:
    return proc.wait(timeout=DEADLINE)


def _group_empty(pgid: int) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_cancel_after_start_kills_the_group() -> None:
    proc = _group()
    canceller = CallCanceller()
    canceller.started(proc.pid)
    canceller.cancel()
    assert _wait(proc) == -9
    assert _group_empty(proc.pid)


def test_a_cancel_before_start_kills_at_start() -> None:
    canceller = CallCanceller()
    canceller.cancel()
    proc = _group()
    canceller.started(proc.pid)
    assert _wait(proc) == -9
    assert _group_empty(proc.pid)


def test_no_cancel_leaves_the_tool_alone() -> None:
    proc = subprocess.Popen(["/bin/true"], start_new_session=True)
    canceller = CallCanceller()
    canceller.started(proc.pid)
    assert _wait(proc) == 0
    assert canceller.cancelled is False


def test_aborts_run_at_the_cancel_or_at_once_after_it() -> None:
    canceller = CallCanceller()
    ran: list[str] = []
    canceller.on_cancel(lambda: ran.append("waiting"))
    assert ran == []
    canceller.cancel()
    assert ran == ["waiting"]
    canceller.on_cancel(lambda: ran.append("late"))
    assert ran == ["waiting", "late"]
    canceller.cancel()  # a second cancel runs nothing twice
    assert ran == ["waiting", "late"]
