"""What the terminal front-end prints, word for word, for each way a question goes.

Through the real pseudo-terminal of test_terminal_prompter.py: the transcript is
everything the person's terminal received, the echo of what they typed
included (the line discipline turns each newline into CR LF).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from action_requests import edit_request
from test_terminal_prompter import Pty, make_request, password_request, run

from registry_core.broker.ask.dialog_process import TerminalError
from registry_core.broker.ask.terminal import (
    APPROVE_PROMPT,
    CHOICE_PROMPT,
    PASSWORD_PROMPT,
    TerminalPrompter,
)
from registry_core.broker.ask.text import PromptText, approval_text, password_text
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)

APPROVAL_MENU = (
    "Remember this approval?\n  1) Only this time\n  2) For this session\n"
    "  3) For 15 minutes\n  4) For 1 hour\n  5) Always\n"
)
DENIAL_MENU = "Remember this denial?\n  1) Only this time\n  2) Deny always\n"
PATTERN_QUESTION = (
    "Remember this answer for files at or beneath:\nKeep the suggested pattern, or change it;"
    " it must still cover this action (a path ending in / covers every file beneath it).\n"
)
PATTERN = "Pattern [/home/a/proj/src/app.py]: "


@pytest.fixture
def pty() -> Any:
    terminal = Pty()
    yield terminal
    terminal.close()


def on_screen(text: str) -> str:
    return text.replace("\n", "\r\n")


def block(text: PromptText) -> str:
    """The question's text as printed before its prompt: a blank line, the title between
    two rules, the lines, a blank line."""
    rule = "=" * 72
    return on_screen("\n" + "\n".join([rule, text.title, rule, *text.plain_lines(), ""]) + "\n")


def answer(pty: Pty, request: ApprovalRequest, *typed: tuple[str, str | bytes]) -> Approval:
    """Ask ``request``; each (prompt, text) types text once prompt is shown."""
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(request))
        for prompt, text in typed:
            await pty.expect(prompt)
            pty.type(text)
        return await task

    result: Approval = run(scenario)
    return result


def give_password(pty: Pty, request: PasswordRequest, typed: str | bytes) -> PasswordAnswer:
    prompter = TerminalPrompter(pty.path)

    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(request))
        await pty.expect(PASSWORD_PROMPT)
        pty.type(typed)
        return await task

    result: PasswordAnswer = run(scenario)
    return result


def test_approved_for_15_minutes(pty: Pty) -> None:
    request = make_request()
    approval = answer(pty, request, (APPROVE_PROMPT, "yes\n"), (CHOICE_PROMPT, "3\n"))
    assert approval == Approval(True, Remember.MINUTES_15, "approved on the terminal")
    assert pty.seen() == block(approval_text(request)) + APPROVE_PROMPT + on_screen(
        f"yes\n{APPROVAL_MENU}{CHOICE_PROMPT}3\n-> Approved: for 15 minutes.\n"
    )


def test_denied_always(pty: Pty) -> None:
    request = make_request()
    approval = answer(pty, request, (APPROVE_PROMPT, "n\n"), (CHOICE_PROMPT, "2\n"))
    assert approval == Approval(False, Remember.DENY_ALWAYS, "denied on the terminal")
    assert pty.seen() == block(approval_text(request)) + APPROVE_PROMPT + on_screen(
        f"n\n{DENIAL_MENU}{CHOICE_PROMPT}2\n-> Denied: deny always.\n"
    )


def test_end_of_input_at_the_question(pty: Pty) -> None:
    request = make_request()
    approval = answer(pty, request, (APPROVE_PROMPT, b"\x04"))
    assert approval == Approval(False, Remember.ONCE, "no answer on the terminal (end of input)")
    assert pty.seen() == block(approval_text(request)) + APPROVE_PROMPT + on_screen(
        "\n-> Denied (end of input).\n"
    )


def test_answers_that_are_not_utf8_deny_once(pty: Pty) -> None:
    approval = answer(
        pty, make_request(), (APPROVE_PROMPT, b"y\xff\n"), (CHOICE_PROMPT, b"2\xfe\n")
    )
    assert approval == Approval(False, Remember.ONCE, "denied on the terminal")
    assert pty.seen().endswith(
        on_screen(f"y\ufffd\n{DENIAL_MENU}{CHOICE_PROMPT}2\ufffd\n-> Denied: only this time.\n")
    )


def test_a_refused_pattern_then_one_that_covers(pty: Pty) -> None:
    request = edit_request()
    approval = answer(
        pty,
        request,
        (APPROVE_PROMPT, "y\n"),
        (CHOICE_PROMPT, "5\n"),
        (PATTERN, "/etc/\n"),
        (PATTERN, "/home/a/proj/\n"),
    )
    assert approval == Approval(True, Remember.ALWAYS, "approved on the terminal", "/home/a/proj/")
    assert pty.seen() == block(approval_text(request)) + APPROVE_PROMPT + on_screen(
        f"y\n{APPROVAL_MENU}{CHOICE_PROMPT}5\n{PATTERN_QUESTION}{PATTERN}/etc/\n"
        "Not accepted: '/etc/' does not cover this action. Enter keeps the suggestion.\n"
        f"{PATTERN}/home/a/proj/\n"
        "-> Approved: always, for files at or beneath /home/a/proj/.\n"
    )


def test_three_refused_patterns_remember_nothing(pty: Pty) -> None:
    approval = answer(
        pty,
        edit_request(),
        (APPROVE_PROMPT, "y\n"),
        (CHOICE_PROMPT, "5\n"),
        (PATTERN, "/etc/\n"),
        (PATTERN, "/x/\n"),
        (PATTERN, "/y/\n"),
    )
    reason = "approved on the terminal (not remembered: '/y/' does not cover this action)"
    assert approval == Approval(True, Remember.ONCE, reason)
    refusals = "".join(
        f"{PATTERN}{typed}\nNot accepted: '{typed}' does not cover this action."
        " Enter keeps the suggestion.\n"
        for typed in ("/etc/", "/x/", "/y/")
    )
    assert pty.seen().endswith(
        on_screen(f"{PATTERN_QUESTION}{refusals}-> Approved: only this time.\n")
    )


def test_end_of_input_at_the_pattern(pty: Pty) -> None:
    approval = answer(
        pty, edit_request(), (APPROVE_PROMPT, "y\n"), (CHOICE_PROMPT, "5\n"), (PATTERN, b"\x04")
    )
    reason = "approved on the terminal (not remembered: no pattern confirmed (end of input))"
    assert approval == Approval(True, Remember.ONCE, reason)
    assert pty.seen().endswith(
        on_screen(f"{CHOICE_PROMPT}5\n{PATTERN_QUESTION}{PATTERN}\n-> Approved: only this time.\n")
    )


def test_a_password(pty: Pty) -> None:
    request = password_request()
    assert give_password(pty, request, "pw \n") == PasswordAnswer("pw ")
    assert pty.seen() == block(password_text(request)) + PASSWORD_PROMPT + "\r\n"


def test_a_password_line_without_newline_is_kept_whole(pty: Pty) -> None:
    # ^D ends a line without a newline: nothing of the password is cut.
    assert give_password(pty, password_request(), b"pw\x04") == PasswordAnswer("pw")


def test_end_of_input_at_the_password(pty: Pty) -> None:
    request = password_request()
    assert give_password(pty, request, b"\x04") == PasswordAnswer(None)
    assert pty.seen() == block(password_text(request)) + PASSWORD_PROMPT + on_screen(
        "\n-> Cancelled.\n"
    )


def test_a_password_that_is_not_utf8_is_an_error(pty: Pty) -> None:
    with pytest.raises(TerminalError) as raised:
        give_password(pty, password_request(), b"pw\xff\n")
    assert str(raised.value) == "the password is not valid UTF-8"
