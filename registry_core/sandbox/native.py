"""The exec step as a 1 KiB static x86-64 program, started from a sealed memfd.

The Python exec step (:mod:`.execstep`) costs an interpreter start-up per
call; on x86-64 the same protocol is this libc-free program, assembled from
``execstep_x86_64.S`` (beside this file) with::

    as --64 -o execstep.o execstep_x86_64.S
    ld -static -nostdlib -n -s --build-id=none -z noexecstack -o execstep execstep.o

``tests/unit/sandbox/test_native_execstep.py`` rebuilds it (when binutils
are installed) and checks that these bytes are exactly that program.  The
bytes go into a memfd that is sealed against any change and passed to
bubblewrap, which runs it as ``/proc/self/fd/N``: no file on disk that
anything could replace.  Kernels that forbid executable memfds
(``vm.memfd_noexec=2``) and other machines use the Python exec step.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import os

EXECSTEP_X86_64 = base64.b64decode(
    "f0VMRgIBAQAAAAAAAAAAAAIAPgABAAAAsABAAAAAAABAAAAAAAAAABADAAAAAAAAAAAAAEAAOAACAEAABAADAAEA"
    "AAAFAAAAsAAAAAAAAACwAEAAAAAAALAAQAAAAAAARAIAAAAAAABEAgAAAAAAAAEAAAAAAAAAUeV0ZAYAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAABJieRJiwQkTY18xBC4nQAAAL8mAAAA"
    "vgEAAAAx0kUx0kUxwA8FSIXAD4VlAQAASYM8JAUPgloBAABJi3QkEOh0AQAASIXAeApIice4AwAAAA8FSYt0JBjo"
    "WwEAAEmJxUmLdCQg6E4BAABJicZJi3QkKOhBAQAASInDSY1sJDBIg+wQSIXbD4SAAAAASIt1AEiF9g+E+wAAAOga"
    "AQAASIkEJEiLfQhIhf8PhOUAAABIg8UQSP/LTYX2eMi4AgAAAL4AACgAMdIPBUiD+P50tEiFwA+IvAAAAIlEJAhJ"
    "icG4vQEAAEyJ974BAAAASIniRTHSDwVIhcAPhZcAAAC4AwAAAEyJzw8F6Xf///9NhfZ4G7i+AQAATIn3MfYPBUiF"
    "wHVyuAMAAABMifcPBbgBAAAATInvSI01rgAAALoBAAAADwVIg/gBdUy4AwAAAEyJ7w8FSIt9AEiF/3Q5uDsAAABI"
    "ie5MifoPBb9+AAAASIP4/nUFv38AAABXuAEAAAC/AgAAAEiNNZQAAAC6JwAAAA8FX+sduAEAAAC/AgAAAEiNNUUA"
    "AAC6NAAAAA8Fv30AAAC45wAAAA8FMcAxyYA+LXUF/8FI/8YPthaF0nQUg+owg/oJd79Ia8AKSAHQSP/G6+WFyXQD"
    "SPfYwzFvbGxpZSBzYW5kYm94OiBjYW5ub3QgYXBwbHkgdGhlIHNhbmRib3ggKGV4ZWMgc3RlcCkKb2xsaWUgc2Fu"
    "ZGJveDogY2Fubm90IGV4ZWN1dGUgdGhlIHRvb2wKAC5zaHN0cnRhYgAudGV4dAAucm9kYXRhAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALAAAAAQAAAAYA"
    "AAAAAAAAsABAAAAAAACwAAAAAAAAAOgBAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAEQAAAAEAAAACAAAA"
    "AAAAAJgCQAAAAAAAmAIAAAAAAABcAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAEAAAADAAAAAAAAAAAA"
    "AAAAAAAAAAAAAPQCAAAAAAAAGQAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAA="
)

_MFD_EXEC = 0x10  # Linux 6.3+: ask for an executable memfd explicitly
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def _memfd_exec_allowed() -> bool:
    try:
        with open("/proc/sys/vm/memfd_noexec", encoding="ascii") as handle:
            return handle.read().strip() != "2"
    except OSError:
        return True  # before Linux 6.3 every memfd may be executed


def _sealed_memfd(data: bytes) -> int:
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        fd = os.memfd_create("ollie-execstep", flags | _MFD_EXEC)
    except OSError:  # EINVAL: a kernel that does not know MFD_EXEC
        fd = os.memfd_create("ollie-execstep", flags)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


@functools.cache
def native_execstep() -> int | None:
    """A sealed memfd holding the native exec step, or ``None`` where it cannot run.

    Made once per process and kept open (close-on-exec) for its lifetime.
    """
    if os.uname().machine not in ("x86_64", "AMD64") or not _memfd_exec_allowed():
        return None
    with contextlib.suppress(OSError):
        return _sealed_memfd(EXECSTEP_X86_64)
    return None
