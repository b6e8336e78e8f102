"""Unit tests of the broker core: remembered policies and fail-closed paths.

The broker runs on a real registry (a temporary tools directory), a real
policy store and audit log; the person is a :class:`FakePrompter` whose
answers are scripted (see core_helpers.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from core_helpers import HOST, FakePrompter, Setup, decide, run

from registry_core.broker.ask.none import NonePrompter
from registry_core.broker.decide.facts import REQUEST_CODE_TOOL
from registry_core.broker.question import Approval, Remember
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.wire import messages as m
from registry_core.trusted import find_trusted

# --- remembered policies -------------------------------------------------------------


def test_remembered_allow_decides_without_asking(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter()
    [reply] = decide(setup.broker(prompter), setup, setup.request(rid="a"))
    assert (reply.id, reply.decision, reply.by) == ("a", m.Decision.ALLOW, m.DecidedBy.POLICY)
    assert reply.remember == "always"
    assert reply.grant is None  # only sudo allows carry a grant
    assert prompter.asked == []
    assert [(r["decision"], r["by"]) for r in setup.audit()] == [("allow", "policy")]


def test_remembered_deny_decides_without_asking(setup: Setup) -> None:
    setup.remember("greet", Remember.DENY_ALWAYS)
    prompter = FakePrompter([Approval(True)])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by, reply.remember) == (
        m.Decision.DENY,
        m.DecidedBy.POLICY,
        "deny_always",
    )
    assert prompter.asked == []


def test_policy_is_per_kind_and_host(setup: Setup) -> None:
    setup.remember("rooty", Remember.ALWAYS, kind=m.Kind.SANDBOX)
    prompter = FakePrompter([Approval(False), Approval(False)])
    broker = setup.broker(prompter)
    sudo_req = setup.request(
        "rooty",
        kind=m.Kind.SUDO,
        argv=(find_trusted("sudo") or "/usr/bin/sudo", "-A", "--", setup.exe("rooty")),
    )
    remote = setup.request("rooty", 2, host="elsewhere")
    replies = decide(broker, setup, sudo_req, remote)
    assert [r.by for r in replies] == [m.DecidedBy.USER, m.DecidedBy.USER]
    assert [a.tool for a in prompter.asked] == ["rooty", "rooty"]
    # A local connection's host claim is shown, never trusted.
    assert not prompter.asked[1].remote
    assert prompter.asked[1].host == HOST
    assert prompter.asked[1].claimed_host == "elsewhere"


def test_a_local_claim_of_another_host_cannot_use_its_allows(setup: Setup) -> None:
    exe = setup.exe("greet")
    setup.policies.remember(
        "greet", m.Kind.SANDBOX, "build-server", Remember.ALWAYS, exe, file_sha256(exe)
    )
    prompter = FakePrompter([Approval(False)])
    broker = setup.broker(prompter)
    [reply] = decide(broker, setup, setup.request("greet", host="build-server"))
    assert reply.by is m.DecidedBy.USER
    assert prompter.asked[0].host == HOST


@pytest.mark.parametrize(
    "choice", [Remember.SESSION, Remember.MINUTES_15, Remember.HOUR, Remember.ALWAYS]
)
def test_remember_choice_reaches_the_policy_store(setup: Setup, choice: Remember) -> None:
    prompter = FakePrompter([Approval(True, choice)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert (first.decision, first.by, first.remember) == (
        m.Decision.ALLOW,
        m.DecidedBy.USER,
        choice.value,
    )
    policy = setup.policies.lookup(
        "greet", m.Kind.SANDBOX, HOST, setup.exe("greet"), file_sha256(setup.exe("greet"))
    )
    assert policy is not None
    assert policy.remember is choice
    assert policy.executable == setup.exe("greet")
    assert (second.decision, second.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)
    assert len(prompter.asked) == 1
    stored = PolicyStore(setup.policy_path).lookup(
        "greet", m.Kind.SANDBOX, HOST, setup.exe("greet"), file_sha256(setup.exe("greet"))
    )
    # session choices live in the broker's memory only; the rest are in the file
    assert (stored is None) == (choice is Remember.SESSION)


def test_once_is_not_remembered(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ONCE), Approval(True, Remember.ONCE)])
    replies = decide(setup.broker(prompter), setup, setup.request(rid=1), setup.request(rid=2))
    assert [r.by for r in replies] == [m.DecidedBy.USER, m.DecidedBy.USER]
    assert [r.remember for r in replies] == ["once", "once"]
    assert len(prompter.asked) == 2
    assert setup.policies.list() == []


def test_remembered_allow_is_bound_to_the_executable_hash(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(False)])
    broker = setup.broker(prompter)
    [first] = decide(broker, setup, setup.request(rid=1))
    assert first.by is m.DecidedBy.USER
    [again] = decide(broker, setup, setup.request(rid=2))
    assert again.by is m.DecidedBy.POLICY
    exe = Path(setup.exe("greet"))
    exe.write_text("#!/bin/sh\necho something else entirely\n")  # same path, new content
    [changed] = decide(broker, setup, setup.request(rid=3))
    assert (changed.decision, changed.by) == (m.Decision.DENY, m.DecidedBy.USER)
    assert len(prompter.asked) == 2
    assert prompter.asked[1].sha256 == file_sha256(exe)


def test_code_requests_are_never_remembered_as_allow(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(True, Remember.HOUR)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.code_request(rid=1), setup.code_request(rid=2))
    assert (first.decision, first.remember) == (m.Decision.ALLOW, "once")
    assert (second.decision, second.by, second.remember) == (
        m.Decision.ALLOW,
        m.DecidedBy.USER,
        "once",
    )
    assert len(prompter.asked) == 2
    assert prompter.asked[0].code == "id -u"
    assert prompter.asked[0].tool == REQUEST_CODE_TOOL
    assert setup.policies.list() == []
    assert [r["remember"] for r in setup.audit()] == ["once", "once"]


def test_an_allow_policy_never_covers_code(setup: Setup) -> None:
    bash = os.path.realpath("/bin/bash")
    setup.policies.remember(
        REQUEST_CODE_TOOL, m.Kind.SANDBOX, HOST, Remember.ALWAYS, bash, file_sha256(bash)
    )
    prompter = FakePrompter([Approval(False)])
    [reply] = decide(setup.broker(prompter), setup, setup.code_request())
    assert reply.by is m.DecidedBy.USER
    assert len(prompter.asked) == 1


def test_mismatching_argv_is_never_remembered_as_allow(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(False)])
    broker = setup.broker(prompter)
    odd = setup.request(argv=("/bin/sh", "-c", "rm -rf ~"))
    first, second = decide(broker, setup, odd, setup.request(rid=2))
    assert (first.decision, first.remember) == (m.Decision.ALLOW, "once")
    assert prompter.asked[0].mismatches  # shown loudly in the dialog
    assert setup.policies.list() == []
    assert second.by is m.DecidedBy.USER  # the correct request is asked again


def test_an_allow_policy_never_covers_a_mismatch(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    odd = setup.request(argv=("/bin/sh", "-c", "rm -rf ~"))
    [reply] = decide(setup.broker(prompter), setup, odd)
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.USER)


def test_deny_always_is_stored_and_decides_next_time(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert (first.decision, first.by, first.remember) == (
        m.Decision.DENY,
        m.DecidedBy.USER,
        "deny_always",
    )
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.POLICY)
    [policy] = PolicyStore(setup.policy_path).list()
    assert (policy.tool, policy.decision) == ("greet", m.Decision.DENY)


def test_deny_always_for_code_is_kept(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.code_request(rid=1), setup.code_request("ls", 2))
    assert first.remember == "deny_always"
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.POLICY)


def test_a_plain_deny_is_once(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.ALWAYS)])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.remember) == (m.Decision.DENY, "once")
    assert setup.policies.list() == []


# --- fail closed ---------------------------------------------------------------------


def test_paused_denies_without_asking(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)
    broker.set_paused(True)
    [reply] = decide(broker, setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    assert prompter.asked == []
    assert setup.audit()[-1]["by"] == "paused"


def test_unavailable_front_end_denies(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], available=False)
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert "fake" in reply.reason
    assert prompter.asked == []


def test_policies_still_decide_without_a_front_end(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    [reply] = decide(setup.broker(FakePrompter(available=False)), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)


def test_prompt_timeout_denies(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter, prompt_timeout=0.05)

    async def go() -> m.DecisionReply:
        reply = await broker.elevate(setup.request(), setup.requester)
        # the dialog was taken away by the time the denial is sent
        assert prompter.cancelled == [prompter.asked[0].id]
        return reply

    reply = run(go)
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)
    assert prompter.decided == [(prompter.asked[0].id, False, "timeout")]
    assert setup.audit()[-1]["by"] == "timeout"


def test_the_requesters_timeout_is_used_when_shorter(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter, prompt_timeout=3600)
    [reply] = decide(broker, setup, setup.request(timeout=0.05))
    assert reply.by is m.DecidedBy.TIMEOUT
    assert 0 < prompter.asked[0].timeout <= 0.05


def test_the_none_front_end_is_audited_as_no_front_end(setup: Setup) -> None:
    broker = setup.broker(NonePrompter())  # type: ignore[arg-type]
    [reply] = decide(broker, setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert setup.audit()[-1]["by"] == "no_front_end"
    assert setup.audit()[-1]["decision"] == "deny"


def test_a_persons_no_is_still_audited_as_user(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.ONCE, "no front-end")])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.USER)
    assert setup.audit()[-1]["by"] == "user"


def test_front_end_exception_denies(setup: Setup) -> None:
    prompter = FakePrompter([RuntimeError("kdialog crashed")])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert "kdialog crashed" in reply.reason
    assert setup.policies.list() == []


def test_unknown_and_unavailable_tools_are_typed_errors(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())
    with pytest.raises(m.MessageError) as unknown:
        decide(broker, setup, setup.request("nope", argv=("/bin/true",)))
    assert (unknown.value.error_code, unknown.value.request_id) == (m.ErrorCode.UNKNOWN_TOOL, 1)
    with pytest.raises(m.MessageError) as hidden:
        decide(broker, setup, setup.request("hidden"))
    assert hidden.value.error_code is m.ErrorCode.TOOL_UNAVAILABLE
    assert setup.audit() == []
