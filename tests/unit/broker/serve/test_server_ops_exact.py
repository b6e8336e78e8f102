"""The broker server on a real Unix socket: the Tool Browser, errors, shutdown and
every op answered now or later, in words.

Each test runs a real :class:`BrokerServer` in the test's event loop and talks to it
as a client does (``server_helpers``).  What is pinned: the Tool Browser request,
internal and protocol errors of requests answered now and later, the shutdown
denial, each op's own reply, a reply too large to send, a stream ending inside a
frame, the identify hook, audit records that cannot be written, and a peer that
cannot be identified.

Written against the mutants of ``server.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
from core_helpers import HOST, FakePrompter, Setup, run
from server_helpers import close_all, connect, elevate, error, serving, shutdown_denial

from registry_core.broker.peer.identity import Requester, describe_peer
from registry_core.broker.question import Approval
from registry_core.broker.serve.server import BrokerServer

# --- the Tool Browser, errors and shutdown ----------------------------------------


def test_the_tool_browser_is_opened_or_refused_in_words(setup: Setup, base: Path) -> None:
    opened: list[int] = []

    async def go() -> None:
        async with serving(setup, base, FakePrompter()):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(id=1, op="open_browser")
            assert await peer.reply() == error(1, "unsupported", "this broker has no Tool Browser")
            peer.close()
        (base / "run").rename(base / "old")
        async with serving(setup, base, FakePrompter(), on_open_browser=lambda: opened.append(1)):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(id=2, op="open_browser")
            assert await peer.reply() == {"v": 1, "id": 2, "op": "ack"}
            peer.close()

    run(go)
    assert opened == [1]


def test_a_failure_inside_the_broker_is_an_internal_error_in_words(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go() -> None:
        async with serving(setup, base, FakePrompter()) as server:
            broker = server.broker

            def broken_now(*_args: Any) -> Any:
                raise KeyError("now")

            async def broken_later(*_args: Any) -> Any:
                raise ZeroDivisionError("later")

            monkeypatch.setattr(broker, "elevate_now", broken_now)
            monkeypatch.setattr(broker, "askpass", broken_later)
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(**elevate(setup, "e"))
            assert await peer.reply() == error("e", "internal", "internal error: KeyError")
            await peer.send(id="k", op="askpass", grant="g" * 43, prompt="p", attempt=1)
            assert await peer.reply() == error("k", "internal", "internal error: ZeroDivisionError")
            peer.close()

    with caplog.at_level(logging.ERROR, logger="registry_core.broker.serve.server"):
        run(go)
    records = [r for r in caplog.records if r.name == "registry_core.broker.serve.server"]
    assert [r.getMessage() for r in records] == [
        "internal error while handling elevate",
        "internal error while handling askpass",
    ]
    assert [type(r.exc_info[1]) for r in records if r.exc_info] == [KeyError, ZeroDivisionError]


def test_a_refused_askpass_is_answered_with_its_error(setup: Setup, base: Path) -> None:
    async def go() -> dict[str, Any]:
        async with serving(setup, base, FakePrompter()):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(id="k", op="askpass", grant="g" * 43, prompt="p", attempt=1)
            reply = await peer.reply()
            peer.close()
            return reply

    reply = run(go)
    assert (reply["id"], reply["op"], reply["code"]) == ("k", "error", "no_grant")
    assert reply["message"] == "unknown grant"


def test_a_bad_frame_is_answered_in_words_and_the_connection_kept(setup: Setup, base: Path) -> None:
    async def go() -> list[dict[str, Any]]:
        async with serving(setup, base, FakePrompter()):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send_raw(b"not json\n")
            first = await peer.reply()
            await peer.send(id=1, op="ping")
            second = await peer.reply()
            peer.close()
            return [first, second]

    first, second = run(go)
    assert (first["id"], first["op"], first["code"]) == (None, "error", "bad_json")
    assert second == {"v": 1, "id": 1, "op": "pong"}


@pytest.mark.parametrize("op", ["elevate", "action"])
def test_shutdown_denies_a_pending_request_in_words(setup: Setup, base: Path, op: str) -> None:
    prompter = FakePrompter(hold=True)

    async def go() -> tuple[dict[str, Any], bool, float]:
        server = BrokerServer(setup.broker(prompter), base / "run" / "elevate.sock")
        await server.start()
        peer = await connect(base / "run" / "elevate.sock")
        await peer.send(**(elevate(setup, "w") if op == "elevate" else action("w")))
        await prompter.until(lambda: len(prompter.asked) == 1)
        started = time.monotonic()
        await server.close()
        took = time.monotonic() - started
        reply = await peer.reply()
        closed = await peer.at_eof()
        await close_all()
        return reply, closed, took

    reply, closed, took = run(go)
    assert took < 1.5  # every peer had its replies: no waiting for the cut-off
    assert reply == shutdown_denial("w")
    assert closed
    assert not (base / "run" / "elevate.sock").exists()


# --- every op answered now or later, in words -------------------------------------


def action(rid: object) -> dict[str, Any]:
    return {
        "id": rid,
        "op": "action",
        "agent": "claude",
        "tool": "Bash",
        "summary": "ls /tmp",
        "input": {"command": "ls /tmp"},
        "cwd": "/",
        "pattern_kind": "program",
        "pattern": "ls",
    }


def test_each_op_gets_its_own_reply(setup: Setup, base: Path) -> None:
    prompter = FakePrompter([Approval(True), Approval(True)])

    async def go() -> list[dict[str, Any]]:
        async with serving(setup, base, prompter) as server:
            peer = await connect(base / "run" / "elevate.sock")
            frames = []
            await peer.send(id="s", op="status")
            frames.append(await peer.reply())
            await peer.send(
                id="u", op="sudo_result", grant="g" * 43, exit_code=0, auth_failed=False
            )
            frames.append(await peer.reply())
            await peer.send(**elevate(setup, "t", tool="nosuchtool"))
            frames.append(await peer.reply())
            await peer.send(**elevate(setup, "e"))  # asked: its notice first
            frames += [await peer.next_frame(), await peer.next_frame()]
            await peer.send(**action("a"))
            frames += [await peer.next_frame(), await peer.next_frame()]
            server.broker.set_paused(True)
            await peer.send(**action("p"))  # decided at once
            frames.append(await peer.reply())
            return frames

    status, ack, unknown, e_notice, e_decision, a_notice, a_decision, paused = run(go)
    assert status == {"v": 1, "id": "s", "op": "status", "pending": 0, "paused": False,
                      "version": status["version"]}  # fmt: skip
    assert ack == {"v": 1, "id": "u", "op": "ack"}
    assert unknown == error("t", "unknown_tool", "no tool named 'nosuchtool'")
    for notice, rid in ((e_notice, "e"), (a_notice, "a")):
        assert notice == {"v": 1, "id": rid, "op": "progress", "state": "waiting_for_user"}
    assert (e_decision["id"], e_decision["decision"], e_decision["by"]) == ("e", "allow", "user")
    assert (a_decision["id"], a_decision["decision"], a_decision["by"]) == ("a", "allow", "user")
    assert [r.action is not None for r in prompter.asked] == [False, True]
    assert (paused["id"], paused["decision"], paused["by"]) == ("p", "deny", "paused")
    assert paused["reason"] == "requests are paused"


def test_a_shutting_down_broker_answers_pings_and_refuses_the_rest(
    setup: Setup, base: Path
) -> None:
    async def go() -> list[dict[str, Any]]:
        async with serving(setup, base, FakePrompter()) as server:
            peer = await connect(base / "run" / "elevate.sock")
            server.broker.begin_shutdown()
            frames = []
            for fields in (
                {"id": 1, "op": "ping"},
                elevate(setup, 2),
                action(3),
                {"id": 4, "op": "open_browser"},
            ):
                await peer.send(**fields)
                frames.append(await peer.reply())
            return frames

    assert run(go) == [
        {"v": 1, "id": 1, "op": "pong"},
        error(2, "shutting_down", "the broker is shutting down"),
        error(3, "shutting_down", "the broker is shutting down"),
        error(4, "shutting_down", "the broker is shutting down"),
    ]


def test_a_reply_too_large_to_send_becomes_an_error_for_its_id(setup: Setup, base: Path) -> None:
    """A person's own words longer than a frame: the requester still gets an answer."""
    prompter = FakePrompter([Approval(False, reason="x" * 70_000)])

    async def go() -> dict[str, Any]:
        async with serving(setup, base, prompter):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(**elevate(setup, "big"))
            return await peer.reply()

    reply = run(go)
    assert (reply["id"], reply["op"], reply["code"]) == ("big", "error", "frame_too_large")
    assert reply["message"] == "decision message is 70108 bytes, the limit is 65536"


def test_a_stream_ending_inside_a_frame_is_answered_before_the_close(
    setup: Setup, base: Path
) -> None:
    async def go() -> tuple[dict[str, Any], bool]:
        async with serving(setup, base, FakePrompter()):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send_raw(b'{"v":1,"id":1,"op":"ping"}')  # no newline
            peer.writer.write_eof()
            return await peer.reply(), await peer.at_eof()

    reply, closed = run(go)
    message = "stream ended inside a frame (26 bytes without a newline)"
    assert reply == error(None, "bad_json", message)
    assert closed


def test_the_identify_hook_is_told_the_peers_pid_uid_gid_and_the_brokers_host(
    setup: Setup, base: Path
) -> None:
    told: list[tuple[int, int, int, str]] = []

    def identify(pid: int, uid: int, gid: int, host: str) -> Requester:
        told.append((pid, uid, gid, host))
        return describe_peer(pid, uid, gid, host)

    async def go() -> dict[str, Any]:
        async with serving(setup, base, FakePrompter(), identify=identify):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(id=1, op="ping")
            return await peer.reply()

    assert run(go) == {"v": 1, "id": 1, "op": "pong"}
    assert told == [(os.getpid(), os.getuid(), os.getgid(), HOST)]


def test_a_batch_whose_audit_records_cannot_be_written_is_logged_and_answered(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = setup.audit_path
    path.mkdir(parents=True)  # a directory where the log should be

    async def go() -> dict[str, Any]:
        async with serving(setup, base, FakePrompter()) as server:
            server.broker.set_paused(True)  # decided at once, in the batch
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(**elevate(setup, "p"))
            return await peer.reply()

    with caplog.at_level(logging.ERROR):
        reply = run(go)
    assert (reply["id"], reply["decision"], reply["by"]) == ("p", "deny", "paused")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "registry_core.broker.serve.server",
            f"could not write the audit log {path}: cannot open {path}: Is a directory",
        )
    ]


def test_a_peer_that_cannot_be_identified_is_closed_and_logged(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def identify(pid: int, uid: int, gid: int, host: str) -> Any:
        raise OSError("gone")

    async def go() -> bool:
        async with serving(setup, base, FakePrompter(), identify=identify) as server:
            peer = await connect(base / "run" / "elevate.sock")
            closed = await peer.at_eof()
            while server.connection_count:
                await asyncio.sleep(0.01)
            return closed

    with caplog.at_level(logging.ERROR, logger="registry_core.broker.serve.server"):
        assert run(go)
    [record] = [r for r in caplog.records if r.name == "registry_core.broker.serve.server"]
    assert record.getMessage() == "connection failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "gone"
