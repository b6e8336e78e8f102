"""The broker server's connection handling without a person.

Driven step by step on a real event loop with in-memory transports (the
socket behind each is a real socketpair, so ``SO_PEERCRED`` and ``/proc``
answer as for a real peer):

- a request no person needs to answer is answered in the very call that
  read it when it is the step's first read, else when the step ends: no
  task, no waiting behind an open question;
- the requests of a step's further reads are decided together: their audit
  records go to the file in one write, and no reply leaves before its own
  record is in the file; they are decided after every read that delivered
  them;
- a peer that stops reading its replies stops being read from.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_helpers import FakePrompter, Setup, live_broker, run

from registry_core.broker.question import Remember
from registry_core.broker.record.audit_file import AuditFile
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.serve.flood import FloodLimits
from registry_core.broker.serve.server import BrokerServer, _Connection


class MemoryTransport(asyncio.Transport):
    """What the server writes, and, at each write, the audit lines already on disk."""

    def __init__(self, sock: socket.socket, audit: Path) -> None:
        super().__init__()
        self.sock = sock
        self.audit = audit
        self.writes: list[bytes] = []
        self.audited_at_write: list[list[dict[str, Any]]] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        lines = self.audit.read_text().splitlines() if self.audit.exists() else []
        self.audited_at_write.append([json.loads(line) for line in lines])

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def replies(self) -> list[dict[str, Any]]:
        return [json.loads(data) for data in self.writes]


@pytest.fixture
def pairs() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for sock in made:
        sock.close()


def connect(server: BrokerServer, setup: Setup, pairs: list[socket.socket]) -> tuple[
    _Connection, MemoryTransport
]:  # fmt: skip
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    pairs += [ours, theirs]
    transport = MemoryTransport(ours, setup.audit_path)
    conn = _Connection(server)
    conn.connection_made(transport)
    return conn, transport


def frame(setup: Setup, rid: object, tool: str = "greet", n: int = 0) -> bytes:
    message = {
        "v": 1,
        "id": rid,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": list(setup.pinned(tool)),
        "args": {"n": n},
        "cwd": "/",
    }
    return json.dumps(message).encode() + b"\n"


def test_a_remembered_decision_is_answered_in_the_call_that_read_it(
    setup: Setup, pairs: list[socket.socket]
) -> None:
    prompter = FakePrompter(hold=True)
    setup.remember("other", Remember.ALWAYS)
    server = BrokerServer(setup.broker(prompter), setup.audit_path.parent / "s.sock")

    async def go() -> None:
        conn, transport = connect(server, setup, pairs)
        conn.data_received(frame(setup, "asked"))  # waits for the (held) person
        await prompter.until(lambda: len(prompter.asked) == 1)
        assert len(conn.tasks) == 1
        transport.writes.clear()
        conn.data_received(frame(setup, "known", "other"))
        # The step's first read: answered before this call returned, without a task.
        assert [(r["id"], r["by"]) for r in transport.replies()] == [("known", "policy")]
        assert len(conn.tasks) == 1
        await conn.cancel_all()

    run(go)


def test_one_steps_records_are_written_at_once_and_before_their_replies(
    setup: Setup, pairs: list[socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    writes: list[int] = []
    real_append = AuditFile.append

    def counting_append(self: AuditFile, line: bytes, now: float, *, count: int = 1) -> None:
        writes.append(count)
        real_append(self, line, now, count=count)

    monkeypatch.setattr(AuditFile, "append", counting_append)
    server = BrokerServer(setup.broker(FakePrompter()), setup.audit_path.parent / "s.sock")

    async def go() -> list[tuple[_Connection, MemoryTransport]]:
        clients = [connect(server, setup, pairs) for _ in range(20)]
        # One loop step: every client's request arrives in the same callback round.
        for n, (conn, _transport) in enumerate(clients):
            conn.data_received(frame(setup, f"c{n}", n=n))
        for _ in range(3):
            await asyncio.sleep(0)
        return clients

    clients = run(go)
    # The first read's record at once, the other 19 in one write when the step ends.
    assert writes == [1, 19]
    for n, (_conn, transport) in enumerate(clients):
        (reply,) = transport.replies()
        assert (reply["id"], reply["decision"], reply["by"]) == (f"c{n}", "allow", "policy")
        # When this reply was written, its own record was already in the file.
        (on_disk,) = transport.audited_at_write
        assert any(record["args"] == {"n": n} for record in on_disk), n
    assert sorted(r["args"]["n"] for r in setup.audit()) == list(range(20))


def test_held_replies_go_out_before_a_peer_that_half_closes_is_closed(
    setup: Setup, pairs: list[socket.socket]
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    server = BrokerServer(setup.broker(FakePrompter()), setup.audit_path.parent / "s.sock")

    async def go() -> MemoryTransport:
        first, _ = connect(server, setup, pairs)
        second, transport = connect(server, setup, pairs)
        first.data_received(frame(setup, "a"))
        second.data_received(frame(setup, "b"))  # not the step's first read: held
        assert transport.writes == []
        if not second.eof_received():
            transport.close()  # as asyncio's transport does when eof_received says so
        for _ in range(3):
            await asyncio.sleep(0)
        return transport

    transport = run(go)
    assert [r["id"] for r in transport.replies()] == ["b"]
    assert transport.audited_at_write[0][-1]["args"] == {"n": 0}


def test_a_peer_that_does_not_read_is_not_read_from(
    setup: Setup, pairs: list[socket.socket]
) -> None:
    server = BrokerServer(
        setup.broker(FakePrompter()),
        setup.audit_path.parent / "s.sock",
        limits=FloodLimits(),
    )

    async def go() -> None:
        conn, transport = connect(server, setup, pairs)
        conn.pause_writing()  # the kernel's buffer and ours are full
        assert transport.reading is False
        conn.resume_writing()
        assert transport.reading is True

    run(go)


def decisions(transport: MemoryTransport) -> list[dict[str, Any]]:
    return [reply for reply in transport.replies() if reply["op"] == "decision"]


def test_a_revoke_between_two_reads_of_one_step_reaches_both_requests(
    setup: Setup, pairs: list[socket.socket]
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    broker, _snapshots = live_broker(setup, FakePrompter())
    server = BrokerServer(broker, setup.audit_path.parent / "s.sock")
    other_process = PolicyStore(setup.policy_path)  # what `ollie-tools policy revoke` does

    async def go() -> tuple[MemoryTransport, MemoryTransport]:
        warm, _ = connect(server, setup, pairs)
        warm.data_received(frame(setup, "warm"))
        await asyncio.sleep(0)
        (first, first_t), (second, second_t) = (connect(server, setup, pairs) for _ in range(2))
        first.data_received(frame(setup, "a"))
        assert other_process.revoke("greet") == 1
        second.data_received(frame(setup, "b"))  # sent after the revoke: must see it
        while not all(decisions(t) for t in (first_t, second_t)):
            await asyncio.sleep(0.01)
        return first_t, second_t

    first_t, second_t = run(go)
    # "a" (the step's first read, sent before the revoke) was decided at once by the
    # policy; "b" came in a later read of the same step, after the revoke: it was
    # decided without the policy, and the person (who says no here) was asked.
    assert [(r["id"], r["decision"], r["by"]) for r in decisions(first_t)] == [
        ("a", "allow", "policy")
    ]
    assert [(r["id"], r["decision"], r["by"]) for r in decisions(second_t)] == [
        ("b", "deny", "user")
    ]


def test_a_peer_gone_with_requests_read_has_them_decided_and_recorded(
    setup: Setup, pairs: list[socket.socket]
) -> None:
    setup.remember("greet", Remember.ALWAYS)
    server = BrokerServer(setup.broker(FakePrompter()), setup.audit_path.parent / "s.sock")

    async def go() -> MemoryTransport:
        conn, transport = connect(server, setup, pairs)
        other, _ = connect(server, setup, pairs)
        other.data_received(frame(setup, "first"))  # the step's first read
        conn.data_received(frame(setup, "a"))  # held for the step's end
        transport.closed = True
        conn.connection_lost(None)  # before the step ended
        assert len(setup.audit()) == 2  # "a" decided before its peer was let go
        await asyncio.sleep(0)
        return transport

    transport = run(go)
    assert transport.writes == []  # nobody left to read it
    records = setup.audit()
    assert [(r["tool"], r["decision"], r["by"]) for r in records] == [
        ("greet", "allow", "policy")
    ] * 2
