"""The decision memo's pieces (``decision_memo.py``, issue 19): the memo's bounds,
the key and what is in it, lookup stamps, session policies replaced, a deny kept
for the session, and repeated reply frames.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, decide, live_broker, run
from decision_memo_helpers import entry, without_time

from registry_core.elevation import messages as m
from registry_core.elevation.decision_memo import DecisionMemo, memo_key
from registry_core.elevation.frame_memo import FRAME_REST, FrameMemo
from registry_core.elevation.framing import request_decoder
from registry_core.elevation.identity import Requester
from registry_core.elevation.policies import PolicyStore, file_sha256
from registry_core.elevation.prompter import Approval, Remember
from registry_core.elevation.protocol import encode
from registry_core.file_lock import exclusive, lock_path_for

# --- the pieces ----------------------------------------------------------------------


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
