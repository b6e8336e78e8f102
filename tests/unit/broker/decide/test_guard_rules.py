"""Tests that notice a broken security rule.

Each was missing: a one-line mutation of the rule passed the suite.  Here each
rule is tried from the side that breaks it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from core_helpers import FakePrompter, Setup, askpass, decide, run, sudo_request
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, lookup

from registry_core.broker.decide.facts import gather_facts
from registry_core.broker.question import Approval, Remember
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.remember.policy_file import iso_time
from registry_core.broker.wire import messages as m
from registry_core.trusted import find_trusted

# --- a sudo request must name the registry's executable ------------------------------


@pytest.mark.parametrize(
    "target",
    ["/usr/bin/id", "rooty", "{exe}x", "./rooty"],
)
def test_a_sudo_target_other_than_the_registrys_executable_is_a_mismatch(
    setup: Setup, target: str
) -> None:
    argv = (find_trusted("sudo") or "sudo", "-A", "--", target.format(exe=setup.exe("rooty")))
    req = setup.request("rooty", kind=m.Kind.SUDO, argv=argv)
    facts = gather_facts(setup.loader.load(), req)
    assert any("the registry would run" in x for x in facts.mismatches), facts.mismatches


def test_the_registrys_own_sudo_target_is_no_mismatch(setup: Setup) -> None:
    facts = gather_facts(setup.loader.load(), sudo_request(setup))
    assert facts.mismatches == ()


# --- an untrusted policies.yaml applies its denies only -----------------------------


def _write_policies(path: Path, mode: int, uid: int | None = None) -> None:
    entries: list[dict[str, Any]] = [
        {
            "tool": "greet",
            "kind": "sandbox",
            "host": HOST,
            "decision": "allow",
            "remember": "always",
            "created": iso_time(T0),
            "executable": EXE,
            "sha256": SHA,
        },
        {
            "tool": "bad",
            "kind": "sandbox",
            "host": HOST,
            "decision": "deny",
            "remember": "deny_always",
            "created": iso_time(T0),
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"version": 1, "policies": entries}))
    path.chmod(mode)
    if uid is not None:
        os.chown(path, uid, -1)


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (0o660, "writable by its group (mode 0660)"),
        (0o620, "writable by its group (mode 0620)"),
        (0o602, "writable by every user (mode 0602)"),
    ],
)
def test_a_group_or_world_writable_file_applies_its_denies_only(
    tmp_path: Path, mode: int, words: str
) -> None:
    path = tmp_path / "policies.yaml"
    _write_policies(path, mode)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None  # the allow is not applied
    assert lookup(store, tool="bad") is not None  # the deny is
    assert any(words in p for p in store.problems), store.problems


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("uid", [65534, 1])  # 1: a system account is not root either
def test_a_file_owned_by_another_user_applies_its_denies_only(tmp_path: Path, uid: int) -> None:
    path = tmp_path / "policies.yaml"
    _write_policies(path, 0o600, uid=uid)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert lookup(store, tool="bad") is not None
    assert any(f"owned by uid {uid}, not by you" in p for p in store.problems), store.problems
    assert not any("writable" in p for p in store.problems)


# --- paused denies even when a remembered allow matches -----------------------------


def test_paused_denies_on_arrival_even_with_a_matching_allow(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)
    [allowed] = decide(broker, setup, setup.request())
    assert (allowed.decision, allowed.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)
    broker.set_paused(True)
    [reply] = decide(broker, setup, setup.request(rid=2))
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    assert prompter.asked == []
    assert setup.audit()[-1]["by"] == "paused"


def test_paused_denies_a_sudo_allow_too_and_issues_no_grant(setup: Setup) -> None:
    setup.remember("rooty", Remember.ALWAYS, kind=m.Kind.SUDO)
    broker = setup.broker(FakePrompter())
    broker.set_paused(True)
    [reply] = decide(broker, setup, sudo_request(setup))
    assert (reply.decision, reply.by, reply.grant) == (m.Decision.DENY, m.DecidedBy.PAUSED, None)


# --- a grant is finished after a password timeout and after a front-end failure ------


@pytest.mark.parametrize("failure", ["timeout", "front_end"])
def test_a_grant_is_finished_after_a_failed_password_question(setup: Setup, failure: str) -> None:
    passwords: list[Any] = [RuntimeError("the dialog crashed")] if failure == "front_end" else []
    prompter = FakePrompter([Approval(True)], passwords)
    broker = setup.broker(prompter, prompt_timeout=5)

    async def go() -> tuple[Any, m.MessageError]:
        timeout = 0.05 if failure == "timeout" else None
        decision = await broker.elevate(sudo_request(setup, 1, timeout=timeout), setup.requester)
        assert decision.grant is not None
        prompter.hold = failure == "timeout"
        first = await broker.askpass(askpass(2, decision.grant), setup.requester)
        with pytest.raises(m.MessageError) as again:
            await broker.askpass(askpass(3, decision.grant, attempt=2), setup.requester)
        return first, again.value

    first, again = run(go)
    assert first.decision is m.Decision.DENY
    assert again.error_code is m.ErrorCode.NO_GRANT
