"""The broker core and a requester inside a sandbox: labelled, no grant, never a password."""

from __future__ import annotations

import dataclasses

import pytest
from core_helpers import FakePrompter, Setup, askpass, decide, run, sudo_request

from registry_core.broker.ask.text import approval_text
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, Remember
from registry_core.broker.record.audit import AuditRecord
from registry_core.broker.wire import messages as m

SANDBOXED_WHY = ("it runs with no_new_privs (NoNewPrivs: 1)",)


def sandboxed(requester: Requester) -> Requester:
    return dataclasses.replace(requester, sandboxed=True, sandbox_reasons=SANDBOXED_WHY)


def test_a_sandboxed_sudo_request_is_asked_labelled_and_gets_no_grant(setup: Setup) -> None:
    setup.requester = sandboxed(setup.requester)
    prompter = FakePrompter([Approval(True, Remember.ONCE)])
    [reply] = decide(setup.broker(prompter), setup, sudo_request(setup))
    assert reply.decision is m.Decision.ALLOW
    assert reply.grant is None  # sudo cannot run in a sandbox: nothing to hand out
    [asked] = prompter.asked
    assert asked.sandboxed
    text = approval_text(asked)
    assert text.warnings[0].startswith("SANDBOXED: this request comes from inside the sandbox")
    requested_by = next(f for f in text.fields if f.label == "Requested by")
    assert "(from inside the sandbox)" in requested_by.lines[0]
    [record] = setup.audit()
    assert record["requester"]["sandboxed"] is True
    assert record["requester"]["origin"] == "from inside the sandbox"
    assert AuditRecord.from_json(record).requester.sandboxed


def test_an_ordinary_requester_is_not_labelled(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ONCE)])
    [reply] = decide(setup.broker(prompter), setup, sudo_request(setup))
    assert reply.grant  # the dispatcher outside the sandbox gets its grant
    assert not prompter.asked[0].sandboxed
    assert not any("SANDBOX" in w for w in approval_text(prompter.asked[0]).warnings)
    [record] = setup.audit()
    assert "sandboxed" not in record["requester"]
    assert not AuditRecord.from_json(record).requester.sandboxed


def test_askpass_from_inside_the_sandbox_is_refused_before_anybody_is_asked(
    setup: Setup,
) -> None:
    """Even with a live grant the approved requester holds: no front-end (and so no
    keyring) is consulted, the typed error comes back, and the leaked grant dies."""
    prompter = FakePrompter([Approval(True)], ["marker-password"])
    broker = setup.broker(prompter)
    inside = sandboxed(setup.requester)  # same pid: it passes the ancestry check

    async def scenario() -> None:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant
        with pytest.raises(m.MessageError) as refused:
            await broker.askpass(askpass(2, decision.grant), inside)
        assert refused.value.error_code is m.ErrorCode.SANDBOXED_REQUESTER
        assert refused.value.request_id == 2
        assert "from inside the sandbox" in refused.value.message
        # The grant presented from inside the sandbox is finished for everybody.
        with pytest.raises(m.MessageError) as dead:
            await broker.askpass(askpass(3, decision.grant), setup.requester)
        assert dead.value.error_code is m.ErrorCode.NO_GRANT

    run(scenario)
    assert prompter.password_asks == []
    assert list(prompter.passwords) == ["marker-password"]  # never handed out


def test_askpass_from_inside_the_sandbox_without_any_grant_gets_the_same_answer(
    setup: Setup,
) -> None:
    prompter = FakePrompter()
    broker = setup.broker(prompter)

    async def scenario() -> None:
        with pytest.raises(m.MessageError) as refused:
            await broker.askpass(askpass(1, "x" * 43), sandboxed(setup.requester))
        assert refused.value.error_code is m.ErrorCode.SANDBOXED_REQUESTER

    run(scenario)
    assert prompter.password_asks == []
