"""Process hardening for anything that touches a password (askpass, the tray)."""

from __future__ import annotations

import ctypes
import ctypes.util
import resource

_PR_SET_DUMPABLE = 4


def harden_process() -> bool:
    """No core dumps, not dumpable (no ptrace by same-uid processes). True if both held."""
    ok = True
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        ok = False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            ok = False
    except OSError:
        ok = False
    return ok


def is_dumpable() -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    result: int = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    return result != 0
