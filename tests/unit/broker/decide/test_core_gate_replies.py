"""The broker core's replies in detail (from ``make mutate``): ids, the password question,
progress, the denial list's clock, status and the log of a refused askpass.

A reply with the wrong id is lost to the requester (it waits for its own id);
the password question is what the dialog shows; each is pinned here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pwd
import time
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, askpass, run, sudo_request

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, Remember
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.wire import messages as m
from registry_core.version import version

NOBODY_UID = 4242424  # no account has it (checked below)


def _approved_grant(broker: Broker, setup: Setup, requester: Requester) -> str:
    async def go() -> str:
        decision = await broker.elevate(sudo_request(setup), requester)
        assert decision.grant is not None
        return decision.grant

    return run(go)


@pytest.mark.parametrize(
    ("user", "uid", "shown"),
    [
        ("", os.getuid(), pwd.getpwuid(os.getuid()).pw_name),
        ("alice", os.getuid(), "alice"),
        ("", NOBODY_UID, str(NOBODY_UID)),
    ],
    ids=["local-account", "remote-account", "uid-without-account"],
)
def test_the_password_question_names_the_account_and_repeats_sudos_prompt(
    setup: Setup, user: str, uid: int, shown: str
) -> None:
    with pytest.raises(KeyError):
        pwd.getpwuid(NOBODY_UID)
    requester = dataclasses.replace(setup.requester, uid=uid, user=user)
    prompter = FakePrompter([Approval(True)], ["pw"])
    broker = setup.broker(prompter)
    grant = _approved_grant(broker, setup, requester)

    async def go() -> Any:
        return await broker.askpass(
            m.AskpassRequest(id=2, grant=grant, prompt="[sudo] password for x: ", attempt=1),
            requester,
        )

    reply = run(go)
    assert isinstance(reply, m.PasswordReply)
    assert (reply.id, reply.password) == (2, "pw")
    [question] = prompter.password_asks
    assert (question.id, question.prompt, question.user, question.attempt) == (
        "r1.p1",
        "[sudo] password for x: ",
        shown,
        1,
    )


def test_a_requester_leaving_while_asked_for_its_password_ends_the_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["too late"])
    broker = setup.broker(prompter)
    grant = _approved_grant(broker, setup, setup.requester)

    async def go() -> m.MessageError:
        prompter.hold = True
        task = asyncio.create_task(broker.askpass(askpass(2, grant), setup.requester))
        await prompter.until(lambda: len(prompter.password_asks) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        prompter.hold = False  # a grant still alive would get its password now
        with pytest.raises(m.MessageError) as again:
            await broker.askpass(askpass(3, grant, 2), setup.requester)
        return again.value

    again = run(go)
    assert (again.error_code, again.message, again.request_id) == (
        m.ErrorCode.NO_GRANT,
        "grant already used",
        3,
    )
    assert prompter.cancelled == ["r1.p1"]


def test_a_failing_password_front_end_says_why_to_askpass_and_to_sudo_result(
    setup: Setup,
) -> None:
    prompter = FakePrompter([Approval(True)], [RuntimeError("the keyring is locked")])
    broker = setup.broker(prompter)
    grant = _approved_grant(broker, setup, setup.requester)

    async def go() -> tuple[Any, Any]:
        refused = await broker.askpass(askpass(7, grant), setup.requester)
        result = broker.sudo_result(
            m.SudoResultRequest(id=8, grant=grant, exit_code=1, auth_failed=False)
        )
        return refused, result

    refused, result = run(go)
    reason = "front-end failed: the keyring is locked"
    assert isinstance(refused, m.DecisionReply)
    assert (refused.id, refused.decision, refused.by, refused.reason) == (
        7,
        m.Decision.DENY,
        m.DecidedBy.NO_FRONT_END,
        reason,
    )
    assert isinstance(result, m.DecisionReply)
    assert (result.id, result.decision, result.reason) == (8, m.Decision.DENY, reason)


@pytest.mark.parametrize("exit_code", [0, 1])
def test_sudo_result_acks_carry_the_requests_id(setup: Setup, exit_code: int) -> None:
    broker = setup.broker(FakePrompter())
    ack = broker.sudo_result(
        m.SudoResultRequest(id="s9", grant="no-such-grant", exit_code=exit_code, auth_failed=True)
    )
    assert ack == m.AckReply(id="s9")


def test_status_names_the_broker_version(setup: Setup) -> None:
    reply = setup.broker(FakePrompter()).status(m.StatusRequest(id=3))
    assert (reply.id, reply.version, reply.pending, reply.paused) == (3, version(), 0, False)
    assert version().count(".") == 2


def test_progress_says_waiting_for_user_once_the_question_is_shown(setup: Setup) -> None:
    setup.remember("other", Remember.ALWAYS)
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)
    states: list[tuple[str, m.ProgressState]] = []

    async def go() -> None:
        for tool in ("greet", "other"):
            await broker.elevate(
                setup.request(tool), setup.requester, lambda s, t=tool: states.append((t, s))
            )

    run(go)
    # the remembered one needed nobody: no progress for it
    assert states == [("greet", m.ProgressState.WAITING_FOR_USER)]


def test_an_unattended_denial_names_tool_and_host_and_is_stamped_with_the_wall_clock(
    setup: Setup,
) -> None:
    broker = setup.broker(FakePrompter())
    broker.set_paused(True)
    before = time.time()

    async def go() -> None:
        await broker.elevate(setup.request(), setup.requester)

    run(go)
    after = time.time()
    [denial] = setup.denials.recent()
    assert (denial.tool, denial.host, denial.reason) == ("greet", HOST, "requests are paused")
    assert before <= denial.time <= after


@pytest.mark.parametrize("known", [True, False])
def test_a_refused_sandboxed_askpass_logs_whether_a_grant_was_withdrawn(
    setup: Setup, caplog: pytest.LogCaptureFixture, known: bool
) -> None:
    broker = setup.broker(FakePrompter([Approval(True)]))
    grant = _approved_grant(broker, setup, setup.requester) if known else "made-up"
    inside = dataclasses.replace(setup.requester, sandboxed=True, sandbox_reasons=("seccomp",))

    async def go() -> None:
        with pytest.raises(m.MessageError):
            await broker.askpass(askpass(2, grant), inside)

    with caplog.at_level(logging.WARNING, logger="registry_core.broker.decide.credential_gate"):
        run(go)
    tail = "; its grant is withdrawn" if known else ""
    assert [r.getMessage() for r in caplog.records] == [
        f"refused askpass from pid {inside.pid} from inside the sandbox (seccomp){tail}"
    ]


def test_a_remembered_deny_lists_tool_and_host_each_time_it_decides(setup: Setup) -> None:
    """With one registry snapshot for both requests, each decision is listed alike."""
    setup.remember("greet", Remember.DENY_ALWAYS)
    snapshot = setup.loader.load()
    broker = Broker(
        registry=lambda: snapshot,
        prompter=FakePrompter(),
        policies=setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
        denials=setup.denials,
    )

    async def go() -> list[m.DecisionReply]:
        return [await broker.elevate(setup.request(rid=n), setup.requester) for n in (1, 2)]

    replies = run(go)
    assert [(r.id, r.by) for r in replies] == [(1, m.DecidedBy.POLICY), (2, m.DecidedBy.POLICY)]
    denials = setup.denials.recent()
    assert [(d.tool, d.host, d.why.value) for d in denials] == [
        ("greet", HOST, "remembered deny"),
        ("greet", HOST, "remembered deny"),
    ]
    assert denials[0].reason == denials[1].reason == replies[0].reason
