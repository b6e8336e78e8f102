"""Process helpers shared by the real-stack harnesses (integration and end-to-end).

Imported as a plain module: pytest (or the e2e conftest) puts this directory on
``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """SIGTERM ``proc`` (by PID), wait up to ``timeout``, then SIGKILL; its exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    return proc.returncode


def run_together(argvs: list[list[str]], timeout: float = 600.0) -> list[int]:
    """Start every command, then release them at once (each waits for a line on
    stdin first); their exit statuses, in order."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, text=True) for argv in argvs]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    codes = []
    for proc in procs:
        codes.append(proc.wait(timeout=timeout))
        assert proc.stdin is not None
        proc.stdin.close()
    return codes
