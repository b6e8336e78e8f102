"""Shared pieces of the audit file's exact tests: the time written, descriptors counted.

Used by ``test_audit_file_exact.py``, ``test_audit_file_rotation_exact.py`` and
``test_audit_file_reading_exact.py``.  Imported as a plain module: pytest puts this
test directory on ``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

NOW = 1_750_000_000.5


def _open_count(file: Path) -> int:
    """How many descriptors of this process are open on ``file``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == str(file)
    return count
