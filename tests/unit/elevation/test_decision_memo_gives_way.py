"""Where a remembered decision's repeat gives way to the general path
(``decision_memo.py``, issue 19): a reply frame too long to reuse, an audit line
too long to assemble, a reply without a reusable frame, a per-tool registry.
"""

from __future__ import annotations

import dataclasses

import pytest
from core_helpers import HOST, FakePrompter, Setup, live_broker, run
from decision_memo_helpers import entry

from registry_core.elevation import messages as m
from registry_core.elevation.audit import AuditLog
from registry_core.elevation.audit_file import MAX_LINE
from registry_core.elevation.core import Broker, BrokerConfig
from registry_core.elevation.decision_memo import MAX_ID_FRAME
from registry_core.elevation.policies import LookupStamp
from registry_core.elevation.prompter import Remember
from registry_core.elevation.protocol import encode, with_id
from registry_core.registry import Registry

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
