"""An agent's own actions (``action`` requests) through the real broker core.

What the agent reads back (reply id, decision, reason word for word, what was
remembered), what the person is shown, what lands in the audit log and in the
rule file, and the unattended denials the desktop lists. The prompter is the
scripted person of ``core_helpers``; the stores are real files in ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, run

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.question import Approval, ApprovalRequest, Remember
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.action_rules import ActionRuleStore
from registry_core.broker.wire import messages as m

PUSH = "git push origin main"


def action(rid: m.RequestId = "h1", command: str = PUSH, **kw: Any) -> m.ActionRequest:
    fields: dict[str, Any] = {
        "id": rid,
        "agent": "claude-code",
        "tool": "Bash",
        "summary": command,
        "input": {"command": command},
        "cwd": "/home/alice/src/app",
        "pattern_kind": m.PatternKind.PROGRAM,
        "pattern": "git",
        "command": command,
        "session": "s-1",
    }
    fields.update(kw)
    return m.ActionRequest(**fields)


def rules_file(setup: Setup) -> Path:
    return setup.policy_path.parent / "action-policies.json"


def stored(setup: Setup) -> list[tuple[str, str, str, str, str, str]]:
    """The rules in the action rule file (agent, tool, kind, pattern, decision, remember)."""
    if not rules_file(setup).exists():
        return []
    doc = json.loads(rules_file(setup).read_text())
    return [
        (r["agent"], r["tool"], r["kind"], r["pattern"], r["decision"], r["remember"])
        for r in doc["rules"]
    ]


def ask(broker: Broker, setup: Setup, *reqs: m.ActionRequest) -> list[m.DecisionReply]:
    async def go() -> list[m.DecisionReply]:
        return [await broker.action(r, setup.requester) for r in reqs]

    return run(go)


def verdict(reply: m.DecisionReply) -> tuple[Any, ...]:
    return (reply.id, reply.decision, reply.by, reply.reason, reply.remember, reply.grant)


ALLOW, DENY, USER, POLICY = m.Decision.ALLOW, m.Decision.DENY, m.DecidedBy.USER, m.DecidedBy.POLICY


def test_an_action_approved_once_is_allowed_stored_nowhere_and_audited(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)])
    [reply] = ask(setup.broker(prompter), setup, action("h1", timeout=55))
    assert verdict(reply) == ("h1", ALLOW, USER, "approved by the user", "once", None)
    assert stored(setup) == []
    # what the person was shown: the agent's words, this host, the requester's countdown
    [shown] = prompter.asked
    assert (shown.id, shown.tool, shown.host, shown.client) == ("r1", "Bash", HOST, "claude-code")
    assert 54 < shown.timeout <= 55  # what is left of the requester's 55 s
    assert shown.action is not None
    assert (shown.action.agent, shown.action.command, shown.action.pattern) == (
        "claude-code",
        PUSH,
        "git",
    )
    [record] = setup.audit()
    assert {k: record[k] for k in ("request_id", "tool", "kind", "host", "decision", "by")} == {
        "request_id": "r1",
        "tool": "Bash",
        "kind": "action",
        "host": HOST,
        "decision": "allow",
        "by": "user",
    }
    assert (record["remember"], record["reason"], record["args"]) == (
        "once",
        "approved by the user",
        {"command": PUSH},
    )
    assert record["action"] == {
        "agent": "claude-code",
        "tool": "Bash",
        "summary": PUSH,
        "pattern_kind": "program",
        "pattern": "git",
        "session": "s-1",
    }


def test_the_dialog_countdown_is_the_shorter_of_the_brokers_and_the_agents(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(True)])
    ask(setup.broker(prompter, prompt_timeout=30), setup, action("a"), action("b", timeout=90))
    assert [a.timeout for a in prompter.asked] == [30, 30]


def test_a_remembered_yes_answers_the_next_action_without_asking(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.HOUR)])
    broker = setup.broker(prompter)
    first, second = ask(broker, setup, action("h1"), action("h2", "git status"))
    assert verdict(first) == (
        "h1",
        ALLOW,
        USER,
        "approved by the user (remembered for program 'git')",
        "1h",
        None,
    )
    assert verdict(second) == (
        "h2",
        ALLOW,
        POLICY,
        "remembered: allow claude-code Bash program 'git'",
        "1h",
        None,
    )
    assert len(prompter.asked) == 1
    assert stored(setup) == [("claude-code", "Bash", "program", "git", "allow", "1h")]
    assert [(r["request_id"], r["by"], r["reason"]) for r in setup.audit()] == [
        ("r1", "user", "approved by the user (remembered for program 'git')"),
        ("r2", "policy", "remembered: allow claude-code Bash program 'git'"),
    ]
    assert setup.denials.recent() == []  # an allow is nothing the desktop must show


def test_a_remembered_action_is_decided_synchronously_on_arrival(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())
    broker.actions.remember("claude-code", "Bash", m.PatternKind.PROGRAM, "git", Remember.SESSION)
    decided = broker.action_now(action("h7"), setup.requester)
    assert isinstance(decided, m.DecisionReply)
    assert verdict(decided) == (
        "h7",
        ALLOW,
        POLICY,
        "remembered: allow claude-code Bash program 'git'",
        "session",
        None,
    )
    # another agent, or another of its tools, is not covered
    for other in (action("h8", agent="gemini"), action("h9", tool="Shell")):
        question = broker.action_now(other, setup.requester)
        assert isinstance(question, ApprovalRequest)


def test_a_remembered_deny_refuses_and_is_listed_as_unattended(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    broker = setup.broker(prompter)
    first, second = ask(broker, setup, action("h1"), action("h2", "git log"))
    assert verdict(first) == (
        "h1",
        DENY,
        USER,
        "denied by the user (remembered for program 'git')",
        "deny_always",
        None,
    )
    assert verdict(second) == (
        "h2",
        DENY,
        POLICY,
        "remembered: deny claude-code Bash program 'git'",
        "deny_always",
        None,
    )
    assert len(prompter.asked) == 1
    assert stored(setup) == [("claude-code", "Bash", "program", "git", "deny", "deny_always")]
    # the person's own "no" is not listed; the rule's is
    assert [d.line() for d in setup.denials.recent()] == [
        "Bash — remembered deny: remembered: deny claude-code Bash program 'git'"
    ]


def test_a_remembered_deny_wins_over_a_remembered_allow(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())
    broker.actions.remember("claude-code", "Bash", m.PatternKind.PROGRAM, "git", Remember.ALWAYS)
    broker.actions.remember("claude-code", "Bash", m.PatternKind.EXACT, PUSH, Remember.DENY_ALWAYS)
    [push] = ask(broker, setup, action("h1"))
    assert (push.decision, push.reason) == (
        DENY,
        f"remembered: deny claude-code Bash exact {PUSH!r}",
    )


def test_a_no_never_stores_an_allow(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.ALWAYS), Approval(False, Remember.SESSION)])
    broker = setup.broker(prompter)
    replies = ask(broker, setup, action("h1"), action("h2"))
    assert [verdict(r) for r in replies] == [
        ("h1", DENY, USER, "denied by the user", "once", None),
        ("h2", DENY, USER, "denied by the user", "once", None),
    ]
    assert stored(setup) == []
    assert broker.actions.rules() == []
    assert [r["remember"] for r in setup.audit()] == ["once", "once"]
    assert setup.denials.recent() == []


def test_approve_with_deny_always_is_a_remembered_deny(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.DENY_ALWAYS)])
    [reply] = ask(setup.broker(prompter), setup, action("h1"))
    assert verdict(reply) == (
        "h1",
        DENY,
        USER,
        "denied by the user (remembered for program 'git')",
        "deny_always",
        None,
    )
    assert stored(setup) == [("claude-code", "Bash", "program", "git", "deny", "deny_always")]


def test_a_session_yes_lives_in_the_broker_not_in_the_file(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.SESSION)])
    broker = setup.broker(prompter)
    first, second = ask(broker, setup, action("h1"), action("h2", "git diff"))
    assert (first.reason, first.remember) == (
        "approved by the user (remembered for program 'git')",
        "session",
    )
    assert (second.by, second.remember) == (POLICY, "session")
    assert stored(setup) == []
    # a new broker (a restart) forgets it
    fresh = setup.broker(FakePrompter())
    assert isinstance(fresh.action_now(action("h3"), setup.requester), ApprovalRequest)


def test_an_edited_pattern_that_misses_the_action_counts_once_and_says_so(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS, pattern="npm")])
    [reply] = ask(setup.broker(prompter), setup, action("h1"))
    assert verdict(reply) == (
        "h1",
        ALLOW,
        USER,
        "approved by the user (not remembered: 'npm' does not cover this action)",
        "once",
        None,
    )
    assert stored(setup) == []
    [record] = setup.audit()
    assert record["remember"] == "once"


def test_an_edited_pattern_that_still_covers_is_the_one_stored(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS, pattern=PUSH)])
    broker = setup.broker(prompter)
    # the suggestion was exact: editing it to the command itself still covers
    [reply] = ask(broker, setup, action("h1", pattern_kind=m.PatternKind.EXACT, pattern="x"))
    assert reply.reason == f"approved by the user (remembered for exact {PUSH!r})"
    assert stored(setup) == [("claude-code", "Bash", "exact", PUSH, "allow", "always")]


def test_the_persons_own_words_replace_the_default_reason(setup: Setup) -> None:
    prompter = FakePrompter(
        [
            Approval(True, reason="fine this once"),
            Approval(False, Remember.DENY_ALWAYS, reason="never push from here"),
        ]
    )
    yes, no = ask(setup.broker(prompter), setup, action("h1"), action("h2"))
    assert (yes.decision, yes.reason) == (ALLOW, "fine this once")
    assert (no.decision, no.reason) == (
        DENY,
        "never push from here (remembered for program 'git')",
    )


def test_the_dialogs_countdown_on_an_action_is_an_unattended_timeout(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS, timed_out=True)])
    [reply] = ask(setup.broker(prompter, prompt_timeout=7), setup, action("h1"))
    assert verdict(reply) == (
        "h1",
        DENY,
        m.DecidedBy.TIMEOUT,
        "no answer within 7 s",
        None,
        None,
    )
    assert stored(setup) == []  # nobody chose "deny always"
    assert [d.line() for d in setup.denials.recent()] == [
        "Bash — no answer in time: no answer within 7 s"
    ]


def test_an_action_nobody_answers_times_out_and_the_dialog_is_told(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    [reply] = ask(setup.broker(prompter), setup, action("h1", timeout=0.05))
    # The dialog counts down what is left of the hook's 0.05 s (a few ms less on a
    # loaded machine, so "0.04" as well), and the reason names that countdown.
    shown = prompter.asked[0].timeout
    assert 0.01 < shown <= 0.05
    assert verdict(reply) == (
        "h1",
        DENY,
        m.DecidedBy.TIMEOUT,
        f"no answer within {round(shown, 2):g} s",
        None,
        None,
    )
    assert prompter.decided == [("r1", False, "timeout")]


@pytest.mark.parametrize(
    ("state", "by", "reason"),
    [
        ("closing", m.DecidedBy.SHUTDOWN, "the broker is shutting down"),
        ("paused", m.DecidedBy.PAUSED, "requests are paused"),
        ("no_front_end", m.DecidedBy.NO_FRONT_END, "no front-end can ask (fake is unavailable)"),
    ],
)
def test_an_action_nobody_may_be_asked_about_is_denied_at_once(
    setup: Setup, state: str, by: m.DecidedBy, reason: str
) -> None:
    prompter = FakePrompter([Approval(True)], available=state != "no_front_end")
    broker = setup.broker(prompter)
    if state != "no_front_end":
        # a remembered allow does not open what is paused or closing
        broker.actions.remember(
            "claude-code", "Bash", m.PatternKind.PROGRAM, "git", Remember.ALWAYS
        )
    if state == "closing":
        broker.begin_shutdown()
    elif state == "paused":
        broker.set_paused(True)
    decided = broker.action_now(action("h5"), setup.requester)
    assert isinstance(decided, m.DecisionReply)
    assert verdict(decided) == ("h5", DENY, by, reason, None, None)
    assert prompter.asked == []
    [record] = setup.audit()
    assert (record["request_id"], record["kind"], record["by"], record["reason"]) == (
        "r1",
        "action",
        by.value,
        reason,
    )


def test_an_action_waits_its_turn_and_reports_progress(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(True)], hold=True)
    broker = setup.broker(prompter)
    states: list[m.ProgressState] = []

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.action(action("h2"), setup.requester, states.append))
        async with asyncio.timeout(10):
            while len(broker.pending) < 2:
                await asyncio.sleep(0)
        info = broker.queue_info("r2")
        assert info is not None
        assert (info.position, info.total) == (2, 2)
        assert states == []  # not yet shown
        prompter.release.set()
        await first
        await prompter.until(lambda: len(prompter.asked) == 2)
        assert states == [m.ProgressState.WAITING_FOR_USER]
        prompter.release.set()
        return await second

    reply = run(go)
    assert verdict(reply) == ("h2", ALLOW, USER, "approved by the user", "once", None)
    # one numbering for tool requests and actions: the tray tells them apart by id
    assert [a.id for a in prompter.asked] == ["r1", "r2"]
    assert broker.pending == {}


def test_a_rule_set_while_an_action_waits_decides_it_at_its_turn(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.action(action("h2"), setup.requester))
        async with asyncio.timeout(10):
            while len(broker.pending) < 2:
                await asyncio.sleep(0)
        broker.actions.remember(
            "claude-code", "Bash", m.PatternKind.PROGRAM, "git", Remember.DENY_ALWAYS
        )
        prompter.release.set()
        await first
        return await second

    reply = run(go)
    assert verdict(reply) == (
        "h2",
        DENY,
        POLICY,
        "remembered: deny claude-code Bash program 'git'",
        "deny_always",
        None,
    )
    assert len(prompter.asked) == 1


def test_rules_live_beside_policies_unless_a_store_is_given(setup: Setup, tmp_path: Path) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS)])
    own = ActionRuleStore(tmp_path / "elsewhere" / "rules.json")
    broker = Broker(
        registry=setup.loader.load,
        prompter=prompter,
        policies=setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
        actions=own,
    )
    ask(broker, setup, action("h1"))
    assert stored(setup) == []
    assert [r.pattern for r in own.rules()] == ["git"]


def test_an_actions_deadline_covers_waiting_behind_another_question(setup: Setup) -> None:
    # As for elevate (docs/protocol.md: an action's timeout is "as in elevate"): the
    # hook's own deadline runs from arrival, so an action queued behind an open
    # question is denied when its time is up, without being shown.
    prompter = FakePrompter([Approval(False)], hold=True)
    broker = setup.broker(prompter, prompt_timeout=3600)

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.action(action("A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = await broker.action(action("B", timeout=0.2), setup.requester)
        prompter.release.set()
        await first
        return second

    second = run(go)
    assert (second.id, second.decision, second.by, second.reason) == (
        "B",
        m.Decision.DENY,
        m.DecidedBy.TIMEOUT,
        "no answer within 0.2 s (other questions were still open)",
    )
    assert len(prompter.asked) == 1  # B was never shown
