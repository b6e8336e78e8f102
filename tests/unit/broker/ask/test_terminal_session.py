"""The terminal front-end on a terminal that is really someone's controlling terminal,
and on a terminal that hangs up while it asks.

The pty of test_terminal_prompter.py is no process's controlling terminal, so job
control never applies there.  Here a forked child leads a new session whose
controlling terminal is the pty (a session leader's first terminal becomes its
own), as a broker started from a shell is: asked in the foreground it asks; a
member of a background process group refuses at once, without touching the
terminal's modes (which would stop it with SIGTTOU).  The test plays the person on
the pty's master side, as in test_terminal_prompter.py.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import termios
import time
from collections.abc import Callable

import pytest
from test_terminal_prompter import Pty, make_request, password_request, run

from registry_core.broker.ask.dialog_process import TerminalError
from registry_core.broker.ask.terminal import (
    APPROVE_PROMPT,
    CHOICE_PROMPT,
    PASSWORD_PROMPT,
    TerminalPrompter,
)
from registry_core.broker.ask.text import Limits, approval_text
from registry_core.broker.question import Approval, PasswordAnswer, Remember

TIMEOUT = 10.0


def _outcome(action: Callable[[], object]) -> str:
    try:
        return repr(action())
    except TerminalError as exc:
        return f"TerminalError: {exc}"


def _report(fd: int, action: Callable[[], object]) -> None:
    """Run ``action`` and write its outcome to ``fd``; never returns (a forked child)."""
    code = 1
    try:
        os.write(fd, _outcome(action).encode())
        code = 0
    finally:
        os._exit(code)


def in_session(pty: Pty, action: Callable[[], object], *, background: bool) -> tuple[int, int]:
    """Fork a child leading a new session on ``pty``; it runs ``action`` itself
    (``background=False``) or in a grandchild of a process group of its own, a
    background job of that terminal.  Returns the child's pid and the read end of a
    pipe that gets the outcome (``repr`` of the result, or ``TerminalError: message``).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read_end)
            os.setsid()
            os.close(os.open(pty.path, os.O_RDWR))  # now this session's controlling terminal
            if not background:
                _report(write_end, action)
            job = os.fork()
            if job == 0:
                os.setpgid(0, 0)
                _report(write_end, action)
            _, status = os.waitpid(job, os.WUNTRACED)
            if os.WIFSTOPPED(status):  # stopped by the terminal: say so, then end it
                os.write(write_end, f"stopped by signal {os.WSTOPSIG(status)}".encode())
                os.kill(job, signal.SIGKILL)
                os.waitpid(job, 0)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def outcome_of(child: tuple[int, int]) -> str:
    """What the child reported, once it has ended (it is reaped here)."""
    pid, read_end = child
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


@pytest.fixture
def pty() -> object:
    terminal = Pty()
    yield terminal
    terminal.close()


def test_in_the_foreground_of_its_terminal_it_asks_and_says_what_was_decided(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    def ask() -> Approval:
        prompter.request_decided("req-7", False, "timeout")
        result: Approval = asyncio.run(
            asyncio.wait_for(prompter.ask_approval(make_request()), TIMEOUT)
        )
        return result

    child = in_session(pty, ask, background=False)

    async def person() -> None:
        await pty.expect("[ollie] request req-7: denied (timeout)\r\r\n")  # ONLCR adds one
        await pty.expect(APPROVE_PROMPT)
        pty.type("y\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")

    run(person)
    assert outcome_of(child) == repr(Approval(True, Remember.ONCE, "approved on the terminal"))


def test_a_background_job_of_its_terminal_refuses_without_touching_it(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)
    before = pty.seen()

    def ask() -> Approval:
        prompter.request_decided("req-8", True, "policy")  # not printed: it would disturb the job
        result: Approval = asyncio.run(
            asyncio.wait_for(prompter.ask_approval(make_request()), TIMEOUT)
        )
        return result

    child = in_session(pty, ask, background=True)
    assert outcome_of(child) == "TerminalError: the broker is not in the foreground of its terminal"
    assert pty.seen() == before


def test_a_terminal_that_hangs_up_during_the_question_is_an_error(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        os.close(pty.master)  # the terminal window closes: the pty hangs up
        pty.master = os.open(os.devnull, os.O_RDONLY)  # for the fixture's close
        return await task

    with pytest.raises(TerminalError) as raised:
        run(scenario)
    assert str(raised.value) == "cannot write to the terminal: Input/output error"


def test_a_question_withdrawn_after_the_terminal_hung_up_is_still_withdrawn(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> None:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        os.close(pty.master)
        pty.master = os.open(os.devnull, os.O_RDONLY)
        task.cancel()  # in the same step: the question has not seen the hang-up yet
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario)  # CancelledError, not the failure to flush or restore the hung-up terminal


def stop_output(pty: Pty) -> None:
    """^S: the terminal stops output (IXON), as a person does to read what scrolls by."""
    modes = termios.tcgetattr(pty.slave)
    modes[0] |= termios.IXON
    termios.tcsetattr(pty.slave, termios.TCSANOW, modes)
    pty.type("\x13")
    deadline = time.monotonic() + TIMEOUT
    while select.select([], [pty.slave], [], 0)[1]:  # until the terminal takes nothing
        assert time.monotonic() < deadline, "output never stopped"
        time.sleep(0.001)


def test_output_stopped_with_ctrl_s_waits_for_ctrl_q(pty: Pty) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request()))
        await pty.expect(APPROVE_PROMPT)
        stop_output(pty)
        pty.type("y\n")
        for _ in range(50):
            await asyncio.sleep(0.002)
        assert "Remember this" not in pty.seen()  # the menu waits, the question is not lost
        assert not task.done()
        pty.type("\x11")  # ^Q: output resumes, the menu follows
        await pty.expect("Remember this approval?")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        return await task

    assert run(scenario) == Approval(True, Remember.ONCE, "approved on the terminal")


@pytest.mark.parametrize("asked_before", [False, True])
def test_a_decision_elsewhere_before_the_question_is_printed_shows_no_prompt_yet(
    pty: Pty, asked_before: bool
) -> None:
    # Output is stopped, so the question waits to be printed.  A decision announced
    # then is one line before it; the question's prompt comes once, after the question
    # (also when an earlier question had a prompt of its own).  The limits allow 300
    # argument lines: all of them are shown.
    limits = Limits(args_lines=300)
    prompter = TerminalPrompter(pty.path, limits=limits)
    request = make_request(args={f"a{i:03}": "v" * 150 for i in range(300)})

    async def scenario() -> Approval:
        if asked_before:
            earlier = asyncio.ensure_future(prompter.ask_approval(make_request(id="req-0")))
            await pty.expect(APPROVE_PROMPT)
            pty.type("\n")
            await pty.expect(CHOICE_PROMPT)
            pty.type("\n")
            await earlier
            await pty.expect("-> Denied: only this time.\r\n")
        stop_output(pty)
        task = asyncio.ensure_future(prompter.ask_approval(request))
        for _ in range(50):
            await asyncio.sleep(0.002)
        # ^Q, and announce before the question may go on (no await in between).
        pty.type("\x11")
        assert select.select([], [pty.slave], [], TIMEOUT)[1], "output never resumed"
        prompter.request_decided("other", True, "policy")
        await pty.expect(APPROVE_PROMPT)
        pty.type("\n")
        await pty.expect(CHOICE_PROMPT)
        pty.type("\n")
        return await task

    assert not run(scenario).approved
    text = approval_text(request, limits)
    body = "\n".join(["=" * 72, text.title, "=" * 72, *text.plain_lines(), ""])
    question = f"\n{body}\n".replace("\n", "\r\n") + APPROVE_PROMPT
    shown = pty.seen()
    announced = "\r\r\n[ollie] request other: allowed (policy)\r\r\n"
    assert shown[shown.index(announced) :].startswith(announced + question)
    assert shown.count(announced) == 1
    assert '"a298": ' in question  # every line the limits allow (the first is "{")


@pytest.mark.parametrize("password", [False, True])
def test_the_open_questions_own_decision_prints_nothing(pty: Pty, password: bool) -> None:
    # The broker cancels the question itself; an announcement would only repeat it.
    prompter = TerminalPrompter(pty.path)

    async def ask() -> object:
        if password:
            return await prompter.ask_password(password_request())
        return await prompter.ask_approval(make_request(id="req-1"))

    async def scenario() -> None:
        task = asyncio.ensure_future(ask())
        await pty.expect(PASSWORD_PROMPT if password else APPROVE_PROMPT)
        prompter.request_decided("pw-1" if password else "req-1", False, "timeout")
        for _ in range(20):
            await asyncio.sleep(0.002)
        assert "[ollie]" not in pty.seen()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario)


def test_a_question_whose_terminal_another_job_takes_is_an_error(pty: Pty) -> None:
    # The broker asks in the foreground; another job of its session takes the terminal
    # (as `fg` in the shell does).  The broker's process group, with no parent in the
    # session, is orphaned: reading the terminal then fails (EIO), the question ends.
    take, taken = os.pipe(), os.pipe()
    prompter = TerminalPrompter(pty.path)

    def ask() -> Approval:
        job = os.fork()
        if job == 0:  # pragma: no cover - the job that takes the terminal
            try:
                os.setpgid(0, 0)
                signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # to ask from the background
                os.read(take[0], 1)
                fd = os.open(pty.path, os.O_RDWR | os.O_NOCTTY)
                os.tcsetpgrp(fd, os.getpgrp())
                os.write(taken[1], b"x")
                os.read(take[0], 1)  # until the session ends
            finally:
                os._exit(0)
        try:
            result: Approval = asyncio.run(
                asyncio.wait_for(prompter.ask_approval(make_request()), TIMEOUT)
            )
            return result
        finally:
            os.kill(job, signal.SIGKILL)
            os.waitpid(job, 0)

    child = in_session(pty, ask, background=False)

    async def person() -> None:
        await pty.expect(APPROVE_PROMPT)
        os.write(take[1], b"x")
        assert select.select([taken[0]], [], [], TIMEOUT)[0], "the other job never took it"
        os.read(taken[0], 1)  # the other job has the terminal now
        pty.type("y\n")

    try:
        run(person)
        assert outcome_of(child) == "TerminalError: terminal gone: Input/output error"
    finally:
        for fd in (*take, *taken):
            os.close(fd)


def test_echo_is_off_while_the_password_question_is_printed(pty: Pty) -> None:
    # A password typed before its prompt shows (the question still printing, held by
    # ^S here) is not shown either.
    prompter = TerminalPrompter(pty.path)
    stop_output(pty)

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        for _ in range(50):
            await asyncio.sleep(0.002)
        assert not task.done()  # waiting to print the question
        assert not pty.lflag() & termios.ECHO
        pty.type("\x11")
        await pty.expect(PASSWORD_PROMPT)
        pty.type("secret\n")
        return await task

    assert run(scenario) == PasswordAnswer("secret")
    assert "secret" not in pty.seen()


def test_a_decision_elsewhere_during_the_password_question_shows_its_prompt_again(
    pty: Pty,
) -> None:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request()))
        await pty.expect(PASSWORD_PROMPT)
        prompter.request_decided("req-2", True, "policy")
        await pty.expect(f"\r\r\n[ollie] request req-2: allowed (policy)\r\r\n{PASSWORD_PROMPT}")
        pty.type("secret\n")
        return await task

    assert run(scenario) == PasswordAnswer("secret")
