"""run_process at its edges: exact errors, the start hook, descriptors, no pidfd, limits."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from registry_core.dispatch.process import ProcessResult, run_process
from registry_core.errors import ExecutableError

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def tool(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tool"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def run(tmp_path: Path, text: str, stdin: bytes = b"", **kwargs: object) -> ProcessResult:
    return run_process(
        [tool(tmp_path, text)],
        stdin,
        env=ENV,
        cwd=str(tmp_path),
        **{"timeout": 30, **kwargs},  # type: ignore[arg-type]
    )


def no_pidfd(pid: int) -> int:
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def test_a_missing_program_is_refused_word_for_word(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ExecutableError) as caught:
        run_process([str(missing)], b"{}", env=ENV, cwd=str(tmp_path), timeout=5)
    assert str(caught.value) == f"could not start {missing}: No such file or directory"


def test_a_failing_preexec_is_refused_word_for_word(tmp_path: Path) -> None:
    exe = tool(tmp_path, "#!/bin/sh\ntouch ran\n")

    def refuse() -> None:
        raise OSError(errno.EPERM, "sandbox refused")

    with pytest.raises(ExecutableError) as caught:
        run_process([exe], b"{}", env=ENV, cwd=str(tmp_path), timeout=5, preexec=refuse)
    assert str(caught.value) == f"could not start {exe}: Exception occurred in preexec_fn."
    assert not (tmp_path / "ran").exists()


def test_the_start_hook_gets_the_tools_pid_once(tmp_path: Path) -> None:
    started: list[int] = []
    result = run(tmp_path, "#!/bin/sh\necho $$\n", on_start=started.append)
    assert started == [int(result.stdout)]


def test_no_other_descriptor_reaches_the_tool(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    try:
        result = run(tmp_path, "#!/bin/sh\nls /proc/self/fd\n")
    finally:
        os.close(read_end)
        os.close(write_end)
    # stdin, stdout, stderr and the descriptor ls opens to list the directory.
    assert result.stdout.split() == [b"0", b"1", b"2", b"3"]


def test_empty_stdin_is_closed_at_once(tmp_path: Path) -> None:
    result = run(tmp_path, "#!/bin/sh\nwc -c\n", b"")
    assert (result.exit_code, result.stdout.strip(), result.timed_out) == (0, b"0", False)


def test_a_tool_timed_out_is_ended_with_sigterm(tmp_path: Path) -> None:
    result = run(tmp_path, "#!/bin/sh\nexec sleep 60\n", timeout=0.5)
    assert (result.timed_out, result.exit_code) == (True, -15)


def test_without_pidfd_the_exit_status_still_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel older than 5.3: Popen's polling wait instead of a pidfd.
    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    result = run(tmp_path, "#!/bin/sh\nexec >&- 2>&-\nexit 7\n")
    assert (result.exit_code, result.timed_out) == (7, False)


def test_without_pidfd_a_tool_that_closed_its_output_is_still_timed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    result = run(tmp_path, "#!/bin/sh\nexec sleep 60 >&- 2>&-\n", timeout=0.5)
    assert (result.timed_out, result.exit_code) == (True, -15)


def test_output_of_exactly_the_limit_is_kept_whole(tmp_path: Path) -> None:
    text = "#!/bin/sh\nprintf 12345\nprintf abcdef >&2\n"
    result = run(tmp_path, text, limit=5)
    assert (result.stdout, result.stdout_dropped) == (b"12345", 0)
    assert (result.stderr, result.stderr_dropped) == (b"abcde", 1)


def test_a_tool_that_ignores_its_input_ends_the_call_at_once(tmp_path: Path) -> None:
    # The unread input hits EPIPE; the rest of it is dropped, not retried until the timeout.
    result = run(tmp_path, "#!/bin/sh\necho done\n", b"y" * (2 * 1024 * 1024))
    assert (result.exit_code, result.stdout, result.timed_out) == (0, b"done\n", False)


def test_a_tool_that_writes_much_before_reading_its_input_does_not_deadlock(
    tmp_path: Path,
) -> None:
    # The tool reads one page of its input, writes 1 MiB, then reads the rest: a
    # blocking write of the next input chunk would wait for a reader that is itself
    # waiting for its output to be read.
    text = (
        "#!/usr/bin/python3\nimport os\n"
        "got = len(os.read(0, 4096))\n"
        "view = memoryview(b'o' * (1024 * 1024))\n"
        "while view:\n    view = view[os.write(1, view):]\n"
        "while chunk := os.read(0, 65536):\n    got += len(chunk)\n"
        "os.write(2, str(got).encode())\n"
    )
    payload = b"i" * (1024 * 1024)
    result = run(tmp_path, text, payload, timeout=60)
    assert (result.exit_code, result.timed_out) == (0, False)
    assert (len(result.stdout), result.stderr) == (1024 * 1024, b"1048576")


def test_a_tool_answering_in_the_last_second_of_its_timeout_is_not_timed_out(
    tmp_path: Path,
) -> None:
    result = run(tmp_path, "#!/bin/sh\nsleep 0.5\necho done\n", timeout=1.45)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, b"done\n", False)


def test_output_held_open_past_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    # The tool exits at once, but a process it moved to a session of its own keeps
    # the output open: the call did not finish in time.
    text = "#!/bin/sh\nsetsid sleep 60 &\necho $!\n"
    result = run(tmp_path, text, timeout=1)
    leftover = int(result.stdout)
    try:
        assert (result.timed_out, result.exit_code) == (True, 0)
    finally:
        os.kill(leftover, 9)
