"""Helpers for driving ``ollie-elevate`` as ollie-core does (imported by the plugin tests).

Reading a plugin's pipes to EOF proves that no process holds them any more;
:func:`alive` and :func:`wait_all_gone` check processes by pid (a zombie
counts as gone).  ``SPAWNER`` is bash code that leaves processes every way
bash can, each writing its pid to ``pids`` in the working directory.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

DEADLINE = 20.0


def read_to_eof(proc: subprocess.Popen[bytes], timeout: float = DEADLINE) -> tuple[bytes, bytes]:
    """Both pipes to EOF: that only happens once every process holding them is gone."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
    open_fds = set(streams)
    end = time.monotonic() + timeout
    while open_fds:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"a process still holds the plugin's output after {timeout} s")
        ready, _, _ = select.select(list(open_fds), [], [], left)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                streams[fd] += chunk
            else:
                open_fds.discard(fd)
    return streams[proc.stdout.fileno()], streams[proc.stderr.fileno()]


def wait_for_file(path: Path, timeout: float = DEADLINE) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear in {timeout} s")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def wait_all_gone(pids: list[int], timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(alive(pid) for pid in pids):
            return
        time.sleep(0.02)
    survivors = [pid for pid in pids if alive(pid)]
    raise AssertionError(f"processes of the approved code survived: {survivors}")


# A job that leaves processes every way bash can: a background job, a
# double fork, a new session.  Each writes its pid; then bash waits.
SPAWNER = """
echo $$ >> pids
sleep 300 & echo $! >> pids
( sleep 300 & echo $! >> pids ) &
setsid sleep 300 & echo $! >> pids
while [ "$(wc -l < pids)" -lt 4 ]; do sleep 0.01; done; echo ready > started
echo running
sleep 300
"""
