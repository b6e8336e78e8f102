"""From an ``action`` request to the question the dialog shows, and from the answer to
a stored rule: every field carried over, a suggestion that does not cover the action
replaced, the countdown, and the notes added to the reason word for word."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.broker.decide.action_flow import (
    action_approval_request,
    action_details,
    remember_answer,
    remembered_rule,
)
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ActionDetails, Approval, ApprovalRequest, Remember
from registry_core.broker.remember.action_rules import ActionRule, ActionRuleStore
from registry_core.broker.wire import messages as m

REQUESTER = Requester(pid=7, uid=1000, gid=1000, exe="/bin/sh", host="box")


def request(**changes: object) -> m.ActionRequest:
    fields: dict[str, object] = {
        "id": 3,
        "agent": "cc",
        "tool": "Bash",
        "summary": "git status",
        "input": {"command": "git status -s"},
        "cwd": "/work",
        "pattern_kind": m.PatternKind.PROGRAM,
        "pattern": "git",
        "detail": "git status -s",
        "display": m.ActionDisplay.COMMAND,
        "command": "git status -s",
        "path": None,
        "session": "s1",
    }
    fields.update(changes)
    return m.ActionRequest(**fields)  # type: ignore[arg-type]


def test_details_carry_every_field_of_the_request() -> None:
    assert action_details(request(detail="the detail")) == ActionDetails(
        agent="cc",
        tool="Bash",
        summary="git status",
        detail="the detail",
        display=m.ActionDisplay.COMMAND,
        command="git status -s",
        path=None,
        pattern_kind=m.PatternKind.PROGRAM,
        pattern="git",
        session="s1",
        detail_differs=True,  # "the detail" is not the command that would run
    )
    edit = action_details(
        request(
            tool="Edit",
            command=None,
            path="/work/a.py",
            display=m.ActionDisplay.DIFF,
            pattern_kind=m.PatternKind.PATH,
            pattern="/work/",
        )
    )
    assert (edit.path, edit.pattern_kind, edit.pattern, edit.display) == (
        "/work/a.py",
        m.PatternKind.PATH,
        "/work/",
        m.ActionDisplay.DIFF,
    )


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"pattern": "make"}, "git status -s"),  # another program: the exact command
        ({"command": "git status; rm -rf ~"}, "git status; rm -rf ~"),  # not simple
        (
            {"command": None, "pattern_kind": m.PatternKind.PATH, "pattern": "/"},
            "git status",  # no path, no command: the exact summary
        ),
    ],
)
def test_a_suggestion_that_does_not_cover_the_action_becomes_exact(
    changes: dict[str, object], pattern: str
) -> None:
    details = action_details(request(**changes))
    assert (details.pattern_kind, details.pattern) == (m.PatternKind.EXACT, pattern)


def test_the_question_for_an_action() -> None:
    req = request(input={"command": "git status -s", "n": 1})
    ar = action_approval_request(req, REQUESTER, request_id="r4", host="box", timeout=30.0)
    assert ar == ApprovalRequest(
        id="r4",
        tool="Bash",
        kind=m.Kind.SANDBOX,
        description="git status",
        variant=None,
        executable=None,
        sha256=None,
        argv=(),
        args={"command": "git status -s", "n": 1},
        cwd="/work",
        requester=REQUESTER,
        host="box",
        timeout=30.0,
        client="cc",
        action=action_details(req),
    )


@pytest.mark.parametrize(
    ("asked", "config", "used"), [(None, 30.0, 30.0), (10.0, 30.0, 10.0), (60.0, 30.0, 30.0)]
)
def test_the_requester_may_only_shorten_the_countdown(
    asked: float | None, config: float, used: float
) -> None:
    ar = action_approval_request(
        request(timeout=asked), REQUESTER, request_id="r1", host="h", timeout=config
    )
    assert ar.timeout == used


def question(tmp_path: Path, **changes: object) -> tuple[ActionRuleStore, ApprovalRequest]:
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: 100.0)
    ar = action_approval_request(
        request(**changes), REQUESTER, request_id="r1", host="box", timeout=30.0
    )
    return store, ar


def test_the_remembered_rule_is_looked_up_by_every_field(tmp_path: Path) -> None:
    store, ar = question(tmp_path)
    assert remembered_rule(store, ar) is None
    store.remember("cc", "Bash", m.PatternKind.PROGRAM, "git", Remember.SESSION)
    assert remembered_rule(store, ar) == ActionRule(
        "cc", "Bash", m.PatternKind.PROGRAM, "git", m.Decision.ALLOW, Remember.SESSION, 100.0
    )
    _, by_summary = question(tmp_path, command=None, pattern_kind=m.PatternKind.EXACT)
    store.remember("cc", "Bash", m.PatternKind.EXACT, "git status", Remember.DENY_ALWAYS)
    rule = remembered_rule(store, by_summary)
    assert rule is not None and rule.decision is m.Decision.DENY
    _, by_path = question(
        tmp_path,
        summary="edit /w/a",
        command=None,
        path="/w/a",
        pattern_kind=m.PatternKind.PATH,
        pattern="/w/a",
    )
    assert remembered_rule(store, by_path) is None
    store.remember("cc", "Bash", m.PatternKind.PATH, "/w/", Remember.ALWAYS)
    found = remembered_rule(store, by_path)
    assert found is not None and found.pattern == "/w/"
    _, other_tool = question(tmp_path, tool="Shell")
    assert remembered_rule(store, other_tool) is None
    _, other_agent = question(tmp_path, agent="gem")
    assert remembered_rule(store, other_agent) is None


def test_once_stores_nothing_and_adds_no_note(tmp_path: Path) -> None:
    store, ar = question(tmp_path)
    assert remember_answer(store, ar, Approval(True), Remember.ONCE) == (Remember.ONCE, "")
    assert remember_answer(store, ar, Approval(True, pattern="zzz"), Remember.ONCE) == (
        Remember.ONCE,
        "",
    )
    assert store.rules() == []


def test_the_suggested_pattern_is_stored_when_the_person_left_it(tmp_path: Path) -> None:
    store, ar = question(tmp_path)
    got = remember_answer(store, ar, Approval(True, Remember.HOUR), Remember.HOUR)
    assert got == (Remember.HOUR, " (remembered for program 'git')")
    assert store.rules() == [
        ActionRule(
            "cc",
            "Bash",
            m.PatternKind.PROGRAM,
            "git",
            m.Decision.ALLOW,
            Remember.HOUR,
            100.0,
            3700.0,
        )
    ]


def test_the_persons_own_pattern_is_stored_when_it_covers_the_action(tmp_path: Path) -> None:
    store, ar = question(
        tmp_path,
        command=None,
        path="/w/src/a.py",
        pattern_kind=m.PatternKind.PATH,
        pattern="/w/src/a.py",
    )
    answer = Approval(False, Remember.DENY_ALWAYS, pattern="/w/")
    got = remember_answer(store, ar, answer, Remember.DENY_ALWAYS)
    assert got == (Remember.DENY_ALWAYS, " (remembered for path '/w/')")
    [stored] = store.rules()
    assert (stored.kind, stored.pattern, stored.decision) == (
        m.PatternKind.PATH,
        "/w/",
        m.Decision.DENY,
    )


def test_a_pattern_that_does_not_cover_the_action_counts_once(tmp_path: Path) -> None:
    store, ar = question(tmp_path)
    got = remember_answer(store, ar, Approval(True, pattern="make"), Remember.ALWAYS)
    assert got == (Remember.ONCE, " (not remembered: 'make' does not cover this action)")
    assert store.rules() == []
