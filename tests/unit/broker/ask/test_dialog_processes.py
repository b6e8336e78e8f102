"""``DialogProcesses`` and ``DialogError`` with real child processes.

Each test writes a small executable script standing in for the dialog program
(kdialog and zenity are driven for real under Xvfb in
tests/integration/test_prompters_x11.py): how it is found, started, read and
reported when it fails, word for word.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from test_dialog_prompters import FakeDialog, gone, make_request

from registry_core.broker.ask.dialog_process import (
    EOF_GRACE,
    KILL_GRACE,
    DialogError,
    DialogOutcome,
    DialogProcesses,
)
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.text import Limits
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.trusted import find_trusted

TIMEOUT = 10.0


def script(directory: Path, name: str, body: str) -> Path:
    """An executable Python script ``directory/name`` running ``body``."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    path.chmod(0o755)
    return path


def dialogs(bin_dir: Path, program: str = "fakedialog") -> DialogProcesses:
    """The stand-in ``bin_dir/program``, injected by its absolute path (as the
    front-ends pass the trusted program); its directory is on PATH too, unused."""
    return DialogProcesses(str(bin_dir / program), {"PATH": str(bin_dir), "DISPLAY": ":1"})


def show(processes: DialogProcesses, *args: str, stdin: bytes | None = None) -> DialogOutcome:
    return asyncio.run(asyncio.wait_for(processes.run(["req-1"], args, stdin), TIMEOUT))


def test_a_program_not_installed_where_ollie_trusts_could_not_be_started(tmp_path: Path) -> None:
    script(tmp_path / "bin", "ollie-no-such-dialog", "pass")  # on PATH, never looked at
    processes = DialogProcesses("ollie-no-such-dialog", {"PATH": str(tmp_path / "bin")})
    with pytest.raises(DialogError) as raised:
        show(processes)
    error = raised.value
    detail = "not installed in /usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin"
    assert str(error) == f"ollie-no-such-dialog could not be started: {detail}"
    assert (error.program, error.status, error.detail) == ("ollie-no-such-dialog", None, detail)


def test_a_missing_program_named_by_its_path_could_not_be_started(tmp_path: Path) -> None:
    with pytest.raises(DialogError) as raised:
        show(dialogs(tmp_path, "kdialog"))
    error = raised.value
    program = str(tmp_path / "kdialog")
    assert str(error) == f"{program} could not be started: not an executable file"
    assert (error.program, error.status, error.detail) == (program, None, "not an executable file")


def test_a_program_the_kernel_cannot_run_could_not_be_started(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "fakedialog"
    program.parent.mkdir()
    program.write_text("#!/nonexistent/interpreter\n")
    program.chmod(0o755)
    processes = dialogs(program.parent)
    with pytest.raises(DialogError) as raised:
        show(processes)
    reason = f"[Errno 2] No such file or directory: '{program}'"
    assert str(raised.value) == f"{program} could not be started: {reason}"
    assert (raised.value.program, raised.value.status, raised.value.detail) == (
        str(program),
        None,
        reason,
    )
    assert processes.running() == 0


def test_a_failure_without_stderr_names_its_status_alone(tmp_path: Path) -> None:
    program = str(script(tmp_path / "bin", "fakedialog", "sys.exit(3)"))
    with pytest.raises(DialogError) as raised:
        show(dialogs(tmp_path / "bin"))
    assert str(raised.value) == f"{program} failed with status 3"
    assert (raised.value.program, raised.value.status, raised.value.detail) == (program, 3, "")


def test_a_failure_names_its_status_and_the_end_of_its_stderr(tmp_path: Path) -> None:
    script(
        tmp_path / "bin",
        "fakedialog",
        "sys.stderr.write('x' * 500 + 'cannot open display\\n')\nsys.exit(3)",
    )
    with pytest.raises(DialogError) as raised:
        show(dialogs(tmp_path / "bin"))
    tail = ("x" * 500 + "cannot open display")[-400:]
    program = tmp_path / "bin" / "fakedialog"
    assert str(raised.value) == f"{program} failed with status 3: {tail}"
    assert raised.value.detail == tail


@pytest.mark.parametrize(
    ("stdout", "text"),
    [("secret", "secret"), ("secret\n", "secret"), ("secret\n\n", "secret\n"), ("", "")],
)
def test_the_answer_loses_one_final_newline_only(tmp_path: Path, stdout: str, text: str) -> None:
    script(tmp_path / "bin", "fakedialog", f"sys.stdout.write({stdout!r})")
    outcome = show(dialogs(tmp_path / "bin"))
    assert outcome == DialogOutcome(0, stdout.encode())
    assert outcome.text() == text


def test_a_program_named_by_its_absolute_path_is_used_as_it_is(tmp_path: Path) -> None:
    program = script(tmp_path / "elsewhere", "fakedialog", "print(sys.argv[1:])")
    processes = DialogProcesses(str(program), {"PATH": str(tmp_path), "DISPLAY": ":1"})
    assert processes.which() == str(program)
    assert processes.available()
    assert show(processes, "--yesno", "x").text() == "['--yesno', 'x']"
    program.chmod(0o644)
    assert processes.which() is None
    assert not processes.available()


def test_a_bare_name_is_never_looked_up_on_any_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(tmp_path / "bin", "fakedialog", "pass")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert DialogProcesses("fakedialog", {"DISPLAY": ":1"}).which() is None
    env = {"PATH": str(tmp_path / "bin"), "DISPLAY": ":1"}
    assert DialogProcesses("fakedialog", env).which() is None
    assert not DialogProcesses("fakedialog", env).available()
    # A name a system directory holds, root's: that file, whatever PATH says.
    assert DialogProcesses("sh", env).which() == find_trusted("sh")


def test_the_dialog_leads_a_session_of_its_own(tmp_path: Path) -> None:
    # ^C or a hang-up in the broker's terminal goes to the broker, which takes the dialog away.
    script(
        tmp_path / "bin",
        "fakedialog",
        "print(json.dumps([os.getsid(0), os.getpgrp(), os.getpid()]))",
    )
    sid, pgrp, pid = json.loads(show(dialogs(tmp_path / "bin")).text())
    assert sid == pgrp == pid
    assert sid != os.getsid(0)


def reap(pid: int, deadline: float) -> None:
    """Wait until ``pid`` is gone, reaping it if asyncio's watcher no longer does."""
    while not gone(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_dialog_ignoring_sigterm_is_killed_when_the_loop_ends_first(tmp_path: Path) -> None:
    # asyncio.run cancels the question and its reaper together: there is no time to wait
    # out KILL_GRACE, so the dialog is killed at once (see test_dialog_prompters.py's
    # test_dialog_goes_even_when_the_loop_ends_first, whose dialog obeys SIGTERM).
    ready = tmp_path / "ready"
    script(
        tmp_path / "bin",
        "fakedialog",
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(ready)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(3600)",
    )
    processes = dialogs(tmp_path / "bin")
    pids: list[int] = []

    async def main() -> None:
        task = asyncio.ensure_future(processes.run(["req-1"], []))
        deadline = time.monotonic() + TIMEOUT
        while not (ready.exists() and ready.read_text()):
            assert time.monotonic() < deadline, "the dialog never started"
            await asyncio.sleep(0.01)
        pids.append(int(ready.read_text()))
        task.cancel()  # and main returns at once, without awaiting it

    asyncio.run(main())
    deadline = time.monotonic() + TIMEOUT
    try:
        reap(pids[0], deadline)
        assert gone(pids[0])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[0], signal.SIGKILL)
        reap(pids[0], time.monotonic() + TIMEOUT)
    for thread in threading.enumerate():  # as in test_dialog_goes_even_when_the_loop_ends_first
        if thread.name.startswith("asyncio-waitpid-"):
            thread.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


def test_stderr_that_is_not_utf8_is_still_reported(tmp_path: Path) -> None:
    script(
        tmp_path / "bin", "fakedialog", "sys.stderr.buffer.write(b'bad \\xff byte')\nsys.exit(4)"
    )
    with pytest.raises(DialogError) as raised:
        show(dialogs(tmp_path / "bin"))
    program = tmp_path / "bin" / "fakedialog"
    assert str(raised.value) == f"{program} failed with status 4: bad \ufffd byte"


def test_a_request_keeps_its_other_dialog_when_one_ends(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script(
        tmp_path / "bin",
        "fakedialog",
        "import time\n"
        "if sys.argv[1] == 'stay':\n"
        f"    open({str(ready)!r}, 'w').close()\n"
        "    time.sleep(3600)",
    )
    processes = dialogs(tmp_path / "bin")

    async def scenario() -> tuple[int, int, DialogOutcome]:
        staying = asyncio.ensure_future(processes.run(["req-1", "pw-1"], ["stay"]))
        while not ready.exists():
            await asyncio.sleep(0.01)
        await processes.run(["req-1"], ["go"])  # ends at once
        open_now = processes.running()
        withdrawn = processes.withdraw("req-1", "timeout")
        return open_now, withdrawn, await staying

    open_now, withdrawn, outcome = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert (open_now, withdrawn) == (1, 1)
    assert outcome.withdrawn_by == "timeout"
    assert processes.running() == 0
    assert processes.withdraw("pw-1", "timeout") == 0  # forgotten under every key it served


STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "open(os.environ['READY'], 'w').write(str(os.getpid()))\n"
    "time.sleep(3600)"
)
"""A dialog that ignores SIGTERM and says when it does."""


def stubborn(tmp_path: Path) -> tuple[DialogProcesses, Path]:
    script(tmp_path / "bin", "fakedialog", STUBBORN)
    ready = tmp_path / "ready"
    env = {"DISPLAY": ":1", "READY": str(ready)}
    return DialogProcesses(str(tmp_path / "bin" / "fakedialog"), env), ready


async def started(ready: Path, processes: DialogProcesses) -> int:
    """The dialog's pid once it runs and ``processes`` holds it: the child writes its
    ready file before ``subprocess_exec`` returns, and a question cancelled in between
    is asyncio's to kill at once, with no grace."""
    deadline = time.monotonic() + TIMEOUT
    while not (ready.exists() and ready.read_text()) or processes.running() == 0:
        assert time.monotonic() < deadline, "the dialog never started"
        await asyncio.sleep(0.01)
    return int(ready.read_text())


def test_a_withdrawn_dialog_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    processes, ready = stubborn(tmp_path)

    async def scenario() -> tuple[DialogOutcome, float, int]:
        task = asyncio.ensure_future(processes.run(["req-1"], []))
        pid = await started(ready, processes)
        start = time.monotonic()
        assert processes.withdraw("req-1", "policy") == 1
        return await task, time.monotonic() - start, pid

    outcome, waited, pid = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert outcome == DialogOutcome(-signal.SIGKILL, b"", "policy")
    assert waited >= KILL_GRACE
    assert gone(pid)


def test_a_cancelled_dialog_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    processes, ready = stubborn(tmp_path)

    async def scenario() -> tuple[float, int]:
        task = asyncio.ensure_future(processes.run(["req-1"], []))
        pid = await started(ready, processes)
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start, pid

    waited, pid = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert KILL_GRACE <= waited < KILL_GRACE + TIMEOUT / 4  # killed by the grace, not the test
    assert gone(pid)  # killed and reaped before the question ended
    assert processes.running() == 0


def test_an_answer_is_taken_when_a_helper_keeps_stdout_open(tmp_path: Path) -> None:
    # The dialog leaves a helper behind (a D-Bus daemon, say) that inherited its stdout:
    # the dialog's end, not the end of its stdout, decides, after EOF_GRACE at most.
    helper = tmp_path / "helper"
    script(
        tmp_path / "bin",
        "fakedialog",
        "import subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(helper)!r}, 'w').write(str(child.pid))\n"
        "print('yes', flush=True)",
    )
    start = time.monotonic()
    try:
        outcome = show(dialogs(tmp_path / "bin"))
        assert time.monotonic() - start < EOF_GRACE + TIMEOUT / 2
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
            os.kill(int(helper.read_text()), signal.SIGKILL)
    assert outcome == DialogOutcome(0, b"yes\n")


def test_a_dialog_that_closes_its_input_unread_still_answers(tmp_path: Path) -> None:
    # More input than a pipe holds: the write is still waiting when the dialog closes it.
    script(
        tmp_path / "bin",
        "fakedialog",
        "import time\ntime.sleep(0.1)\nos.close(0)\nprint('done')",
    )
    outcome = show(dialogs(tmp_path / "bin"), stdin=b"x" * (4 << 20))
    assert outcome == DialogOutcome(0, b"done\n")


@pytest.mark.parametrize("name", ["kdialog", "zenity"])
def test_a_front_end_shows_what_its_limits_allow(tmp_path: Path, name: str) -> None:
    fake = FakeDialog(tmp_path, name)
    fake.answer({"status": 1})
    front_end = KDialogPrompter if name == "kdialog" else ZenityPrompter
    prompter = front_end(fake.env, binary=fake.program, limits=Limits(args_lines=300))
    request = make_request(args={f"a{i:03}": "v" for i in range(300)})
    asyncio.run(asyncio.wait_for(prompter.ask_approval(request), TIMEOUT))
    (call,) = fake.calls()
    shown = " ".join(call["argv"]) + call["stdin"]
    assert "a298" in shown  # the first of the 300 lines is "{"
    assert "a299" not in shown


@pytest.mark.parametrize("name", ["kdialog", "zenity"])
def test_a_front_end_runs_the_binary_it_is_given(tmp_path: Path, name: str) -> None:
    fake = FakeDialog(tmp_path, name)
    fake.answer({"status": 1})
    elsewhere = tmp_path / "elsewhere" / f"my-{name}"
    elsewhere.parent.mkdir()
    (tmp_path / "bin" / name).rename(elsewhere)  # not on PATH under its own name
    front_end = KDialogPrompter if name == "kdialog" else ZenityPrompter
    prompter = front_end(fake.env, binary=str(elsewhere))
    assert prompter.available()
    assert prompter.name == name
    approval = asyncio.run(asyncio.wait_for(prompter.ask_approval(make_request()), TIMEOUT))
    assert not approval.approved
    assert len(fake.calls()) == 1


def test_without_an_environment_the_broker_s_own_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = script(
        tmp_path / "bin", "fakedialog", "print(os.environ['MARK'], os.environ['LC_CTYPE'])"
    )
    monkeypatch.setenv("MARK", "from-the-broker")
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        monkeypatch.delenv(name, raising=False)
    processes = DialogProcesses(str(program))
    assert processes.which() == str(program)
    assert show(processes).text() == "from-the-broker C.UTF-8"
    assert "LC_CTYPE" not in os.environ  # a copy was changed, not the broker's own


def test_cancelled_again_while_waiting_the_dialog_is_killed_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    processes, ready = stubborn(tmp_path)

    async def scenario() -> float:
        task = asyncio.ensure_future(processes.run(["req-1"], []))
        pid = await started(ready, processes)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # SIGTERM sent, waiting for the dialog to go
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        waited = time.monotonic() - start
        deadline = time.monotonic() + TIMEOUT
        while not gone(pid):
            assert time.monotonic() < deadline, "the dialog is still there"
            await asyncio.sleep(0.01)
        for _ in range(5):
            await asyncio.sleep(0)  # the reaper ends
        return waited

    waited = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert waited < KILL_GRACE
    assert not [record.getMessage() for record in caplog.records if record.name == "asyncio"]
