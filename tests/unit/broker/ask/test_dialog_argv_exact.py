"""Every argument and stdin byte kdialog and zenity are given, and every answer, word for word.

``test_dialog_prompters.py`` checks the arguments that carry meaning (the
buttons, the rows, where the request text goes); this file pins each call
whole: the "how long" question, its title and options, zenity's sizes and
scrolling view with its stdin, the password entry, a withdrawn "how long"
dialog, an answer that is no duration at all, and the program named when a
pattern is not confirmed.  The same fake dialog program stands in for both.
Written for the mutants of ``kdialog.py`` and ``zenity.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from action_requests import edit_request
from test_dialog_prompters import (
    HANG,
    FakeDialog,
    make_request,
    password_request,
    run,
)

from registry_core.broker.ask import zenity
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.text import Limits, approval_text
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.broker.question import Approval, Remember

HOW_LONG_TITLE = "Ollie: how long to approve net_admin?"
QUESTION_TITLE = "Ollie: approve net_admin as root?"
ZENITY_BUTTONS = ["--ok-label=Approve", "--cancel-label=Deny", "--extra-button=Deny always"]
LONG_CODE = "\n".join(f"echo step {i} <&>" for i in range(40))


@pytest.fixture
def kdialog(tmp_path: Path) -> tuple[FakeDialog, KDialogPrompter]:
    fake = FakeDialog(tmp_path, "kdialog")
    return fake, KDialogPrompter(fake.env, binary=fake.program)


@pytest.fixture
def zenity_(tmp_path: Path) -> tuple[FakeDialog, ZenityPrompter]:
    fake = FakeDialog(tmp_path, "zenity")
    return fake, ZenityPrompter(fake.env, binary=fake.program)


def withdrawn_while_asking_how_long(
    fake: FakeDialog, prompter: KDialogPrompter | ZenityPrompter
) -> Approval:
    """Approve the question, then withdraw the request while "how long" is open."""
    fake.answer({"status": 0}, HANG)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(make_request(id="abc")))
        await fake.wait_for_call(1)
        while prompter.open_dialogs() == 0:
            await asyncio.sleep(0.01)
        prompter.request_decided("abc", False, "timeout")
        return await task

    return run(scenario)


# --- kdialog ---------------------------------------------------------------------------------


def test_kdialog_how_long_call_word_for_word(kdialog: tuple[FakeDialog, KDialogPrompter]) -> None:
    fake, prompter = kdialog
    fake.answer({"status": 0}, {"status": 0, "stdout": "15m\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    assert approval == Approval(True, Remember.MINUTES_15, "approved in kdialog")
    how_long = fake.calls()[1]
    assert how_long["argv"] == [
        "--title",
        HOW_LONG_TITLE,
        "--radiolist",
        "<qt>Approve <b>net_admin</b> to run as root via sudo: "
        "for how long?<br>Choose a duration, then OK.</qt>",
        *("deny", "Deny after all", "on"),
        *("once", "Only this time", "off", "session", "For this session", "off"),
        *("15m", "For 15 minutes", "off", "1h", "For 1 hour", "off"),
        *("always", "Always", "off"),
    ]
    assert how_long["stdin"] == ""


@pytest.mark.parametrize("front_end", ["kdialog", "zenity_"])
def test_withdrawn_while_asking_how_long(front_end: str, request: pytest.FixtureRequest) -> None:
    fake, prompter = request.getfixturevalue(front_end)
    approval = withdrawn_while_asking_how_long(fake, prompter)
    assert approval == Approval(False, Remember.ONCE, "withdrawn: decided by timeout")
    assert len(fake.calls()) == 2


@pytest.mark.parametrize(
    ("front_end", "answer"),
    [("kdialog", a) for a in ("forever", "DENY", "")]
    + [("zenity_", a) for a in ("forever", "Deny always", "deny_always")],
)
def test_an_answer_that_is_no_duration(
    front_end: str, answer: str, request: pytest.FixtureRequest
) -> None:
    fake, prompter = request.getfixturevalue(front_end)
    fake.answer({"status": 0}, {"status": 0, "stdout": f"{answer}\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    program = front_end.rstrip("_")
    assert approval == Approval(
        False, Remember.ONCE, f"{program} gave an unknown choice {answer!r}"
    )
    assert len(fake.calls()) == 2


def test_kdialog_pattern_not_confirmed_names_kdialog(
    kdialog: tuple[FakeDialog, KDialogPrompter],
) -> None:
    fake, prompter = kdialog
    fake.answer({"status": 0}, {"status": 0, "stdout": "always\n"}, {"status": 2})
    approval = run(lambda: prompter.ask_approval(edit_request()))
    assert approval == Approval(
        True,
        Remember.ONCE,
        "approved in kdialog (not remembered: the pattern was not confirmed in kdialog)",
    )
    assert len(fake.calls()) == 3


# --- zenity ----------------------------------------------------------------------------------


def test_zenity_question_call_word_for_word(zenity_: tuple[FakeDialog, ZenityPrompter]) -> None:
    fake, prompter = zenity_
    fake.answer({"status": 1})
    request = make_request()
    run(lambda: prompter.ask_approval(request))
    (call,) = fake.calls()
    text = zenity.render(approval_text(request, Limits()))
    assert call["argv"] == [
        "--question",
        f"--text={text}",
        "--default-cancel",
        "--width=720",
        f"--title={QUESTION_TITLE}",
        *ZENITY_BUTTONS,
    ]
    assert call["stdin"] == ""  # the text is an argument here


def test_zenity_scrolling_view_call_and_stdin_word_for_word(
    zenity_: tuple[FakeDialog, ZenityPrompter],
) -> None:
    fake, prompter = zenity_
    fake.answer({"status": 1})
    request = make_request(code=LONG_CODE)
    lines = approval_text(request, Limits()).plain_lines()
    assert len(lines) > zenity.QUESTION_MAX_LINES
    run(lambda: prompter.ask_approval(request))
    (call,) = fake.calls()
    assert call["argv"] == [
        "--text-info",
        "--checkbox=I have read this request",
        "--width=900",
        "--height=650",
        f"--title={QUESTION_TITLE}",
        *ZENITY_BUTTONS,
    ]
    assert call["stdin"] == "".join(f"{line}\n" for line in lines)  # one line each, no more
    assert "  | echo step 39 <&>\n" in call["stdin"]


def test_zenity_how_long_call_word_for_word(zenity_: tuple[FakeDialog, ZenityPrompter]) -> None:
    fake, prompter = zenity_
    fake.answer({"status": 0}, {"status": 0, "stdout": "session\n"})
    approval = run(lambda: prompter.ask_approval(make_request()))
    assert approval == Approval(True, Remember.SESSION, "approved in zenity")
    how_long = fake.calls()[1]
    assert how_long["argv"] == [
        "--list",
        f"--title={HOW_LONG_TITLE}",
        "--text=Approve <b>net_admin</b> to run as root via sudo: for how long?\n"
        "Without a selection: only this time.",
        "--column=How long",
        "--column=key",
        "--hide-column=2",
        "--print-column=2",
        "--hide-header",
        "--ok-label=Approve",
        "--cancel-label=Deny after all",
        "--width=460",
        "--height=320",
        *("Only this time", "once", "For this session", "session"),
        *("For 15 minutes", "15m", "For 1 hour", "1h", "Always", "always"),
    ]
    assert how_long["stdin"] == ""


def test_zenity_how_long_question_escapes_the_tool(
    zenity_: tuple[FakeDialog, ZenityPrompter],
) -> None:
    fake, prompter = zenity_
    fake.answer({"status": 0}, {"status": 1})
    run(lambda: prompter.ask_approval(make_request(tool="a<b>&c\\d")))
    text = fake.calls()[1]["argv"][2]
    assert text.startswith("--text=Approve <b>a&lt;b&gt;&amp;c\\\\d</b> to run as root")


@pytest.mark.parametrize(
    "answers",
    [
        [{"status": 0}, {"status": 0, "stdout": "always\n"}, {"status": 1}],
        [{"status": 1, "stdout": "Deny always\n"}, {"status": 1}],
    ],
    ids=["approved", "denied-always"],
)
def test_zenity_pattern_not_confirmed_names_zenity(
    zenity_: tuple[FakeDialog, ZenityPrompter], answers: list[dict[str, Any]]
) -> None:
    fake, prompter = zenity_
    fake.answer(*answers)
    approval = run(lambda: prompter.ask_approval(edit_request()))
    if answers[0]["status"] == 0:
        reason = "approved in zenity (not remembered: the pattern was not confirmed in zenity)"
        assert approval == Approval(True, Remember.ONCE, reason)
    else:
        reason = "denied always in zenity (not remembered: the pattern was not confirmed in zenity)"
        assert approval == Approval(False, Remember.ONCE, reason)
    assert len(fake.calls()) == len(answers)


def test_zenity_password_call_word_for_word(zenity_: tuple[FakeDialog, ZenityPrompter]) -> None:
    fake, prompter = zenity_
    fake.answer({"status": 0, "stdout": "pw\n"})
    run(lambda: prompter.ask_password(password_request(attempt=2)))
    (call,) = fake.calls()
    label = [
        "sudo needs the password of bob to run net__admin as root.",
        "!! Wrong password, try again (2/3)",
        "",
        "Tool:          net__admin — run as root via sudo",
        "Command:       sudo -A -- /usr/local/bin/net__admin",
        "User:          bob",
        "Host:          desk",
        "sudo asks:     [sudo] password for bob:",
        "",
        "Attempt 2 of 3.",
    ]
    assert call["argv"] == [
        "--entry",
        "--hide-text",
        "--title=Ollie: sudo password for net_admin",
        "--text=" + "\n".join(label),
        "--width=520",
    ]
    assert call["stdin"] == ""
