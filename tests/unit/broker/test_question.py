"""The front-end seam's own words: remember labels, what a question asks, the short
sha256, a sandboxed requester, and the password question's retry line."""

from __future__ import annotations

import pytest

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    ActionDetails,
    ApprovalRequest,
    PasswordRequest,
    Remember,
)
from registry_core.broker.wire.messages import Kind, PatternKind


def test_every_remember_choice_has_its_label() -> None:
    assert {r: r.label for r in Remember} == {
        Remember.ONCE: "Only this time",
        Remember.SESSION: "For this session",
        Remember.MINUTES_15: "For 15 minutes",
        Remember.HOUR: "For 1 hour",
        Remember.ALWAYS: "Always",
        Remember.DENY_ALWAYS: "Deny always",
    }


def question(**changes: object) -> ApprovalRequest:
    fields: dict[str, object] = {
        "id": "r1",
        "tool": "t",
        "kind": Kind.SANDBOX,
        "description": "d",
        "variant": None,
        "executable": "/tools/t",
        "sha256": "0123456789abcdef" * 4,
        "argv": ("t",),
        "args": {},
        "cwd": "/",
        "requester": Requester(pid=1, uid=1000, gid=1000),
        "host": "box",
        "timeout": 30.0,
    }
    fields.update(changes)
    return ApprovalRequest(**fields)  # type: ignore[arg-type]


def test_what_is_asked_in_words() -> None:
    assert question().what == "run outside the sandbox as you"
    assert question(kind=Kind.SUDO).what == "run as root via sudo"
    action = ActionDetails(
        agent="claude",
        tool="Bash",
        summary="ls",
        detail=None,
        display=None,
        command="ls",
        path=None,
        pattern_kind=PatternKind.PROGRAM,
        pattern="ls",
    )
    assert question(kind=Kind.SUDO, action=action).what == "let claude use its tool Bash"


def test_the_short_sha_and_a_sandboxed_requester() -> None:
    assert question().short_sha == "0123456789ab"
    assert question(sha256=None).short_sha == ""
    assert question().sandboxed is False
    inside = Requester(pid=1, uid=1000, gid=1000, sandboxed=True)
    assert question(requester=inside).sandboxed is True


@pytest.mark.parametrize(
    ("attempt", "retry", "text"),
    [
        (1, False, ""),
        (2, True, "Wrong password, try again (2/3)"),
        (3, True, "Wrong password, try again (3/3)"),
    ],
)
def test_the_password_questions_retry_line(attempt: int, retry: bool, text: str) -> None:
    asked = PasswordRequest(
        id="p1", approval=question(), prompt="[sudo]", user="me", attempt=attempt
    )
    assert (asked.retry, asked.retry_text) == (retry, text)
    assert asked.max_attempts == 3
