"""The terminal front-end, driven for real through a pseudo-terminal pair.

The prompter opens the pty's slave by path (as it opens /dev/tty); the test
plays the person on the master side: it waits for the question to appear,
then types the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from async_run import run as run_with_deadline
from broker_questions import approval_request, password_request

from registry_core.broker.ask.dialog_process import TerminalError
from registry_core.broker.ask.terminal import (
    APPROVE_PROMPT,
    CHOICE_PROMPT,
    PASSWORD_PROMPT,
    WITHDRAWN,
    TerminalPrompter,
)
from registry_core.broker.question import (
    Approval,
    PasswordAnswer,
    Prompter,
    Remember,
)

TIMEOUT = 10.0
MARKER = "pw-MARKER-7f3a9c"


make_request = approval_request


class Pty:
    """The person's side of a pseudo-terminal."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.output = bytearray()
        self.pos = 0
        self.modes = termios.tcgetattr(self.slave)

    def lflag(self) -> int:
        flags: int = termios.tcgetattr(self.slave)[3]
        return flags

    def type(self, text: str | bytes) -> None:
        os.write(self.master, text.encode() if isinstance(text, str) else text)

    def _pull(self) -> None:
        try:
            while chunk := os.read(self.master, 65536):
                self.output += chunk
        except (BlockingIOError, OSError):
            pass

    async def expect(self, text: str) -> None:
        """Wait until ``text`` appears after everything already expected."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        needle = text.encode()
        while (found := self.output.find(needle, self.pos)) < 0:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"{text!r} never appeared; output: {bytes(self.output)!r}")
            ready: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = ready) -> None:
                if not future.done():
                    future.set_result(None)

            loop.add_reader(self.master, wake)
            try:
                await asyncio.wait_for(ready, remaining)
            except TimeoutError:
                pass
            finally:
                loop.remove_reader(self.master)
            self._pull()
        self.pos = found + len(needle)

    def seen(self) -> str:
        self._pull()
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def pty() -> Iterator[Pty]:
    terminal = Pty()
    yield terminal
    terminal.close()


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return run_with_deadline(coro_fn, TIMEOUT * 2)


def test_is_a_prompter(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    assert isinstance(prompter, Prompter)
    assert prompter.name == "terminal"
    assert prompter.available()


def test_not_available_without_a_terminal(tmp_path: Any) -> None:
    assert not TerminalPrompter(str(tmp_path / "missing")).available()
    regular = tmp_path / "file"
    regular.write_text("")
    assert not TerminalPrompter(str(regular)).available()


@pytest.mark.parametrize(
    ("answer", "choice", "expected"),
    [
        ("y", "", Approval(True, Remember.ONCE, "approved on the terminal")),
        ("yes", "3", Approval(True, Remember.MINUTES_15, "approved on the terminal")),
        ("A", "5", Approval(True, Remember.ALWAYS, "approved on the terminal")),
        ("approve", "2", Approval(True, Remember.SESSION, "approved on the terminal")),
        ("", "", Approval(False, Remember.ONCE, "denied on the terminal")),
        ("n", "2", Approval(False, Remember.DENY_ALWAYS, "denied on the terminal")),
        ("abort", "", Approval(False, Remember.ONCE, "denied on the terminal")),
        ("y", "9", Approval(True, Remember.ONCE, "approved on the terminal")),
        ("y", "two", Approval(True, Remember.ONCE, "approved on the terminal")),
    ],
)
def test_approval_answers(pty: Pty, answer: str, choice: str, expected: Approval) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        pty.type(answer + "\n")
        await pty.expect("Remember this")
        await pty.expect(CHOICE_PROMPT)
        pty.type(choice + "\n")
        return await task

    assert run(scenario) == expected
    shown = pty.seen()
    assert "disk_usage" in shown
    assert "sudo -A -- /usr/local/bin/disk_usage" in shown
    assert pty.modes == termios.tcgetattr(pty.slave)


def test_request_details_are_printed_before_the_question(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    request = make_request(mismatches=("argv differs",), remote=True, code="echo hi")

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(request))
        await pty.expect("!! REMOTE")
        await pty.expect("!! WARNING")
        await pty.expect("  | echo hi")
        await pty.expect(APPROVE_PROMPT)
        pty.type("\n\n")
        return await task

    assert not run(scenario).approved


def test_type_ahead_cannot_answer(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    pty.type("y\n")  # typed before the question was shown: discarded

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        pty.type("\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        return await task

    assert run(scenario) == Approval(False, Remember.ONCE, "denied on the terminal")


def test_end_of_input_denies(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        pty.type(b"\x04")  # ^D on an empty line
        return await task

    approval = run(scenario)
    assert not approval.approved
    assert approval.remember is Remember.ONCE
    assert "end of input" in approval.reason


def test_password_is_read_without_echo(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    echo_during_read: list[int] = []

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request(attempt=2)))
        await pty.expect("Wrong password, try again (2/3)")
        await pty.expect("[sudo] password for alice:")
        await pty.expect(PASSWORD_PROMPT)
        echo_during_read.append(pty.lflag() & termios.ECHO)
        pty.type(f"{MARKER} with spaces \n")
        return await task

    answer = run(scenario)
    assert answer.password == f"{MARKER} with spaces "
    assert echo_during_read == [0]
    assert MARKER not in pty.seen()  # never echoed, never printed
    assert MARKER not in repr(answer)
    assert pty.modes == termios.tcgetattr(pty.slave)
    assert pty.lflag() & termios.ECHO


def test_password_end_of_input_cancels(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        await pty.expect(PASSWORD_PROMPT)
        pty.type(b"\x04")
        return await task

    assert run(scenario) == PasswordAnswer(None)
    assert pty.modes == termios.tcgetattr(pty.slave)


def test_cancelled_approval_is_withdrawn(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> None:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await pty.expect(WITHDRAWN)

    run(scenario)
    assert pty.modes == termios.tcgetattr(pty.slave)


def test_cancelled_password_restores_echo_and_discards_typing(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> None:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        await pty.expect(PASSWORD_PROMPT)
        assert not pty.lflag() & termios.ECHO
        pty.type("half-typed-secr")  # no Enter yet
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await pty.expect(WITHDRAWN)

    run(scenario)
    assert pty.modes == termios.tcgetattr(pty.slave)
    assert pty.lflag() & termios.ECHO
    # Nothing half-typed is left for the next reader of the terminal.
    raw = termios.tcgetattr(pty.slave)
    raw[3] &= ~termios.ICANON
    raw[6][termios.VMIN] = 0
    raw[6][termios.VTIME] = 0
    termios.tcsetattr(pty.slave, termios.TCSANOW, raw)
    assert os.read(pty.slave, 100) == b""


def test_questions_are_asked_one_at_a_time(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    first = make_request(id="one", tool="first_tool")
    second = make_request(id="two", tool="second_tool")

    async def scenario() -> tuple[Approval, Approval]:
        task1 = asyncio.ensure_future(prompter.ask_approval(first))
        task2 = asyncio.ensure_future(prompter.ask_approval(second))
        await pty.expect(APPROVE_PROMPT)
        for _ in range(20):
            await asyncio.sleep(0)
        assert "second_tool" not in pty.seen()
        pty.type("y\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        await pty.expect("second_tool")
        await pty.expect(APPROVE_PROMPT)
        pty.type("n\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        return await task1, await task2

    one, two = run(scenario)
    assert one.approved
    assert not two.approved


def test_cancel_while_waiting_for_the_lock_shows_nothing(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> None:
        task1 = asyncio.ensure_future(prompter.ask_approval(make_request(id="a", tool="t_one")))
        task2 = asyncio.ensure_future(prompter.ask_approval(make_request(id="b", tool="t_two")))
        await pty.expect(APPROVE_PROMPT)
        task2.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task2
        pty.type("\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        assert not (await task1).approved

    run(scenario)
    assert "t_two" not in pty.seen()
    assert WITHDRAWN not in pty.seen()


def test_request_decided_prints_a_line(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    prompter.request_decided("req-9", False, "timeout")

    async def scenario() -> None:
        await pty.expect("[ollie] request req-9: denied (timeout)")
        task = asyncio.ensure_future(prompter.ask_approval(make_request(id="req-1")))
        await pty.expect(APPROVE_PROMPT)
        prompter.request_decided("req-2", True, "policy")
        await pty.expect("[ollie] request req-2: allowed (policy)")
        await pty.expect(APPROVE_PROMPT)  # the open question is asked again
        pty.type("\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        await task

    run(scenario)


def test_missing_terminal_is_an_error(tmp_path: Any) -> None:
    prompter = TerminalPrompter(str(tmp_path / "no-tty"))
    with pytest.raises(TerminalError):
        run(lambda: prompter.ask_approval(make_request()))
    prompter.request_decided("x", True, "policy")  # silently nothing


def test_a_terminal_that_cannot_be_used_is_named_in_words(tmp_path: Any) -> None:
    missing = tmp_path / "no-tty"
    with pytest.raises(TerminalError) as raised:
        run(lambda: TerminalPrompter(str(missing)).ask_approval(make_request()))
    assert str(raised.value) == f"cannot open {missing}: No such file or directory"
    regular = tmp_path / "file"
    regular.write_text("")
    with pytest.raises(TerminalError) as raised:
        run(lambda: TerminalPrompter(str(regular)).ask_approval(make_request()))
    assert str(raised.value) == f"{regular} is not a terminal"


def open_flags(pty: Pty) -> list[int]:
    """The open-file flags of this process's descriptors on the pty's slave but the test's own."""
    flags = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if int(name) != pty.slave and os.readlink(f"/proc/self/fd/{name}") == pty.path:
                info = Path(f"/proc/self/fdinfo/{name}").read_text()
                [line] = [x for x in info.splitlines() if x.startswith("flags:")]
                flags.append(int(line.split()[1], 8))
    return flags


def test_the_terminal_is_opened_non_blocking_and_close_on_exec(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    assert open_flags(pty) == []

    async def scenario() -> list[int]:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        during = open_flags(pty)
        pty.type("\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        await task
        return during

    [opened] = run(scenario)
    wanted = os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC
    assert opened & (os.O_ACCMODE | os.O_NONBLOCK | os.O_CLOEXEC) == wanted
    assert open_flags(pty) == []  # closed again


def test_each_question_sets_line_mode_and_keeps_the_other_modes(pty: Pty) -> None:
    """From a raw-ish terminal: ICRNL, OPOST|ONLCR, ICANON|ECHONL added, nothing else lost."""
    iflag, oflag, cflag, lflag, ispeed, ospeed, cc = termios.tcgetattr(pty.slave)
    iflag = termios.IXON
    oflag = termios.OCRNL
    lflag = termios.ISIG | termios.IEXTEN | termios.ECHO
    termios.tcsetattr(pty.slave, termios.TCSANOW, [iflag, oflag, cflag, lflag, ispeed, ospeed, cc])
    start = termios.tcgetattr(pty.slave)
    prompter = TerminalPrompter(pty.path)
    seen: list[list[int]] = []

    def modes() -> list[int]:
        return termios.tcgetattr(pty.slave)[:4]

    async def scenario() -> None:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        seen.append(modes())
        pty.type("\r")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\r")
        await task
        asked = asyncio.ensure_future(prompter.ask_password(password_request()))
        await pty.expect(PASSWORD_PROMPT)
        seen.append(modes())
        pty.type("x\r")
        await asked

    run(scenario)
    line = [
        termios.IXON | termios.ICRNL,
        termios.OCRNL | termios.OPOST | termios.ONLCR,
        cflag,
        termios.ISIG | termios.IEXTEN | termios.ICANON | termios.ECHONL | termios.ECHO,
    ]
    quiet = [*line[:3], line[3] & ~termios.ECHO]
    assert seen == [line, quiet]
    assert termios.tcgetattr(pty.slave) == start  # restored
