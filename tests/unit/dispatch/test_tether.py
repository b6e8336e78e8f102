"""run_tethered: exit codes, what a command leaves behind, and its caller's death.

Everything here runs real children.  The keeper and the command are forked
from this process; a build whose forked child fails to end itself would
return into pytest, so every call goes through :func:`tethered`, which ends
any process other than the test's own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from registry_core.dispatch import tether
from registry_core.dispatch.tether import run_tethered

GREP = shutil.which("grep") or "/bin/grep"
SLEEP = shutil.which("sleep") or "/bin/sleep"
NOBODY = 65534
BASH = shutil.which("bash") or "/bin/bash"  # dash cannot name descriptors above 9
#: Signals the command must receive with their default action (Python ignores
#: SIGPIPE and SIGXFSZ; the keeper ignores SIGINT; a caller may ignore SIGTERM).
RESET = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM)


def guarded(call: Callable[[], int]) -> int:
    """``call()``; a forked child that returns here instead of exiting is ended."""
    me = os.getpid()
    try:
        return call()
    finally:
        if os.getpid() != me:
            os._exit(99)


def tethered(argv: Sequence[str]) -> int:
    return guarded(lambda: run_tethered(argv))


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (a zombie or reaped); waits on a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def reaped(pid: int) -> bool:
    """True when ``pid`` no longer exists at all (not even as a zombie)."""
    try:
        os.close(os.pidfd_open(pid))
    except ProcessLookupError:
        return True
    return False


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


@contextmanager
def report_pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose write end a command inherits (``>&N``); yields (read, write)."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        yield read_end, write_end
    finally:
        for fd in (read_end, write_end):
            with suppress(OSError):  # the test may have closed it already
                os.close(fd)


def read_lines(fd: int, count: int, timeout: float = 10.0) -> list[str]:
    """``count`` lines from ``fd``, failing the test when they do not come in time."""
    data = b""
    while data.count(b"\n") < count:
        if not select.select([fd], [], [], timeout)[0]:
            pytest.fail(f"only {data!r} arrived")
        chunk = os.read(fd, 4096)
        if not chunk:
            pytest.fail(f"the writer closed after {data!r}")
        data += chunk
    return data.decode().splitlines()


def kill_all(pids: Sequence[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ignored_signals(status: str) -> int:
    """The ``SigIgn`` mask from a ``/proc/<pid>/status`` text."""
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn line in {status!r}")


def test_the_command_exit_code_is_returned() -> None:
    assert tethered(["/bin/sh", "-c", "exit 3"]) == 3
    assert tethered(["/bin/true"]) == 0


def test_a_command_killed_by_signal_n_gives_128_plus_n() -> None:
    assert tethered(["/bin/sh", "-c", "kill -TERM $$"]) == 128 + signal.SIGTERM
    assert tethered(["/bin/sh", "-c", "kill -KILL $$"]) == 128 + signal.SIGKILL


def test_a_program_that_cannot_start_gives_127_and_says_why(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing"
    assert tethered([str(missing)]) == 127
    out, err = capfd.readouterr()
    assert (out, err) == (
        "",
        f"ollie: cannot run {missing}: [Errno 2] No such file or directory\n",
    )


def test_the_command_has_the_callers_stdio(capfd: pytest.CaptureFixture[str]) -> None:
    assert tethered(["/bin/sh", "-c", "echo out; echo err >&2"]) == 0
    assert capfd.readouterr() == ("out\n", "err\n")


def test_the_command_starts_with_default_signal_actions(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # SIGHUP stays ignored: only the listed signals are reset.
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        code = tethered([GREP, "^SigIgn:", "/proc/self/status"])
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert code == 0
    mask = ignored_signals(capfd.readouterr().out)
    assert [sig for sig in RESET if mask & (1 << (sig - 1))] == []
    assert mask & (1 << (signal.SIGHUP - 1))


def test_nothing_the_command_started_outlives_it() -> None:
    # A background job, a setsid'd one, the grandchild of a process that exits at once
    # (reparented to the keeper, its subreaper) and the child of a process still running
    # when the command ends (reparented once its parent is killed: a second round).
    go_read, go_write = os.pipe()
    os.set_inheritable(go_read, True)
    os.set_inheritable(go_write, True)
    with report_pipe() as (read_end, write_end):
        script = (
            f"{SLEEP} 300 & echo $! >&{write_end}\n"
            f"setsid {SLEEP} 300 & echo $! >&{write_end}\n"
            f"{BASH} -c '{SLEEP} 300 & echo $! >&{write_end}'\n"
            f"{BASH} -c '{SLEEP} 300 & echo $! >&{write_end}; echo go >&{go_write}; wait' &\n"
            f"echo $! >&{write_end}\n"
            f"read line <&{go_read}\n"
        )
        try:
            code = tethered([BASH, "-c", script])
        finally:
            os.close(go_read)
            os.close(go_write)
        os.close(write_end)
        pids = [int(line) for line in read_lines(read_end, 5)]
    try:
        assert code == 0
        assert [pid for pid in pids if not reaped(pid)] == []
    finally:
        kill_all(pids)


def fork_caller(argv: Sequence[str], escaped: int | None = None) -> int:
    """A child process P that calls run_tethered(argv) and exits with its result.

    Any other process returning from that call (a keeper that failed to end
    itself) writes its pid to ``escaped`` before it is ended.
    """
    caller = os.fork()
    if caller == 0:
        me = os.getpid()
        code = 98
        try:
            code = run_tethered(argv)
        finally:
            if os.getpid() != me and escaped is not None:
                os.write(escaped, f"{os.getpid()}\n".encode())
            os._exit(code)
    return caller


def test_killing_the_caller_kills_the_command_and_everything_it_started() -> None:
    script = (
        "echo $$ >&{fd}\n"
        f"{SLEEP} 300 & echo $! >&{{fd}}\n"
        f"setsid {SLEEP} 300 & echo $! >&{{fd}}\n"
        f"exec {SLEEP} 300\n"
    )
    escaped_read, escaped_write = os.pipe()
    with report_pipe() as (read_end, write_end):
        caller = fork_caller([BASH, "-c", script.format(fd=write_end)], escaped_write)
        os.close(write_end)
        os.close(escaped_write)
        pids = [int(line) for line in read_lines(read_end, 3)]
    keeper = parent_of(pids[0])
    try:
        assert keeper != caller
        assert parent_of(keeper) == caller
        os.kill(caller, signal.SIGKILL)
        os.waitpid(caller, 0)
        assert [pid for pid in [keeper, *pids] if not gone(pid)] == []
        # The keeper ended itself: it never returned into the caller's code.
        assert os.read(escaped_read, 100) == b""
    finally:
        os.close(escaped_read)
        kill_all([keeper, *pids])


@pytest.mark.skipif(os.geteuid() != 0, reason="making a setuid-root program needs root")
def test_a_process_that_became_roots_is_left_alone_and_the_rest_are_killed() -> None:
    # An unprivileged caller whose command runs a setuid program that becomes root
    # entirely (as sudo does): the keeper cannot signal that one, and still ends the rest.
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("no setpriv")
    where = Path(tempfile.mkdtemp())
    try:
        where.chmod(0o755)
        become_root = where / "become-root"
        shutil.copy(setpriv, become_root)
        become_root.chmod(0o4755)
        # The command ends only once the first process is root's, then the other one runs.
        script = (
            f"{become_root} --reuid=0 --regid=0 --clear-groups"
            f" {BASH} -c 'echo $$ >&{{fd}}; echo >&{{gw}}; exec {SLEEP} 300' &\n"
            f"read line <&{{gr}}; {SLEEP} 301 & echo $! >&{{fd}}\n"
        )
        go_read, go_write = os.pipe()
        for fd in (go_read, go_write):
            os.set_inheritable(fd, True)
        with report_pipe() as (read_end, write_end):
            caller = os.fork()
            if caller == 0:
                code = 98
                try:
                    os.setgroups([])
                    os.setresgid(NOBODY, NOBODY, NOBODY)
                    os.setresuid(NOBODY, NOBODY, NOBODY)
                    argv = [BASH, "-c", script.format(fd=write_end, gr=go_read, gw=go_write)]
                    code = run_tethered(argv)
                finally:
                    os._exit(code)
            os.close(write_end)
            os.close(go_read)
            os.close(go_write)
            root_sleep, own_sleep = (int(line) for line in read_lines(read_end, 2))
        try:
            _pid, status = os.waitpid(caller, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            if Path(f"/proc/{root_sleep}").stat().st_uid != 0:
                pytest.skip("the setuid bit had no effect here (nosuid mount?)")
            assert gone(own_sleep)
            assert not gone(root_sleep, 0)
        finally:
            kill_all([root_sleep, own_sleep])
    finally:
        shutil.rmtree(where)


def test_the_command_dies_with_its_keeper() -> None:
    # The keeper killed outright cannot clean up: the command's parent-death signal ends it.
    with report_pipe() as (read_end, write_end):
        caller = fork_caller([BASH, "-c", f"echo $$ >&{write_end}; exec {SLEEP} 300"])
        os.close(write_end)
        (command,) = (int(line) for line in read_lines(read_end, 1))
    keeper = parent_of(command)
    try:
        os.kill(keeper, signal.SIGKILL)
        assert gone(command)
        _pid, status = os.waitpid(caller, 0)
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGKILL
    finally:
        kill_all([keeper, command])


def test_the_keeper_ignores_sigint_and_waits_for_the_command() -> None:
    # ^C in a terminal reaches the whole foreground group; the command decides.
    go_read, go_write = os.pipe()
    with report_pipe() as (read_end, write_end):
        script = f"echo $$ >&{write_end}; read line <&{go_read}; exit 5"
        os.set_inheritable(go_read, True)
        caller = fork_caller([BASH, "-c", script])
        os.close(write_end)
        os.close(go_read)
        (command,) = (int(line) for line in read_lines(read_end, 1))
    keeper = parent_of(command)
    try:
        os.kill(keeper, signal.SIGINT)
        os.write(go_write, b"go\n")
        _pid, status = os.waitpid(caller, 0)
        assert os.waitstatus_to_exitcode(status) == 5
    finally:
        os.close(go_write)
        kill_all([keeper, command])


def test_a_keeper_that_fails_exits_125_and_says_why(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # As on a kernel without pidfd_open (< 5.3): the keeper cannot watch the command.
    def no_pidfd(pid: int) -> int:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    assert tethered(["/bin/sh", "-c", "exit 0"]) == 125
    assert capfd.readouterr().err.endswith(
        "ollie: the process keeper failed: [Errno 38] Function not implemented\n"
    )


def test_a_started_command_has_default_signal_actions_and_the_lifeline_closed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # _start_command on its own: this process plays the keeper.
    read_end, write_end = os.pipe()
    saved = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        child = guarded(
            lambda: tether._start_command([GREP, "^SigIgn:", "/proc/self/status"], read_end)
        )
    finally:
        signal.signal(signal.SIGTERM, saved)
        os.close(read_end)
        os.close(write_end)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    mask = ignored_signals(capfd.readouterr().out)
    assert [sig for sig in RESET if mask & (1 << (sig - 1))] == []


def test_a_started_command_that_cannot_run_exits_127(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    read_end, write_end = os.pipe()
    try:
        child = guarded(lambda: tether._start_command([str(tmp_path / "nope")], read_end))
    finally:
        os.close(read_end)
        os.close(write_end)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 127
    assert capfd.readouterr().err.startswith(f"ollie: cannot run {tmp_path / 'nope'}: ")


def test_children_lists_live_children_whatever_their_name(tmp_path: Path) -> None:
    # A command name holding ") " and digits must not shift the fields read after it.
    odd = tmp_path / "x) R 1 (y"
    shutil.copy(SLEEP, odd)
    odd.chmod(0o755)
    # A child of ours that exits (a zombie until reaped) is not listed.
    dead = guarded(lambda: os.fork() or os._exit(0))
    live = os.posix_spawn(str(odd), [str(odd), "300"], dict(os.environ))
    try:
        assert gone(dead)
        found = tether._children(os.getpid())
        assert live in found
        assert dead not in found
        assert tether._children(live) == []
    finally:
        os.kill(live, signal.SIGKILL)
        os.waitpid(live, 0)
        os.waitpid(dead, 0)


def test_reap_zombies_collects_exited_children_and_leaves_live_ones() -> None:
    dead = guarded(lambda: os.fork() or os._exit(0))
    live = os.posix_spawn(SLEEP, [SLEEP, "300"], dict(os.environ))
    try:
        assert gone(dead)
        tether._reap_zombies()
        assert reaped(dead)
        assert not gone(live, 0)
    finally:
        os.kill(live, signal.SIGKILL)
        os.waitpid(live, 0)
    tether._reap_zombies()  # no child left: returns


def test_reap_all_kills_every_child_of_the_given_process() -> None:
    with report_pipe() as (read_end, write_end):
        script = f"{SLEEP} 300 & echo $! >&{write_end}\n{SLEEP} 301 & echo $! >&{write_end}\nwait\n"
        shell = os.posix_spawn(BASH, [BASH, "-c", script], dict(os.environ))
        os.close(write_end)
        pids = [int(line) for line in read_lines(read_end, 2)]
    try:
        tether._reap_all(shell)
        assert [pid for pid in pids if not gone(pid)] == []
        assert gone(shell)
        assert tether._children(shell) == []
    finally:
        kill_all([*pids, shell])
        with_reaped(shell)


def with_reaped(pid: int) -> None:
    with suppress(ChildProcessError):  # already collected
        os.waitpid(pid, 0)


def test_exit_code_of_a_normal_exit_and_of_a_signal() -> None:
    assert tether._exit_code(0x0300) == 3  # exit(3)
    assert tether._exit_code(signal.SIGKILL) == 128 + signal.SIGKILL  # killed by SIGKILL


def test_a_refused_prctl_raises_with_its_errno() -> None:
    with pytest.raises(OSError, match=r"^\[Errno 22\] prctl\(12345\) failed$") as caught:
        tether._prctl(12345, 0)
    assert caught.value.errno == errno.EINVAL


LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def prctl_get(option: int) -> int:
    """The value a ``PR_GET_*`` option writes through its pointer argument."""
    value = ctypes.c_int(-1)
    assert LIBC.prctl(option, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


@pytest.mark.parametrize(
    ("option", "value", "get"),
    [
        (tether._PR_SET_PDEATHSIG, signal.SIGUSR1, 2),  # PR_GET_PDEATHSIG
        (tether._PR_SET_CHILD_SUBREAPER, 1, 37),  # PR_GET_CHILD_SUBREAPER
    ],
)
def test_prctl_sets_the_option_to_the_value(option: int, value: int, get: int) -> None:
    # On this process, put back at once: the keeper and the command make these calls.
    try:
        tether._prctl(option, value)
        assert prctl_get(get) == value
    finally:
        assert LIBC.prctl(option, ctypes.c_ulong(0), 0, 0, 0) == 0


@contextmanager
def broken_stderr() -> Iterator[None]:
    """Descriptor 2 is ``/dev/full``: writing to it fails (ENOSPC)."""
    full = os.open("/dev/full", os.O_WRONLY)
    saved = os.dup(2)
    os.dup2(full, 2)
    os.close(full)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def test_a_command_that_cannot_start_nor_say_so_still_exits_127(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        with broken_stderr():
            child = guarded(lambda: tether._start_command([str(tmp_path / "nope")], read_end))
    finally:
        os.close(read_end)
        os.close(write_end)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 127


def test_a_keeper_that_fails_without_a_stderr_still_exits_125(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    with broken_stderr():
        code = tethered(["/bin/sh", "-c", "exit 0"])
    assert code == 125
