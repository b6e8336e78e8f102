"""What the broker core says and records for each way a request ends (from ``make mutate``).

The reason of a decision reaches the requester's stderr, the audit log and the
notification: each is pinned word for word here, with what is remembered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import subprocess
import sys
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, askpass, decide, run, sudo_request

from registry_core.broker.question import Approval, Remember
from registry_core.broker.remember.policies import file_sha256
from registry_core.broker.wire import messages as m


def test_a_plain_yes_and_no_say_who_decided(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(False)])
    yes, no = decide(setup.broker(prompter), setup, setup.request(rid=1), setup.request(rid=2))
    assert (yes.decision, yes.reason, yes.remember) == (
        m.Decision.ALLOW,
        "approved by the user",
        "once",
    )
    assert (no.decision, no.reason, no.remember) == (m.Decision.DENY, "denied by the user", "once")
    assert [r["reason"] for r in setup.audit()] == ["approved by the user", "denied by the user"]


def test_a_remembered_decision_names_the_rule(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    [reply] = decide(setup.broker(FakePrompter()), setup, setup.request())
    policy = setup.policies.lookup(
        "greet", m.Kind.SANDBOX, HOST, setup.exe("greet"), file_sha256(setup.exe("greet"))
    )
    assert policy is not None
    assert reply.reason == f"remembered: {policy.describe()}"


def test_deny_always_records_the_executable_it_was_given_for(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.remember) == (m.Decision.DENY, "deny_always")
    [policy] = setup.policies.list()
    assert (policy.executable, policy.sha256) == (
        setup.exe("greet"),
        file_sha256(setup.exe("greet")),
    )


def test_the_dialogs_own_countdown_is_an_unattended_timeout(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, timed_out=True)])
    [reply] = decide(setup.broker(prompter, prompt_timeout=5), setup, setup.request())
    assert (reply.decision, reply.by, reply.reason) == (
        m.Decision.DENY,
        m.DecidedBy.TIMEOUT,
        "no answer within 5 s",
    )


def _two_in_line(setup: Setup, act: Any) -> m.DecisionReply:
    """The first request is showing; the second waits; ``act(broker)`` runs meanwhile."""
    prompter = FakePrompter([Approval(False)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request(rid=2), setup.requester))
        async with asyncio.timeout(10):
            while len(broker.pending) < 2:
                await asyncio.sleep(0)
        act(broker)
        prompter.release.set()
        await first
        return await second

    return run(go)


def test_paused_while_waiting_is_denied_at_its_turn_saying_so(setup: Setup) -> None:
    reply = _two_in_line(setup, lambda broker: broker.set_paused(True))
    assert (reply.decision, reply.by, reply.reason) == (
        m.Decision.DENY,
        m.DecidedBy.PAUSED,
        "requests are paused",
    )


def test_deny_all_pending_is_a_one_time_no(setup: Setup) -> None:
    reply = _two_in_line(setup, lambda broker: broker.deny_pending())
    assert (reply.decision, reply.by, reply.reason, reply.remember) == (
        m.Decision.DENY,
        m.DecidedBy.USER,
        "denied with all pending requests",
        "once",
    )


def test_a_password_timeout_says_so_and_ends_the_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)

    async def go() -> tuple[Any, Any, Any]:
        approved = await broker.elevate(sudo_request(setup, 1, timeout=0.05), setup.requester)
        assert approved.grant is not None
        prompter.hold = True  # nobody types a password
        timed_out = await broker.askpass(askpass(2, approved.grant), setup.requester)
        with pytest.raises(m.MessageError) as again:
            await broker.askpass(askpass(3, approved.grant), setup.requester)
        result = broker.sudo_result(
            m.SudoResultRequest(id=4, grant=approved.grant, exit_code=1, auth_failed=False)
        )
        return timed_out, again.value, result

    timed_out, again, result = run(go)
    assert timed_out.by is m.DecidedBy.TIMEOUT
    # the countdown is what was left of the requester's 0.05 s
    assert re.fullmatch(r"no password within 0\.0[0-9]* s", timed_out.reason)
    assert again.error_code is m.ErrorCode.NO_GRANT
    assert isinstance(result, m.DecisionReply)
    assert result.reason == timed_out.reason  # the dispatcher learns why sudo failed


def test_askpass_from_the_sandbox_is_refused_in_words_and_logged(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)
    inside = dataclasses.replace(
        setup.requester, sandboxed=True, sandbox_reasons=("a", "it runs in another pid namespace")
    )

    async def go() -> m.MessageError:
        approved = await broker.elevate(sudo_request(setup), setup.requester)
        assert approved.grant is not None
        with pytest.raises(m.MessageError) as refused:
            await broker.askpass(askpass(2, approved.grant), inside)
        return refused.value

    with caplog.at_level(logging.WARNING, logger="registry_core.broker.decide.credential_gate"):
        refused = run(go)
    assert refused.message == (
        "askpass refused: the requester is from inside the sandbox; "
        "only the dispatcher outside the sandbox may run sudo"
    )
    assert [r.getMessage() for r in caplog.records] == [
        f"refused askpass from pid {inside.pid} from inside the sandbox "
        "(a; it runs in another pid namespace); its grant is withdrawn"
    ]


def test_paused_on_arrival_and_shutting_down_say_so(setup: Setup) -> None:
    broker = setup.broker(FakePrompter([Approval(True)]))
    broker.set_paused(True)
    [paused] = decide(broker, setup, setup.request(rid=1))
    broker.set_paused(False)
    broker.begin_shutdown()
    [closing] = decide(broker, setup, setup.request(rid=2))
    assert (paused.by, paused.reason) == (m.DecidedBy.PAUSED, "requests are paused")
    assert (closing.by, closing.reason) == (m.DecidedBy.SHUTDOWN, "the broker is shutting down")
    assert [d.line() for d in setup.denials.recent()] == ["greet — paused: requests are paused"]


@pytest.mark.parametrize("closing", [False, True])
def test_a_request_whose_requester_leaves_is_recorded_as_such(setup: Setup, closing: bool) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter)

    async def go() -> None:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        broker.closing = closing  # as begin_shutdown sets it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go)
    [record] = setup.audit()
    expected = (
        ("shutdown", "the broker is shutting down")
        if closing
        else ("client_gone", "the requester went away")
    )
    assert (record["by"], record["reason"]) == expected
    assert prompter.decided == [(prompter.asked[0].id, False, expected[0])]


def test_an_unknown_tool_is_named_in_the_error_and_the_denial(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())
    with pytest.raises(m.MessageError) as unknown:
        decide(broker, setup, setup.request("nope", argv=("/bin/true",)))
    assert "nope" in unknown.value.message
    [denial] = setup.denials.recent()
    assert (denial.tool, denial.host, denial.reason) == ("nope", HOST, unknown.value.message)
    with pytest.raises(m.MessageError) as hidden:
        decide(broker, setup, setup.request("hidden", rid=7))
    assert "hidden" in hidden.value.message
    assert hidden.value.request_id == 7


def test_sudo_results_are_acknowledged_or_refused_by_what_the_gate_saw(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["wrong"])
    broker = setup.broker(prompter)

    def result(rid: int, grant: str, exit_code: int, auth_failed: bool) -> Any:
        return broker.sudo_result(
            m.SudoResultRequest(id=rid, grant=grant, exit_code=exit_code, auth_failed=auth_failed)
        )

    async def go() -> tuple[Any, Any, Any]:
        approved = await broker.elevate(sudo_request(setup, 1), setup.requester)
        assert approved.grant is not None
        given = await broker.askpass(askpass(2, approved.grant), setup.requester)
        assert isinstance(given, m.PasswordReply)
        assert given.id == 2
        # one wrong password, then sudo gave up: the tool never ran
        refused = result(3, approved.grant, 1, True)
        unknown = result(4, "grant-that-never-was", 1, False)
        return given, refused, unknown

    _given, refused, unknown = run(go)
    assert isinstance(refused, m.DecisionReply)
    assert (refused.id, refused.decision, refused.by, refused.reason) == (
        3,
        m.Decision.DENY,
        m.DecidedBy.USER,
        "wrong password, no attempts left",
    )
    assert isinstance(unknown, m.AckReply)
    assert unknown.id == 4


def test_askpass_from_a_child_of_the_requester_gets_the_password(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["secret"])
    broker = setup.broker(prompter)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        askpass_process = dataclasses.replace(setup.requester, pid=child.pid)

        async def go() -> Any:
            approved = await broker.elevate(sudo_request(setup), setup.requester)
            assert approved.grant is not None
            return await broker.askpass(askpass(5, approved.grant), askpass_process)

        reply = run(go)
    finally:
        child.communicate(b"", timeout=10)
    assert isinstance(reply, m.PasswordReply)
    assert (reply.id, reply.password) == (5, "secret")
    assert prompter.password_asks[0].id.endswith(".p1")
