"""kdialog and zenity front-ends against a fake dialog program (no display needed).

``FakeDialog`` installs an executable called ``kdialog`` or ``zenity`` that
records each call (argv, stdin, environment, pid) and answers with the next
scripted exit status and stdout, or stays open until it is killed.  The
real programs are exercised under Xvfb in tests/integration/test_prompters_x11.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from async_run import run as run_with_deadline
from broker_questions import approval_request
from broker_questions import password_request as question

from registry_core.broker.ask.dialog_process import DialogError, with_utf8_locale
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    Approval,
    PasswordAnswer,
    PasswordRequest,
    Prompter,
    Remember,
)

TIMEOUT = 10.0
MARKER = "pw-MARKER-51c0de"
HANG: dict[str, Any] = {"hang": True}

FAKE_PROGRAM = """#!{python}
import json, os, sys, time
from pathlib import Path
state = Path(os.environ["FAKE_DIALOG_DIR"])
n = len(list(state.glob("call-*.json")))
record = {{"argv": sys.argv[1:], "stdin": sys.stdin.read(), "pid": os.getpid(),
          "env": dict(os.environ)}}
(state / "tmp.json").write_text(json.dumps(record))
(state / "tmp.json").rename(state / f"call-{{n:03}}.json")
answers = json.loads((state / "answers.json").read_text())
answer = answers[n] if n < len(answers) else {{"hang": True}}
if answer.get("hang"):
    time.sleep(3600)
sys.stderr.write(answer.get("stderr", ""))
sys.stdout.write(answer.get("stdout", ""))
sys.exit(answer.get("status", 0))
"""

DialogPrompter = KDialogPrompter | ZenityPrompter
FRONT_ENDS: dict[str, type[DialogPrompter]] = {"kdialog": KDialogPrompter, "zenity": ZenityPrompter}


class FakeDialog:
    def __init__(self, tmp_path: Path, program: str) -> None:
        self.state = tmp_path / "state"
        self.state.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        script = bin_dir / program
        script.write_text(FAKE_PROGRAM.format(python=sys.executable))
        script.chmod(0o755)
        # The program is injected by its absolute path (as production code passes the
        # trusted one); the dialog's PATH holds it too, and is never looked at.
        self.program = str(script)
        self.env = {"PATH": str(bin_dir), "DISPLAY": ":99", "FAKE_DIALOG_DIR": str(self.state)}
        self.answer()

    def answer(self, *answers: dict[str, Any]) -> None:
        (self.state / "answers.json").write_text(json.dumps(list(answers)))

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.state.glob("call-*.json"))]

    async def wait_for_call(self, index: int) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while len(calls := self.calls()) <= index:
            assert loop.time() < deadline, f"dialog #{index} never opened"
            await asyncio.sleep(0.01)
        return calls[index]


make_request = functools.partial(
    approval_request,
    tool="net_admin",
    description="Configure <network> & things",
    variant=2,
    sha256="cd" * 32,
    args={"iface": "eth0"},
    cwd="/srv",
    requester=Requester(pid=77, uid=1000, gid=1000, exe="/usr/bin/agent"),
)


def password_request(attempt: int = 1) -> PasswordRequest:
    return question(make_request(), attempt=attempt, prompt="[sudo] password for bob: ", user="bob")


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return run_with_deadline(coro_fn, TIMEOUT * 2)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(params=sorted(FRONT_ENDS))
def front_end(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FakeDialog, DialogPrompter]:
    fake = FakeDialog(tmp_path, request.param)
    return fake, FRONT_ENDS[request.param](fake.env, binary=fake.program)


# --- both front-ends ---------------------------------------------------------------------


def test_protocol_and_availability(
    tmp_path: Path, front_end: tuple[FakeDialog, DialogPrompter]
) -> None:
    fake, prompter = front_end
    assert isinstance(prompter, Prompter)
    assert prompter.available()
    no_display = {k: v for k, v in fake.env.items() if k != "DISPLAY"}
    assert not type(prompter)(no_display, binary=fake.program).available()
    wayland = {**no_display, "WAYLAND_DISPLAY": "wayland-0"}
    assert type(prompter)(wayland, binary=fake.program).available()


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
def test_missing_program(tmp_path: Path, name: str) -> None:
    missing = str(tmp_path / name)
    prompter = FRONT_ENDS[name]({"PATH": str(tmp_path), "DISPLAY": ":1"}, binary=missing)
    assert not prompter.available()
    with pytest.raises(DialogError, match="not an executable file"):
        run(lambda: prompter.ask_approval(make_request()))


def test_approve_for_an_hour(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer({"status": 0}, {"status": 0, "stdout": "1h\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    assert approval == Approval(True, Remember.HOUR, f"approved in {prompter.name}")
    assert len(fake.calls()) == 2


def test_unknown_program_status_is_an_error(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer({"status": 255, "stderr": "cannot open display", "stdout": "secret-out"})
    with pytest.raises(DialogError, match="status 255: cannot open display") as info:
        run(lambda: prompter.ask_approval(make_request()))
    assert "secret-out" not in str(info.value)


def test_password(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer({"status": 0, "stdout": f"{MARKER} x\n"})
    answer = run(lambda: prompter.ask_password(password_request(attempt=3)))
    assert answer == PasswordAnswer(f"{MARKER} x")
    assert MARKER not in repr(answer)
    (call,) = fake.calls()
    text = " ".join(call["argv"])
    assert "Wrong password, try again (3/3)" in text
    assert "bob" in text
    assert "net" in text  # the tool (zenity doubles the underscore: a mnemonic)
    assert MARKER not in text
    assert all(MARKER not in value for value in call["env"].values())


def test_password_cancelled(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer({"status": 1, "stdout": "\n"})
    assert run(lambda: prompter.ask_password(password_request())) == PasswordAnswer(None)


def test_cancel_takes_the_dialog_away(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer(HANG)

    async def scenario() -> int:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        call = await fake.wait_for_call(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int(call["pid"])

    pid = run(scenario)
    assert gone(pid)  # terminated and reaped, not a zombie
    assert prompter.open_dialogs() == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_dialog_goes_even_when_the_loop_ends_first(
    front_end: tuple[FakeDialog, DialogPrompter],
) -> None:
    # asyncio.run cancels every task left when main ends, the reaper included (before
    # it ever runs); the dialog must be gone anyway.  asyncio itself then complains
    # about a subprocess transport outliving its loop (the filtered warning).
    fake, prompter = front_end
    fake.answer(HANG)
    pids: list[int] = []

    async def main() -> None:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        pids.append(int((await fake.wait_for_call(0))["pid"]))
        task.cancel()  # and main returns at once, without awaiting it

    asyncio.run(main())
    deadline = time.monotonic() + TIMEOUT
    while not gone(pids[0]) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pids[0], os.WNOHANG)  # reap it if asyncio's watcher no longer does
        time.sleep(0.01)
    assert gone(pids[0])
    # asyncio's child watcher waits for the pid in a thread of its own, which holds the
    # subprocess transport until it ends: let it end first, or the transport becomes
    # garbage later and its complaint fails whichever test next collects it.
    for thread in threading.enumerate():
        if thread.name.startswith("asyncio-waitpid-"):
            thread.join(max(0.0, deadline - time.monotonic()))
    gc.collect()  # asyncio's complaints, now, while they are filtered


def test_cancel_takes_the_password_dialog_away(
    front_end: tuple[FakeDialog, DialogPrompter],
) -> None:
    fake, prompter = front_end
    fake.answer(HANG)

    async def scenario() -> int:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        call = await fake.wait_for_call(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int(call["pid"])

    assert gone(run(scenario))


def test_request_decided_closes_the_dialog(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer(HANG)

    async def scenario() -> tuple[Approval, int]:
        task = asyncio.ensure_future(prompter.ask_approval(make_request(id="abc")))
        call = await fake.wait_for_call(0)
        prompter.request_decided("other", True, "policy")  # not ours: stays open
        await asyncio.sleep(0)
        assert not task.done()
        prompter.request_decided("abc", False, "timeout")
        return await task, int(call["pid"])

    approval, pid = run(scenario)
    assert approval == Approval(False, Remember.ONCE, "withdrawn: decided by timeout")
    assert gone(pid)


def test_request_decided_closes_its_password_dialog(
    front_end: tuple[FakeDialog, DialogPrompter],
) -> None:
    fake, prompter = front_end
    fake.answer(HANG)

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        await fake.wait_for_call(0)
        prompter.request_decided("req-1", False, "client_gone")  # the approval's id
        return await task

    assert run(scenario) == PasswordAnswer(None)


def test_one_dialog_at_a_time(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer(HANG, {"status": 1})

    async def scenario() -> tuple[Approval, Approval]:
        first = asyncio.ensure_future(prompter.ask_approval(make_request(id="one")))
        second = asyncio.ensure_future(prompter.ask_approval(make_request(id="two")))
        await fake.wait_for_call(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(fake.calls()) == 1
        assert prompter.open_dialogs() == 1
        prompter.request_decided("one", False, "timeout")
        return await first, await second

    first, second = run(scenario)
    assert not first.approved
    assert not second.approved
    assert len(fake.calls()) == 2


def test_dialogs_get_a_utf8_locale(front_end: tuple[FakeDialog, DialogPrompter]) -> None:
    fake, prompter = front_end
    fake.answer({"status": 1})
    run(lambda: prompter.ask_approval(make_request()))
    (call,) = fake.calls()
    assert call["env"]["LC_CTYPE"] == "C.UTF-8"  # the fake's env has no locale at all
    assert call["env"]["FAKE_DIALOG_DIR"] == fake.env["FAKE_DIALOG_DIR"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"LC_CTYPE": "C.UTF-8"}),
        ({"LANG": "de_DE.UTF-8"}, {"LANG": "de_DE.UTF-8"}),
        ({"LANG": "C", "LC_CTYPE": "en_US.utf8"}, {"LANG": "C", "LC_CTYPE": "en_US.utf8"}),
        ({"LANG": "C"}, {"LANG": "C", "LC_CTYPE": "C.UTF-8"}),
        ({"LC_ALL": "POSIX", "LANG": "de_DE.UTF-8"}, {"LC_ALL": "C.UTF-8", "LANG": "de_DE.UTF-8"}),
    ],
)
def test_with_utf8_locale(env: dict[str, str], expected: dict[str, str]) -> None:
    assert with_utf8_locale(env) == expected


# --- kdialog -----------------------------------------------------------------------------


@pytest.fixture
def kdialog(tmp_path: Path) -> tuple[FakeDialog, KDialogPrompter]:
    fake = FakeDialog(tmp_path, "kdialog")
    return fake, KDialogPrompter(fake.env, binary=fake.program)


def test_kdialog_arguments(kdialog: tuple[FakeDialog, KDialogPrompter]) -> None:
    fake, prompter = kdialog
    fake.answer({"status": 0}, {"status": 0, "stdout": "session\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    assert approval == Approval(True, Remember.SESSION, "approved in kdialog")
    question, how_long = (call["argv"] for call in fake.calls())
    assert question[:6] == ["--title", question[1], "--yes-label", "Approve", "--no-label", "Deny"]
    assert "net_admin" in question[1]
    assert question[6] == "--warningyesno"
    assert question[7].startswith("<qt>")
    assert "Configure &lt;network&gt; &amp; things" in question[7]
    assert "ollie-tools policy deny net_admin" in question[7]
    assert how_long[2] == "--radiolist"
    assert how_long[4:7] == ["deny", "Deny after all", "on"]  # Enter twice denies
    assert how_long[7:] == [
        *("once", "Only this time", "off", "session", "For this session", "off"),
        *("15m", "For 15 minutes", "off", "1h", "For 1 hour", "off"),
        *("always", "Always", "off"),
    ]


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([{"status": 1}], Approval(False, Remember.ONCE, "denied in kdialog")),
        ([{"status": 2}], Approval(False, Remember.ONCE, "kdialog closed without an answer")),
        (
            [{"status": 0}, {"status": 0, "stdout": "deny\n"}],
            Approval(False, Remember.ONCE, "denied in kdialog (no duration chosen)"),
        ),
        (
            [{"status": 0}, {"status": 1, "stdout": "\n"}],
            Approval(False, Remember.ONCE, "denied in kdialog (no duration chosen)"),
        ),
        (
            [{"status": 0}, {"status": 0, "stdout": "deny_always\n"}],
            Approval(False, Remember.ONCE, "kdialog gave an unknown choice 'deny_always'"),
        ),
        (
            [{"status": 0}, {"status": 0, "stdout": "always\n"}],
            Approval(True, Remember.ALWAYS, "approved in kdialog"),
        ),
    ],
)
def test_kdialog_answers(
    kdialog: tuple[FakeDialog, KDialogPrompter], answers: list[dict[str, Any]], expected: Approval
) -> None:
    fake, prompter = kdialog
    fake.answer(*answers)
    assert run(lambda: prompter.ask_approval(make_request())) == expected


def test_kdialog_password_arguments(kdialog: tuple[FakeDialog, KDialogPrompter]) -> None:
    fake, prompter = kdialog
    fake.answer({"status": 0, "stdout": "pw\n"})
    run(lambda: prompter.ask_password(password_request()))
    (call,) = fake.calls()
    assert call["argv"][0] == "--title"
    assert call["argv"][2] == "--password"
    assert call["argv"][3].startswith("<qt>")


# --- zenity ------------------------------------------------------------------------------


@pytest.fixture
def zenity(tmp_path: Path) -> tuple[FakeDialog, ZenityPrompter]:
    fake = FakeDialog(tmp_path, "zenity")
    return fake, ZenityPrompter(fake.env, binary=fake.program)


def test_zenity_arguments(zenity: tuple[FakeDialog, ZenityPrompter]) -> None:
    fake, prompter = zenity
    fake.answer({"status": 0}, {"status": 0, "stdout": "15m\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    assert approval == Approval(True, Remember.MINUTES_15, "approved in zenity")
    question, how_long = (call["argv"] for call in fake.calls())
    assert question[0] == "--question"
    for flag in ("--default-cancel", "--ok-label=Approve", "--cancel-label=Deny"):
        assert flag in question
    assert "--extra-button=Deny always" in question
    text = next(arg for arg in question if arg.startswith("--text="))
    assert "Configure &lt;network&gt; &amp; things" in text
    assert any(arg.startswith("--title=") and "net_admin" in arg for arg in question)
    assert how_long[0] == "--list"
    assert "--radiolist" not in how_long  # radio buttons cannot be used from the keyboard
    for flag in ("--hide-column=2", "--print-column=2", "--cancel-label=Deny after all"):
        assert flag in how_long
    assert how_long[-10:] == [
        *("Only this time", "once", "For this session", "session"),
        *("For 15 minutes", "15m", "For 1 hour", "1h", "Always", "always"),
    ]


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([{"status": 1}], Approval(False, Remember.ONCE, "denied in zenity")),
        (
            [{"status": 1, "stdout": "Deny always\n"}],
            Approval(False, Remember.DENY_ALWAYS, "denied always in zenity"),
        ),
        ([{"status": 5}], Approval(False, Remember.ONCE, "zenity closed without an answer")),
        (
            [{"status": 0}, {"status": 0, "stdout": "\n"}],
            Approval(True, Remember.ONCE, "approved in zenity"),
        ),
        (
            [{"status": 0}, {"status": 1}],
            Approval(False, Remember.ONCE, "denied in zenity (no duration chosen)"),
        ),
        (
            [{"status": 0}, {"status": 0, "stdout": "deny_always\n"}],
            Approval(False, Remember.ONCE, "zenity gave an unknown choice 'deny_always'"),
        ),
    ],
)
def test_zenity_answers(
    zenity: tuple[FakeDialog, ZenityPrompter], answers: list[dict[str, Any]], expected: Approval
) -> None:
    fake, prompter = zenity
    fake.answer(*answers)
    assert run(lambda: prompter.ask_approval(make_request())) == expected


def test_zenity_long_request_uses_a_scrolling_view(
    zenity: tuple[FakeDialog, ZenityPrompter],
) -> None:
    fake, prompter = zenity
    fake.answer({"status": 1})
    code = "\n".join(f"echo step {i} <&>" for i in range(200))
    run(lambda: prompter.ask_approval(make_request(code=code)))
    (call,) = fake.calls()
    assert call["argv"][0] == "--text-info"
    assert "--checkbox=I have read this request" in call["argv"]
    assert not any(arg.startswith("--text=") for arg in call["argv"])
    assert "  | echo step 199 <&>" in call["stdin"]  # plain text, all of it
    assert "  | echo step 0 <&>" in call["stdin"]


def test_zenity_password_arguments(zenity: tuple[FakeDialog, ZenityPrompter]) -> None:
    fake, prompter = zenity
    fake.answer({"status": 0, "stdout": "pw\n"})
    run(lambda: prompter.ask_password(password_request()))
    (call,) = fake.calls()
    assert call["argv"][:2] == ["--entry", "--hide-text"]
    text = next(arg for arg in call["argv"] if arg.startswith("--text="))
    assert "net__admin" in text  # underscores are mnemonics in an entry label
