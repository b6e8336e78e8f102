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
