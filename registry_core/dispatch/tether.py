"""Run a command so that nothing it starts outlives the calling process.

ollie-core ends an ``x/elevate`` plugin that overruns its step timeout with
SIGKILL to the plugin's process only.  A plugin that ran the approved code as
an ordinary child would leave that code running, orphaned and outside the
sandbox.  :func:`run_tethered` prevents that, even for code that forks,
backgrounds jobs or calls ``setsid``:

- the calling process P forks a *keeper* K and holds the write end of a pipe
  (the lifeline) whose read end only K has;
- K makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every
  process the command starts stays beneath K whatever it does, and starts
  the command C (with ``PR_SET_PDEATHSIG`` = SIGKILL towards K);
- when P dies -- however, SIGKILL included -- the kernel closes the lifeline
  and K kills every process beneath it, reaps them, and exits;
- when C ends, K kills whatever C left behind and exits with C's status,
  which P returns.  The code's lifetime is C's, as under a PID namespace.

Linux only (prctl, pidfd).  The command's stdio is the caller's.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import signal
import sys
from collections.abc import Mapping, Sequence

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_EXIT_KEEPER_FAILED = 125
_EXIT_EXEC_FAILED = 127


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _children(parent: int) -> list[int]:
    """The live children of ``parent`` (from ``/proc/*/stat``)."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent and fields[0] != b"Z":
            found.append(int(entry))
    return found


def _reap_zombies() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _reap_all(me: int) -> None:
    """SIGKILL every process beneath ``me`` and reap it, until none is left.

    Processes killed here hand their own children to us (we are their
    subreaper), so each round finds the next generation.  A process that
    became another user's (a setuid program's child) cannot be signalled by
    us: it is left alone, not waited for.
    """
    while True:
        _reap_zombies()
        killed: list[int] = []
        for pid in _children(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            killed.append(pid)
        if not killed:
            return
        for pid in killed:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _start_command(argv: Sequence[str], lifeline: int, env: Mapping[str, str] | None = None) -> int:
    keeper = os.getpid()
    child = os.fork()
    if child:
        return child
    try:
        os.close(lifeline)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != keeper:
            os._exit(_EXIT_KEEPER_FAILED)
        for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        environ = os.environ if env is None else env
        os.execve(argv[0], list(argv), dict(environ))  # noqa: S606 - a program and its arguments
    except BaseException as exc:  # the child must never return into Python
        why = f"[Errno {exc.errno}] {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        with contextlib.suppress(Exception):
            os.write(2, f"ollie: cannot run {argv[0]}: {why}\n".encode())
    os._exit(_EXIT_EXEC_FAILED)


def _keep(argv: Sequence[str], lifeline: int, env: Mapping[str, str]) -> int:
    """The keeper: run the command, end everything beneath us when it or our parent ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's ^C is for the command
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    me = os.getpid()
    child = _start_command(argv, lifeline, env)
    watch = os.pidfd_open(child)
    code = _EXIT_KEEPER_FAILED
    try:
        while True:
            ready, _, _ = select.select([lifeline, watch], [], [])
            if watch in ready:
                _pid, status = os.waitpid(child, 0)
                code = _exit_code(status)
                break
            if lifeline in ready:
                break  # our parent is gone: nobody waits for this code any more
    finally:
        _reap_all(me)
    return code


def run_tethered(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` (``argv[0]`` a path) tied to this process's life; return its exit code.

    ``env`` is the command's environment (``None``: this process's).

    A command killed by signal N gives ``128 + N``, as in a shell.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()  # not inherited by the command (close-on-exec)
    keeper = os.fork()
    if keeper == 0:
        code = _EXIT_KEEPER_FAILED
        try:
            os.close(write_end)
            code = _keep(argv, read_end, os.environ if env is None else env)
        except BaseException as exc:  # never return into the caller's code
            with contextlib.suppress(Exception):
                os.write(2, f"ollie: the process keeper failed: {exc}\n".encode())
        os._exit(code)
    os.close(read_end)
    # write_end stays open until this process ends: that is the lifeline.
    while True:
        try:
            _pid, status = os.waitpid(keeper, 0)
        except InterruptedError:
            continue
        return _exit_code(status)
