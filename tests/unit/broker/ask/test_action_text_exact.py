"""An agent's action as the headless front-ends word it, line for line.

``test_action_prompt_text.py`` checks the main parts; this file pins the whole
text of an edit and of a command, the label each display gets, which
suggested patterns may be edited on one line, and every refusal and
question about a pattern word for word.
"""

from __future__ import annotations

import dataclasses

import pytest
from action_requests import EDITED_FILE, command_request, edit_request
from test_prompt_text import make_request

from registry_core.broker.ask.action_text import (
    MAX_PATTERN_TRIES,
    editable_pattern,
    pattern_problem,
    pattern_question,
    pattern_words,
)
from registry_core.broker.ask.text import Style, approval_text
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import ActionDisplay, PatternKind


def with_action(request: ApprovalRequest, **changes: object) -> ApprovalRequest:
    assert request.action is not None
    return dataclasses.replace(request, action=dataclasses.replace(request.action, **changes))


def test_an_edit_word_for_word() -> None:
    text = approval_text(edit_request())
    assert text.title == "Ollie: allow claude-code to use Edit?"
    assert text.warnings == ()
    assert text.plain_lines() == [
        "The agent claude-code asks to use its tool Edit.",
        "",
        "Agent:         claude-code  (as the requester says)",
        "Tool:          Edit",
        "Action:        edit /home/a/proj/src/app.py",
        "Edit (diff):   --- a",
        "               +++ b",
        "               -old",
        "               +new",
        "File:          /home/a/proj/src/app.py",
        "Directory:     /home/a/proj",
        "Input:         (none)",
        "Requested by:  pid 7 · /usr/bin/node",
        "Remember for:  files at or beneath /home/a/proj/src/app.py",
        "",
        "Unanswered, this request is denied after 30 s.",
    ]
    assert text.field("Edit (diff)").style is Style.CODE
    assert text.field("Input").style is Style.CODE
    assert text.field("File").style is Style.PLAIN


def test_a_command_word_for_word() -> None:
    request = dataclasses.replace(
        command_request("git push", PatternKind.PROGRAM, "git"),
        args={"command": "git push"},
        timeout=9.5,
    )
    text = approval_text(request)
    assert text.plain_lines() == [
        "The agent claude-code asks to use its tool Bash.",
        "",
        "Agent:         claude-code  (as the requester says)",
        "Tool:          Bash",
        "Action:        git push",
        "Command:       git push",
        "Directory:     /home/a/proj",
        "Input:         {",
        '                 "command": "git push"',
        "               }",
        "Requested by:  pid 7 · /usr/bin/node",
        "Remember for:  commands running the program git",
        "",
        "Unanswered, this request is denied after 10 s.",
    ]
    assert text.field("Command").style is Style.CODE


@pytest.mark.parametrize(
    ("display", "label"),
    [
        (ActionDisplay.COMMAND, "Command"),
        (ActionDisplay.DIFF, "Edit (diff)"),
        (ActionDisplay.TEXT, "Details"),
        (None, "Details"),
    ],
)
def test_the_detail_is_labelled_by_its_display(display: ActionDisplay | None, label: str) -> None:
    request = with_action(edit_request(), display=display, detail="x\ny\x1b", path=None)
    fields = approval_text(request).fields
    assert [f.label for f in fields] == [
        "Agent",
        "Tool",
        "Action",
        label,
        "Directory",
        "Input",
        "Requested by",
        "Remember for",
    ]
    assert fields[3].lines == ("x", "y\\x1b")
    assert fields[3].style is Style.CODE


def test_a_command_without_a_detail_is_shown_as_the_command() -> None:
    request = with_action(
        command_request("ls", PatternKind.EXACT, "ls"), detail=None, command="ls\n-la\x1b"
    )
    field = approval_text(request).field("Command")
    assert field.lines == ("ls", "-la\\x1b")
    assert field.style is Style.CODE
    bare = with_action(request, command=None)
    assert "Command" not in [f.label for f in approval_text(bare).fields]


def test_outside_words_are_cleaned_and_a_missing_executable_named() -> None:
    request = with_action(edit_request(), agent="a\u202eb", tool="T\x1b", summary="s\u200b")
    request = dataclasses.replace(request, requester=dataclasses.replace(request.requester, exe=""))
    text = approval_text(request)
    assert text.title == "Ollie: allow a\\u202eb to use T\\x1b?"
    assert text.headline == "The agent a\\u202eb asks to use its tool T\\x1b."
    assert text.field("Agent").lines == ("a\\u202eb  (as the requester says)",)
    assert text.field("Action").lines == ("s\\u200b",)
    assert text.field("Requested by").lines == ("pid 7 · ?",)


def test_what_remembering_covers_in_words_for_each_kind() -> None:
    assert pattern_words(command_request("git push", PatternKind.PROGRAM, "git")) == (
        "commands running the program git"
    )
    assert pattern_words(edit_request()) == f"files at or beneath {EDITED_FILE}"
    exact = command_request("ls -l", PatternKind.EXACT, "ls -l")
    assert pattern_words(exact) == "exactly ls -l"
    assert pattern_words(exact, "ls\x1b") == "exactly ls\\x1b"


def test_which_suggested_patterns_can_be_edited_on_one_line() -> None:
    assert MAX_PATTERN_TRIES == 3
    assert editable_pattern(edit_request()) == EDITED_FILE
    assert editable_pattern(make_request()) is None  # a tool request: no pattern
    assert editable_pattern(command_request("a\\b", PatternKind.EXACT, "a\\b")) is None
    assert editable_pattern(command_request("a\nb", PatternKind.EXACT, "a\nb")) is None
    assert editable_pattern(command_request("a\u200bb", PatternKind.EXACT, "a\u200bb")) is None


def test_every_refusal_of_a_pattern_word_for_word() -> None:
    request = command_request("git push", PatternKind.PROGRAM, "git")
    assert pattern_problem(request, "") == "an empty pattern covers nothing"
    assert pattern_problem(request, "ls\x1b") == "'ls\\\\x1b' does not cover this action"
    assert pattern_problem(request, "git") is None


def test_the_pattern_question_word_for_word() -> None:
    assert pattern_question(command_request("git push", PatternKind.PROGRAM, "git")) == [
        "Remember this answer for commands running the program:",
        "Keep the suggested pattern, or change it; it must still cover this action.",
    ]
    assert pattern_question(edit_request(), "bad") == [
        "Not accepted: bad.",
        "Remember this answer for files at or beneath:",
        "Keep the suggested pattern, or change it; it must still cover this action"
        " (a path ending in / covers every file beneath it).",
    ]
