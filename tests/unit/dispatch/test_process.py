"""run_process: JSON on stdin, bounded capture, process-group timeouts (no sandbox here)."""

from __future__ import annotations

import errno
import os
import select
import signal
import time
from pathlib import Path

import pytest

from registry_core.dispatch.process import OUTPUT_LIMIT, ProcessResult, run_process
from registry_core.errors import ExecutableError

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def script(tmp_path: Path, text: str, name: str = "tool") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def run(
    tmp_path: Path, text: str, stdin: bytes = b"{}", timeout: float = 30, **kwargs: object
) -> ProcessResult:
    exe = script(tmp_path, text)
    return run_process([exe], stdin, env=ENV, cwd=str(tmp_path), timeout=timeout, **kwargs)  # type: ignore[arg-type]


def pid_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (zombie or reaped); waits on a pidfd, no polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def assert_gone(pid: int, what: str) -> None:
    """Fail when ``pid`` survived; a survivor is killed so a failing run leaves nothing behind."""
    if not pid_gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"{what} (pid {pid}) survived the timeout")


def test_stdin_is_delivered_and_streams_are_separate(tmp_path: Path) -> None:
    result = run(tmp_path, "#!/bin/sh\ncat\necho to-stderr >&2\nexit 0\n", b'{"a": [1, 2]}')
    assert result.exit_code == 0
    assert result.stdout == b'{"a": [1, 2]}'
    assert result.stderr == b"to-stderr\n"
    assert (result.stdout_dropped, result.stderr_dropped, result.timed_out) == (0, 0, False)
    assert 0 < result.duration < 30


def test_exit_code_is_reported(tmp_path: Path) -> None:
    assert run(tmp_path, "#!/bin/sh\nexit 42\n").exit_code == 42


def test_killed_by_a_signal_is_a_negative_code(tmp_path: Path) -> None:
    assert run(tmp_path, "#!/bin/sh\nkill -9 $$\n").exit_code == -9


def test_large_stdin_and_stdout_do_not_deadlock(tmp_path: Path) -> None:
    payload = b'{"blob": "' + b"x" * (4 * 1024 * 1024) + b'"}'
    result = run(tmp_path, "#!/bin/sh\ncat\n", payload)
    assert result.exit_code == 0
    assert result.stdout == payload


def test_a_tool_that_ignores_stdin_is_fine(tmp_path: Path) -> None:
    payload = b"y" * (2 * 1024 * 1024)  # more than a pipe holds: the write hits EPIPE
    result = run(tmp_path, "#!/bin/sh\necho done\n", payload)
    assert result.exit_code == 0
    assert result.stdout == b"done\n"


def test_env_and_cwd_are_exactly_the_given_ones(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    exe = script(tmp_path, "#!/bin/sh\npwd\n/usr/bin/env\n")
    result = run_process(
        [exe], b"", env={"ONLY": "this", "PATH": "/usr/bin"}, cwd=str(work), timeout=30
    )
    lines = result.stdout.decode().splitlines()
    assert lines[0] == str(work)
    # dash exports PWD itself; nothing else beyond what was given.
    assert set(lines[1:]) - {f"PWD={work}"} == {"ONLY=this", "PATH=/usr/bin"}


def test_the_tool_leads_its_own_process_group(tmp_path: Path) -> None:
    result = run(tmp_path, "#!/usr/bin/python3\nimport os\nprint(os.getpid(), os.getpgrp())\n")
    pid, pgid = result.stdout.split()
    assert pid == pgid
    assert int(pgid) != os.getpgrp()


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    text = "#!/bin/sh\necho $$ > parent.pid\nsleep 60 &\necho $! > child.pid\nwait\n"
    start = time.monotonic()
    result = run(tmp_path, text, timeout=1.5)
    assert time.monotonic() - start < 30
    assert result.timed_out
    for name in ("parent.pid", "child.pid"):
        assert_gone(int((tmp_path / name).read_text()), name)


def test_a_tool_that_closes_its_output_but_keeps_running_is_timed_out(tmp_path: Path) -> None:
    text = "#!/bin/sh\necho $$ > parent.pid\nexec sleep 60 >&- 2>&-\n"
    start = time.monotonic()
    result = run(tmp_path, text, timeout=1)
    assert time.monotonic() - start < 30
    assert result.timed_out
    assert_gone(int((tmp_path / "parent.pid").read_text()), "the tool")


def test_exit_status_is_seen_as_soon_as_the_tool_exits(tmp_path: Path) -> None:
    # Output closes a moment before the exit status can be collected; both arrive.
    for _ in range(20):
        result = run(tmp_path, "#!/bin/sh\ncat >/dev/null\nexit 7\n", timeout=30)
        assert (result.exit_code, result.timed_out) == (7, False)


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    # An ignored signal stays ignored across fork and exec: nobody here dies of SIGTERM.
    text = (
        "#!/bin/sh\ntrap '' TERM\necho $$ > parent.pid\n"
        "sh -c 'echo $$ > child.pid; exec sleep 60' &\n"
        "exec sleep 60\n"
    )
    start = time.monotonic()
    result = run(tmp_path, text, timeout=1)
    assert time.monotonic() - start < 20
    assert result.timed_out
    assert result.exit_code == -9
    for name in ("parent.pid", "child.pid"):
        assert_gone(int((tmp_path / name).read_text()), name)


def test_output_over_the_limit_is_drained_and_counted(tmp_path: Path) -> None:
    text = (
        "#!/usr/bin/python3\nimport sys\n"
        "sys.stdout.write('a' * 3_000_000)\nsys.stdout.flush()\n"
        "sys.stderr.write('b' * 70_000)\n"
    )
    result = run(tmp_path, text, limit=1000)
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.stdout == b"a" * 1000
    assert result.stdout_dropped == 3_000_000 - 1000
    assert result.stderr == b"b" * 1000
    assert result.stderr_dropped == 70_000 - 1000


def test_default_limit_is_ten_mebibytes() -> None:
    assert OUTPUT_LIMIT == 10 * 1024 * 1024


def test_missing_executable_is_an_executable_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutableError, match=r"could not start .*nope: No such file"):
        run_process([str(tmp_path / "nope")], b"{}", env=ENV, cwd=str(tmp_path), timeout=5)


def test_non_executable_file_is_an_executable_error(tmp_path: Path) -> None:
    exe = script(tmp_path, "#!/bin/sh\ntouch ran\n")
    os.chmod(exe, 0o644)
    with pytest.raises(ExecutableError, match="Permission denied"):
        run_process([exe], b"{}", env=ENV, cwd=str(tmp_path), timeout=5)
    assert not (tmp_path / "ran").exists()


def test_a_failing_preexec_means_the_tool_never_runs(tmp_path: Path) -> None:
    exe = script(tmp_path, "#!/bin/sh\ntouch ran\n")

    def refuse() -> None:
        raise OSError(errno.EPERM, "sandbox refused")

    with pytest.raises(ExecutableError, match="could not start"):
        run_process([exe], b"{}", env=ENV, cwd=str(tmp_path), timeout=5, preexec=refuse)
    assert not (tmp_path / "ran").exists()


def test_pass_fds_reach_the_child(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        exe = script(
            tmp_path, f"#!/usr/bin/python3\nimport os\nos.write({write_end}, b'through\\n')\n"
        )
        result = run_process(
            [exe], b"", env=ENV, cwd=str(tmp_path), timeout=5, pass_fds=(write_end,)
        )
        os.close(write_end)
        write_end = -1
        assert result.exit_code == 0
        assert os.read(read_end, 100) == b"through\n"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
