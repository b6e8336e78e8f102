"""Per-call resource limits: the ``limits:`` section of a sandbox profile.

One tool must never be able to take the person's desktop down with it (a
fork bomb, a runaway allocation, a spinning loop), so every sandboxed call
runs under three bounds::

    limits:
      tasks: 256        # processes + threads of the call (RLIMIT_NPROC)
      memory: 4G        # data (heap + private writable mappings) per process (RLIMIT_DATA)
      cpu: 10m          # CPU time per process (RLIMIT_CPU); default: from the call timeout

Sizes are bytes or a number with ``K``/``M``/``G``/``T`` (powers of 1024,
``KiB``/``MiB``/... accepted too); durations are seconds or a number with
``s``/``m``/``h``.  A missing key takes its default; ``ollie-core`` ignores
the whole section.

Why these defaults: 256 tasks is far above what a compiler driver, a test
runner or a language server starts, yet a fork bomb stops there.  Memory is
bounded by ``RLIMIT_DATA`` rather than the address space: Go, the JVM, V8 and
sanitizers reserve huge ``PROT_NONE`` ranges they never touch, which an
address-space limit would kill at start.  The CPU default is the call's
timeout times the machine's CPUs: it never ends a call the wall-clock
timeout would have let finish, while a profile can set it lower.

Enforcement is by rlimits the exec step sets inside the sandbox, and where
the session has a systemd user manager also by a transient cgroup around the
whole call (:mod:`.scope`: ``tasks`` and ``memory`` for the call as a whole);
docs/security.md says what that bounds and what it does not.
"""

from __future__ import annotations

import math
import os
import re
import resource
import signal
from typing import NamedTuple

DEFAULT_TASKS = 256
DEFAULT_MEMORY = 4 * 1024**3
MAX_TASKS = 1 << 22  # the kernel's PID_MAX_LIMIT
MIN_MEMORY = 1024**2  # below this not even the exec step's interpreter starts
MAX_MEMORY = 1 << 50
MAX_CPU_SECONDS = 30 * 24 * 3600

_SIZE_RE = re.compile(r"([0-9]+)\s*(?:([KMGT])(?:I?B)?|B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_DURATION_RE = re.compile(r"([0-9]+)\s*([smh]?)", re.IGNORECASE)
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


class LimitsSection(NamedTuple):
    """The ``limits`` section as written; ``None`` takes the default."""

    tasks: int | None = None
    memory: int | None = None
    cpu: int | None = None


class CallLimits(NamedTuple):
    """The bounds one call runs under (every field set)."""

    tasks: int
    memory: int
    cpu: int

    def exec_step_options(self) -> str:
        """The exec step's ``KEY=VALUE`` options that set these bounds."""
        return f"nproc={self.tasks},data={self.memory},cpu={self.cpu}"


def parse_size(text: str) -> int | None:
    """``2G``/``512M``/``4096`` (powers of 1024) in bytes; None when not a size."""
    match = _SIZE_RE.fullmatch(text.strip())
    if match is None:
        return None
    return int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").upper()]


def parse_duration(text: str) -> int | None:
    """``90``/``90s``/``5m``/``1h`` in seconds; None when not a duration."""
    match = _DURATION_RE.fullmatch(text.strip())
    if match is None:
        return None
    return int(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def default_cpu_seconds(timeout: float) -> int:
    """CPU time the wall-clock ``timeout`` could give on every CPU of this machine."""
    return max(1, min(MAX_CPU_SECONDS, math.ceil(timeout) * (os.cpu_count() or 1)))


def call_limits(section: LimitsSection, timeout: float) -> CallLimits:
    """The bounds of a call with ``timeout`` seconds under ``section``."""
    return CallLimits(
        tasks=section.tasks if section.tasks is not None else DEFAULT_TASKS,
        memory=section.memory if section.memory is not None else DEFAULT_MEMORY,
        cpu=section.cpu if section.cpu is not None else default_cpu_seconds(timeout),
    )


def format_size(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size % _SIZE_UNITS[unit] == 0:
            return f"{size // _SIZE_UNITS[unit]}{unit}"
    return str(size)


def set_rlimits(limits: CallLimits) -> None:
    """Set the memory and CPU bounds of ``limits`` on the calling process.

    A preexec hook (the tool inherits them) for the Landlock-only
    best-effort path, where no exec step runs.  ``tasks`` is left out there:
    outside a fresh user namespace ``RLIMIT_NPROC`` counts every process the
    person runs, so on a busy desktop the tool could not even fork
    (docs/security.md says what that path lacks).  ``resource`` is imported
    at module level: never import in a forked child of a threaded process.
    """
    for which, value in ((resource.RLIMIT_DATA, limits.memory), (resource.RLIMIT_CPU, limits.cpu)):
        hard = resource.getrlimit(which)[1]
        bound = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # As the exec step: SIGXCPU at the CPU limit, SIGKILL one second later.
        grace = 1 if which == resource.RLIMIT_CPU and bound != hard else 0
        resource.setrlimit(which, (bound, bound + grace))


def stopped_by_limit(exit_code: int, limits: CallLimits, *, scoped: bool = False) -> str | None:
    """The line that tells the person a call ended at its CPU limit, if it did.

    ``SIGXCPU`` is only ever sent for ``RLIMIT_CPU``; bwrap and shells report
    it as ``128 + SIGXCPU``, a direct child as ``-SIGXCPU``.  A fork refused
    at ``tasks`` (``EAGAIN``) or an allocation refused at ``memory``
    (``ENOMEM``) is the tool's own error, which it reports itself.  In a
    cgroup scope (``scoped``) the kernel's OOM killer ends the call with
    ``SIGKILL`` when the whole call reaches ``memory``; a ``SIGKILL`` there
    is named as most likely that (the tool may have been killed otherwise).
    """
    if exit_code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return f"stopped by the CPU time limit (limits.cpu: {limits.cpu} s per process)"
    if scoped and exit_code in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return (
            "killed (SIGKILL), most likely by the memory limit of the call's cgroup"
            f" (limits.memory: {format_size(limits.memory)} for the whole call)"
        )
    return None
