"""Unit tests of the broker core: the question queue, shutdown, audit, the credential gate.

The broker runs on a real registry (a temporary tools directory), a real
policy store and audit log; the person is a :class:`FakePrompter` whose
answers are scripted and which can "think" (wait on an asyncio.Event) so the
tests can look at the queue while a question is open (see core_helpers.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, askpass, decide, run, sudo_request

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.decide.grants import PASSWORD_ATTEMPTS_EXHAUSTED, PASSWORD_CANCELLED
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, Remember
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import file_sha256
from registry_core.broker.wire import messages as m

# --- the queue -----------------------------------------------------------------------


def test_questions_are_asked_one_at_a_time_in_order(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(False)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid="A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request("other", "B"), setup.requester))
        while len(broker.pending) < 2:  # the second is queued behind the first
            await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert [a.tool for a in prompter.asked] == ["greet"]
        assert [p.showing for p in broker.pending.values()] == [True, False]
        assert second.done() is False
        prompter.release.set()
        await prompter.until(lambda: len(prompter.asked) == 2)
        assert first.done()
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert [a.tool for a in prompter.asked] == ["greet", "other"]
    assert (first.id, first.decision) == ("A", m.Decision.ALLOW)
    assert (second.id, second.decision) == ("B", m.Decision.DENY)


def test_the_requesters_deadline_counts_from_arrival_not_from_its_turn(setup: Setup) -> None:
    # ollie-elevate's deadline covers waiting behind another question too: the
    # queued request is denied when its time is up, and when its turn comes
    # first, the countdown it is shown is only what is left.
    prompter = FakePrompter([Approval(False), Approval(False)], hold=True)
    broker = setup.broker(prompter, prompt_timeout=3600)

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.elevate(setup.request(rid="A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        third = asyncio.create_task(
            broker.elevate(setup.request(rid="C", timeout=60.0), setup.requester)
        )
        while len(broker.pending) < 2:  # C has arrived (its clock runs) before B does
            await asyncio.sleep(0)
        # B waits behind A and runs out of time (0.2 s) while A is still open.
        second = await broker.elevate(setup.request(rid="B", timeout=0.2), setup.requester)
        prompter.release.set()
        await first
        await prompter.until(lambda: len(prompter.asked) == 2)
        prompter.release.set()
        await third
        return second

    second = run(go)
    assert (second.id, second.decision, second.by, second.reason) == (
        "B",
        m.Decision.DENY,
        m.DecidedBy.TIMEOUT,
        "no answer within 0.2 s (other questions were still open)",
    )
    assert [a.tool for a in prompter.asked] == ["greet", "greet"]  # B was never shown
    shown = prompter.asked[1].timeout  # C: shown after B's 0.2 s had passed
    assert 0 < shown <= 60.0 - 0.2


def test_a_policy_set_by_the_first_answer_decides_the_queued_second(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.MINUTES_15)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request(rid=2), setup.requester))
        while len(broker.pending) < 2:
            await asyncio.sleep(0)
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert (first.by, second.by) == (m.DecidedBy.USER, m.DecidedBy.POLICY)
    assert second.decision is m.Decision.ALLOW
    assert second.remember == "15m"
    assert len(prompter.asked) == 1
    assert broker.pending == {}


def test_pausing_while_queued_denies_the_queued_request(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request("other", 2), setup.requester))
        while len(broker.pending) < 2:
            await asyncio.sleep(0)
        broker.set_paused(True)
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert first.decision is m.Decision.ALLOW
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    assert len(prompter.asked) == 1


def test_requester_gone_withdraws_the_question(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter)

    async def go() -> None:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go)
    rid = prompter.asked[0].id
    assert prompter.cancelled == [rid]
    assert prompter.decided == [(rid, False, "client_gone")]
    assert [(r["decision"], r["by"]) for r in setup.audit()] == [("deny", "client_gone")]
    assert broker.pending == {}


def test_shutdown_denies_what_is_pending_and_what_comes(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> m.DecisionReply:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        broker.begin_shutdown()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await broker.elevate(setup.request(rid=2), setup.requester)

    late = run(go)
    assert (late.decision, late.by) == (m.Decision.DENY, m.DecidedBy.SHUTDOWN)
    assert prompter.decided[0][1:] == (False, "shutdown")
    assert [r["by"] for r in setup.audit()] == ["shutdown", "shutdown"]
    assert len(prompter.asked) == 1


def test_every_decision_writes_one_audit_line(setup: Setup) -> None:
    setup.remember("other", Remember.ALWAYS)
    prompter = FakePrompter([Approval(True), Approval(False)])
    broker = setup.broker(prompter)
    decide(
        broker,
        setup,
        setup.request(rid=1),
        setup.request("other", 2),
        setup.request(rid=3, args={"path": "/x"}, cwd="/tmp"),
    )
    broker.set_paused(True)
    decide(broker, setup, setup.request(rid=4))
    records = setup.audit()
    assert [(r["tool"], r["decision"], r["by"]) for r in records] == [
        ("greet", "allow", "user"),
        ("other", "allow", "policy"),
        ("greet", "deny", "user"),
        ("greet", "deny", "paused"),
    ]
    third = records[2]
    assert third["args"] == {"path": "/x"}
    assert third["kind"] == "sandbox"
    assert third["requester"]["pid"] == os.getpid()
    assert third["sha256"] == file_sha256(setup.exe("greet"))
    assert third["host"] == HOST


def test_status_counts_pending_requests(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter)

    async def go() -> tuple[m.StatusReply, m.StatusReply]:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        busy = broker.status(m.StatusRequest(id=9))
        prompter.release.set()
        await task
        return busy, broker.status(m.StatusRequest(id=10))

    busy, idle = run(go)
    assert (busy.id, busy.pending, busy.paused) == (9, 1, False)
    assert idle.pending == 0


def test_a_pending_request_says_since_when_it_waits_on_the_brokers_clock(setup: Setup) -> None:
    now = [1000.0]
    prompter = FakePrompter(hold=True)
    broker = Broker(
        registry=setup.loader.load,
        prompter=prompter,
        policies=setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
        clock=lambda: now[0],
    )

    async def go() -> list[float]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        now[0] = 1042.5
        second = asyncio.create_task(broker.elevate(setup.request(rid=2), setup.requester))
        while len(broker.pending) < 2:
            await asyncio.sleep(0)
        since = [p.since for p in broker.pending.values()]
        prompter.hold = False
        prompter.release.set()
        await asyncio.gather(first, second)
        return since

    assert run(go) == [1000.0, 1042.5]


def test_the_tray_hears_of_every_change_to_the_queue_pause_and_shutdown(setup: Setup) -> None:
    """The tray's menu and icon follow the broker only through its listeners."""
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)
    seen: list[tuple[str, Any, bool, bool]] = []

    def listener(name: str) -> Any:
        def heard() -> None:
            pending = [(p.request.id, p.showing) for p in broker.pending.values()]
            seen.append((name, pending, broker.paused, broker.closing))

        return heard

    broker.subscribe(listener("menu"))
    broker.subscribe(listener("icon"))

    async def go() -> None:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        prompter.release.set()
        await task

    run(go)
    broker.set_paused(True)
    broker.begin_shutdown()
    states = [
        ([("r1", False)], False, False),  # queued
        ([("r1", True)], False, False),  # shown
        ([], False, False),  # decided
        ([], True, False),  # paused
        ([], True, True),  # shutting down
    ]
    assert seen == [(name, *state) for state in states for name in ("menu", "icon")]


# --- the credential gate -------------------------------------------------------------


def test_sudo_allow_issues_a_grant_and_askpass_gets_the_password(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["wrong", "right"])
    broker = setup.broker(prompter)

    async def go() -> list[Any]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        assert len(decision.grant) >= 22
        first = await broker.askpass(askpass(2, decision.grant), setup.requester)
        second = await broker.askpass(askpass(3, decision.grant, 2), setup.requester)
        ack = broker.sudo_result(
            m.SudoResultRequest(id=4, grant=decision.grant, exit_code=0, auth_failed=False)
        )
        with pytest.raises(m.MessageError) as replay:
            await broker.askpass(askpass(5, decision.grant), setup.requester)
        return [first, second, ack, replay.value]

    first, second, ack, replay = run(go)
    assert isinstance(first, m.PasswordReply)
    assert first.password == "wrong"
    assert isinstance(second, m.PasswordReply)
    assert second.password == "right"
    assert isinstance(ack, m.AckReply)
    assert replay.error_code is m.ErrorCode.NO_GRANT
    assert replay.request_id == 5
    assert [(p.attempt, p.retry) for p in prompter.password_asks] == [(1, False), (2, True)]
    assert prompter.password_asks[1].retry_text == "Wrong password, try again (2/3)"
    assert prompter.password_asks[0].approval.tool == "rooty"
    assert "wrong" not in setup.audit_path.read_text()


def test_sandbox_allows_and_denies_carry_no_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False)])
    [denied] = decide(setup.broker(prompter), setup, sudo_request(setup))
    assert denied.grant is None


def test_cancelled_password_finishes_the_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], [None])
    broker = setup.broker(prompter)

    async def go() -> tuple[Any, m.MessageError]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        cancel = await broker.askpass(askpass(2, decision.grant), setup.requester)
        with pytest.raises(m.MessageError) as again:
            await broker.askpass(askpass(3, decision.grant, 2), setup.requester)
        return cancel, again.value

    cancel, again = run(go)
    assert isinstance(cancel, m.DecisionReply)
    assert (cancel.decision, cancel.by) == (m.Decision.DENY, m.DecidedBy.USER)
    assert again.error_code is m.ErrorCode.NO_GRANT


def test_password_timeout_and_front_end_failure_deny(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(True)], [RuntimeError("boom")])
    broker = setup.broker(prompter, prompt_timeout=5)

    async def go() -> list[Any]:
        d1 = await broker.elevate(sudo_request(setup, 1), setup.requester)
        assert d1.grant is not None
        failed = await broker.askpass(askpass(2, d1.grant), setup.requester)
        d2 = await broker.elevate(sudo_request(setup, 3, timeout=0.05), setup.requester)
        assert d2.grant is not None
        prompter.hold = True
        timed_out = await broker.askpass(askpass(4, d2.grant), setup.requester)
        return [failed, timed_out]

    failed, timed_out = run(go)
    assert (failed.decision, failed.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert (timed_out.decision, timed_out.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)


def test_askpass_from_an_unrelated_process_is_refused(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["secret"])
    broker = setup.broker(prompter)
    stranger = Requester(pid=1, uid=os.getuid(), gid=os.getgid())
    other_uid = Requester(pid=os.getpid(), uid=os.getuid() + 1, gid=os.getgid())

    async def go() -> list[m.MessageError]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        errors = []
        for who in (stranger, other_uid):
            with pytest.raises(m.MessageError) as refused:
                await broker.askpass(askpass(2, decision.grant), who)
            errors.append(refused.value)
        # the refusals did not burn the grant: its real descendant still gets an answer
        assert isinstance(
            await broker.askpass(askpass(3, decision.grant), setup.requester), m.PasswordReply
        )
        return errors

    stranger_error, uid_error = run(go)
    assert stranger_error.error_code is m.ErrorCode.NO_GRANT
    assert "descend" in stranger_error.message
    assert "another user" in uid_error.message
    assert prompter.password_asks
    assert len(prompter.password_asks) == 1


def test_shutdown_withdraws_grants(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["pw"])
    broker = setup.broker(prompter)

    async def go() -> m.MessageError:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        broker.begin_shutdown()
        with pytest.raises(m.MessageError) as refused:
            await broker.askpass(askpass(2, decision.grant), setup.requester)
        return refused.value

    assert run(go).error_code is m.ErrorCode.NO_GRANT
    assert prompter.password_asks == []


# --- refusals at the credential gate reach the requester (exit 77) -----------------------


def _sudo_run(
    setup: Setup, passwords: list[str | None], exit_code: int, auth_failed: bool, asks: int
) -> m.Reply:
    """Approve a sudo request, hand out ``asks`` passwords, then report how sudo ended."""
    prompter = FakePrompter([Approval(True)], passwords)
    broker = setup.broker(prompter)

    async def go() -> m.Reply:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        for attempt in range(1, asks + 1):
            await broker.askpass(askpass(1 + attempt, decision.grant, attempt), setup.requester)
        return broker.sudo_result(
            m.SudoResultRequest(
                id=9, grant=decision.grant, exit_code=exit_code, auth_failed=auth_failed
            )
        )

    return run(go)


def test_sudo_result_of_a_cancelled_password_says_so(setup: Setup) -> None:
    reply = _sudo_run(setup, [None], exit_code=1, auth_failed=False, asks=1)
    assert isinstance(reply, m.DecisionReply)
    assert (reply.id, reply.decision, reply.reason) == (9, m.Decision.DENY, PASSWORD_CANCELLED)
    assert reply.grant is None


def test_sudo_result_after_the_last_wrong_password_says_so(setup: Setup) -> None:
    reply = _sudo_run(setup, ["a", "b", "c"], exit_code=1, auth_failed=True, asks=3)
    assert isinstance(reply, m.DecisionReply)
    assert (reply.decision, reply.reason) == (m.Decision.DENY, PASSWORD_ATTEMPTS_EXHAUSTED)


@pytest.mark.parametrize(
    ("exit_code", "auth_failed", "asks"),
    [(1, False, 1), (0, False, 1), (3, True, 0), (1, True, 0)],
    ids=["tool-failed", "ok", "nopasswd-claims-auth", "no-password-asked"],
)
def test_sudo_result_of_a_run_the_gate_let_through_is_an_ack(
    setup: Setup, exit_code: int, auth_failed: bool, asks: int
) -> None:
    reply = _sudo_run(setup, ["pw"], exit_code=exit_code, auth_failed=auth_failed, asks=asks)
    assert reply == m.AckReply(id=9)


def test_a_request_waiting_too_long_for_its_turn_is_denied(setup: Setup) -> None:
    """A flood must not keep requests queued for ever: the queue has its own deadline."""
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter, queue_timeout=0.2, prompt_timeout=30)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = await broker.elevate(setup.request("other", 2), setup.requester)
        assert not first.done()  # the one being shown keeps its own prompt timeout
        prompter.release.set()
        return [await first, second]

    first, second = run(go)
    assert first.decision is m.Decision.ALLOW
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)
    assert second.reason == "waited more than 0.2 s for its turn"
    assert len(prompter.asked) == 1
    assert broker.pending == {}


def test_deny_pending_denies_the_queued_at_their_turn_and_counts_the_queue(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False)], hold=True)
    broker = setup.broker(prompter)
    other = Requester(pid=os.getpid() + 1, uid=os.getuid(), gid=os.getgid(), exe="/bin/other")

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        queued = [
            asyncio.create_task(broker.elevate(setup.request("other", rid), setup.requester))
            for rid in (2, 3)
        ]
        foreign = asyncio.create_task(broker.elevate(setup.request("other", 4), other))
        while len(broker.pending) < 4:
            await asyncio.sleep(0)
        ids = list(broker.pending)
        info = broker.queue_info(ids[0])
        assert info is not None
        assert (info.position, info.total, info.same_process) == (1, 4, 2)
        last = broker.queue_info(ids[3])
        assert last is not None and (last.position, last.same_process) == (4, 0)
        assert broker.queue_info("nope") is None
        marked = broker.deny_pending(pid=setup.requester.pid)
        assert marked == ids[1:3]  # not the one showing, not another process's
        prompter.release.set()
        replies = [await first, *[await q for q in queued]]
        await prompter.until(lambda: len(prompter.asked) == 2)  # the other process's turn
        prompter.release.set()
        return [*replies, await foreign]

    first, second, third, fourth = run(go)
    assert first.by is m.DecidedBy.USER
    for reply in (second, third):
        assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.USER)
        assert "all pending" in reply.reason
    assert fourth.by is m.DecidedBy.USER and "all pending" not in fourth.reason
    assert len(prompter.asked) == 2  # the first and the other process's request
