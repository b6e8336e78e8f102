"""The broker server on a real Unix socket, its answers pinned exactly (issue 16).

Each test runs a real :class:`BrokerServer` in the test's event loop, bound to a
real socket, and talks to it as a client does: frames in, frames out.  What is
pinned: the flood caps as the server applies them (each cap in its own words,
a finished request no longer counted, refused connections closed after their
error), a peer of another uid refused (a real child process running as
``nobody``), the Tool Browser request, internal and protocol errors of requests
answered now and later, the shutdown denial, and a question withdrawn when its
requester leaves.

Written against the mutants of ``server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from core_helpers import HOST, WAIT, FakePrompter, Setup, run

from registry_core.elevation.identity import Requester, describe_peer
from registry_core.elevation.limits import FloodLimits, Throttle
from registry_core.elevation.prompter import Approval
from registry_core.elevation.server import BrokerServer, _Connection
from registry_core.file_lock import exclusive, lock_path_for

NOBODY = 65534
ME = os.getuid()


@pytest.fixture
def base() -> Iterator[Path]:
    """A short directory (a socket path holds at most 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="sx-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


class Peer:
    """One client connection: JSON frames out, JSON frames in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, **fields: Any) -> None:
        self.writer.write(json.dumps({"v": 1, **fields}).encode() + b"\n")
        await self.writer.drain()

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def next_frame(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT):
            line = await self.reader.readline()
        assert line.endswith(b"\n"), line
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    async def reply(self) -> dict[str, Any]:
        """The next frame that is not a progress notice."""
        while (obj := await self.next_frame())["op"] == "progress":
            pass
        return obj

    async def at_eof(self) -> bool:
        async with asyncio.timeout(WAIT):
            return await self.reader.read() == b""

    def close(self) -> None:
        self.writer.close()


OPEN: list[Peer] = []


async def connect(path: Path) -> Peer:
    reader, writer = await asyncio.open_unix_connection(str(path))
    OPEN.append(Peer(reader, writer))
    return OPEN[-1]


async def close_all() -> None:
    """Close every client connection of the test (inside its event loop)."""
    for peer in OPEN:
        peer.writer.close()
        with contextlib.suppress(OSError):
            await peer.writer.wait_closed()
    OPEN.clear()


@contextlib.asynccontextmanager
async def serving(
    setup: Setup, base: Path, prompter: FakePrompter, **kw: Any
) -> AsyncIterator[BrokerServer]:
    server = BrokerServer(setup.broker(prompter), base / "run" / "elevate.sock", **kw)
    await server.start()
    try:
        yield server
    finally:
        await server.close()
        await close_all()


def elevate(setup: Setup, rid: object, tool: str = "greet") -> dict[str, Any]:
    return {
        "id": rid,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": [setup.exe(tool)],
        "args": {},
        "cwd": "/",
    }


def error(rid: object, code: str, message: str) -> dict[str, Any]:
    return {"v": 1, "id": rid, "op": "error", "code": code, "message": message}


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "registry_core.elevation.server" and r.getMessage().startswith("refused")
    ]


# --- requests in flight ----------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "second_on_another_connection", "words"),
    [
        (
            FloodLimits(requests_per_connection=1),
            False,
            "too many requests pending on this connection (limit 1)",
        ),
        (
            FloodLimits(requests_per_process=1),
            True,
            "too many requests pending from pid {pid} (limit 1)",
        ),
        (
            FloodLimits(requests_per_uid=1),
            True,
            f"too many requests pending for uid {ME} (limit 1)",
        ),
    ],
    ids=["connection", "process", "uid"],
)
def test_a_request_beyond_a_cap_is_refused_in_words_until_one_is_answered(
    setup: Setup,
    base: Path,
    caplog: pytest.LogCaptureFixture,
    caps: FloodLimits,
    second_on_another_connection: bool,
    words: str,
) -> None:
    words = words.format(pid=os.getpid())  # this process's: tests may run in a fork
    prompter = FakePrompter([Approval(False), Approval(False)], hold=True)

    async def go() -> None:
        async with serving(setup, base, prompter, limits=caps):
            first = await connect(base / "run" / "elevate.sock")
            second = await connect(base / "run" / "elevate.sock")
            other = second if second_on_another_connection else first
            await first.send(**elevate(setup, "a"))
            await prompter.until(lambda: len(prompter.asked) == 1)
            await other.send(**elevate(setup, "b"))
            assert await other.reply() == error("b", "too_many_requests", words)
            # Checked against the cap although answered at once (docs/decisions.md).
            await other.send(id="p", op="ping")
            assert await other.reply() == error("p", "too_many_requests", words)
            prompter.release.set()  # "a" is answered: it no longer counts
            reply = await first.reply()
            assert (reply["id"], reply["op"], reply["by"]) == ("a", "decision", "user")
            await other.send(**elevate(setup, "c"))
            await prompter.until(lambda: len(prompter.asked) == 2)  # admitted, asked
            prompter.release.set()
            reply = await other.reply()
            assert (reply["id"], reply["op"], reply["by"]) == ("c", "decision", "user")
            first.close()
            second.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.elevation.server"):
        run(go)
    assert [r.id for r in prompter.asked] == ["r1", "r2"]
    assert refusals(caplog) == [f"refused: {words}"]


def test_a_connection_forgets_each_request_once_it_is_answered(setup: Setup, base: Path) -> None:
    prompter = FakePrompter([Approval(False)] * 3)

    async def go() -> list[int]:
        held = []
        async with serving(setup, base, prompter) as server:
            peer = await connect(base / "run" / "elevate.sock")
            for n in range(3):
                await peer.send(**elevate(setup, n))
                assert (await peer.reply())["id"] == n
                [conn] = server.connections
                await asyncio.sleep(0)  # the finished task's callbacks run
                held.append(len(conn.tasks))
            peer.close()
        return held

    assert run(go) == [0, 0, 0]


def test_a_requester_that_leaves_withdraws_its_question(setup: Setup, base: Path) -> None:
    prompter = FakePrompter(hold=True)

    async def go() -> None:
        async with serving(setup, base, prompter):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(**elevate(setup, "gone"))
            await prompter.until(lambda: len(prompter.asked) == 1)
            peer.close()
            await prompter.until(lambda: prompter.cancelled == [prompter.asked[0].id])

    run(go)
    [record] = setup.audit()
    assert (record["decision"], record["by"]) == ("deny", "client_gone")


# --- connections -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "words"),
    [
        (
            FloodLimits(connections_per_process=1),
            "too many connections from pid {pid} (limit 1)",
        ),
        (FloodLimits(connections_per_uid=1), f"too many connections for uid {ME} (limit 1)"),
    ],
    ids=["process", "uid"],
)
def test_a_connection_beyond_a_cap_gets_its_error_and_is_closed(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture, caps: FloodLimits, words: str
) -> None:
    words = words.format(pid=os.getpid())  # this process's: tests may run in a fork

    async def go() -> None:
        async with serving(setup, base, FakePrompter(), limits=caps) as server:
            path = base / "run" / "elevate.sock"
            first = await connect(path)
            await first.send(id=1, op="ping")
            assert await first.reply() == {"v": 1, "id": 1, "op": "pong"}
            refused = await connect(path)
            assert await refused.reply() == error(None, "too_many_connections", words)
            assert await refused.at_eof()
            first.close()
            while server.connection_count:  # the first one's place is given back
                await asyncio.sleep(0.01)
            again = await connect(path)
            await again.send(id=2, op="ping")
            assert await again.reply() == {"v": 1, "id": 2, "op": "pong"}
            again.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.elevation.server"):
        run(go)
    # The refusal, and nothing else: the refused connection's close is no failure.
    assert [
        r.getMessage() for r in caplog.records if r.name == "registry_core.elevation.server"
    ] == [f"refused: {words}"]


def test_refusals_are_logged_once_per_second_with_the_count_held_back(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    words = f"too many connections from pid {os.getpid()} (limit 1)"

    async def go() -> None:
        caps = FloodLimits(connections_per_process=1)
        async with serving(setup, base, FakePrompter(), limits=caps) as server:
            server._refusals = Throttle(clock=lambda: now[0])
            path = base / "run" / "elevate.sock"
            keep = await connect(path)
            await keep.send(id=1, op="ping")
            await keep.reply()
            for at in (100.0, 100.5, 100.9, 101.0, 101.5, 102.5):
                now[0] = at
                refused = await connect(path)
                assert (await refused.reply())["code"] == "too_many_connections"
                assert await refused.at_eof()
            keep.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.elevation.server"):
        run(go)
    assert refusals(caplog) == [
        f"refused: {words}",
        f"refused: {words} (and 2 more refusals in the last second)",
        f"refused: {words} (and 1 more refusals in the last second)",
    ]


PEER = textwrap.dedent(
    """
    import json, os, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    data = b""
    try:
        s.sendall(b'{"v":1,"id":1,"op":"ping"}\\n')
    except BrokenPipeError:  # already closed after the error
        pass
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with the ping unread
        pass
    print(json.dumps({"uid": os.getuid(), "received": data.decode()}))
    """
)


def test_a_peer_of_another_uid_is_refused_in_words_and_closed(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    if ME != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run as root to run a client as another user")
        pytest.skip("needs root to run a client as another user")
    # Reachable by file modes on purpose (bound here, not by bind_socket): this is
    # about SO_PEERCRED.
    open_dir = Path(tempfile.mkdtemp(prefix="sx-peer-"))
    open_dir.chmod(0o711)
    path = open_dir / "elevate.sock"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(path))
    path.chmod(0o666)
    listening.listen(8)
    prompter = FakePrompter()

    async def go() -> tuple[int, dict[str, Any]]:
        server = BrokerServer(setup.broker(prompter), path)
        await server.start(listening)
        try:
            child = await asyncio.create_subprocess_exec(
                "/usr/bin/python3", "-c", PEER, str(path),
                user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(WAIT):
                out, _ = await child.communicate()
            assert child.returncode == 0
            mine = await connect(path)  # this uid is still served
            await mine.send(id=2, op="ping")
            assert await mine.reply() == {"v": 1, "id": 2, "op": "pong"}
            mine.close()
            return child.pid, json.loads(out)
        finally:
            await server.close()
            await close_all()

    try:
        with caplog.at_level(logging.WARNING, logger="registry_core.elevation.server"):
            pid, out = run(go)
    finally:
        listening.close()
        shutil.rmtree(open_dir)
    assert out["uid"] == NOBODY
    # One error, then the close: the ping is never answered.
    assert out["received"].splitlines() == [
        json.dumps(
            error(None, "peer_uid", f"uid {NOBODY} may not use this broker"), separators=(",", ":")
        )
    ]
    assert refusals(caplog) == [f"refused a connection from pid {pid} uid {NOBODY}"]
    assert prompter.asked == []


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

    with caplog.at_level(logging.ERROR, logger="registry_core.elevation.server"):
        run(go)
    records = [r for r in caplog.records if r.name == "registry_core.elevation.server"]
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
    assert reply == {
        "v": 1,
        "id": "w",
        "op": "decision",
        "decision": "deny",
        "reason": "the broker is shutting down",
        "by": "shutdown",
        "remember": None,
        "grant": None,
    }
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
            "registry_core.elevation.server",
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

    with caplog.at_level(logging.ERROR, logger="registry_core.elevation.server"):
        assert run(go)
    [record] = [r for r in caplog.records if r.name == "registry_core.elevation.server"]
    assert record.getMessage() == "connection failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "gone"


# --- start and close --------------------------------------------------------------


def test_start_quiets_accept_errors_and_keeps_the_loops_own_handler(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[object, dict[str, Any]]] = []

    async def go() -> object:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda lp, context: seen.append((lp, context)))
        async with serving(setup, base, FakePrompter()):
            failure = OSError(24, "Too many open files")
            loop.call_exception_handler(
                {"message": "socket.accept() out of system resource", "exception": failure}
            )
            loop.call_exception_handler({"message": "something else"})
        return loop

    with caplog.at_level(logging.ERROR, logger="registry_core.elevation.server"):
        loop = run(go)
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept connections: [Errno 24] Too many open files"
    ]
    assert seen == [(loop, {"message": "something else"})]


def test_a_burst_of_connections_waits_in_a_long_listen_queue(setup: Setup, base: Path) -> None:
    """asyncio's default backlog (100) would refuse the 101st connect of a burst."""

    async def go() -> int:
        async with serving(setup, base, FakePrompter()) as server:
            burst = []
            try:
                for _ in range(300):  # all before the loop gets to accept one
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    burst.append(sock)
                    sock.setblocking(False)
                    sock.connect(str(server.path))  # BlockingIOError on a full queue
            finally:
                for sock in burst:
                    sock.close()
            return len(burst)

    assert run(go) == 300


def test_a_server_never_started_closes_and_leaves_the_path_alone(setup: Setup, base: Path) -> None:
    """Closing a server whose start never came (a failed start-up's clean-up) is quiet,
    and a socket file there, not its own, is left."""
    path = base / "elevate.sock"
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(path))

    async def go() -> bool:
        server = BrokerServer(setup.broker(FakePrompter()), path)
        await server.close()
        return server.closed.is_set()

    try:
        assert run(go)
        assert path.is_socket()
    finally:
        other.close()


def test_close_leaves_a_socket_file_that_is_not_its_own(setup: Setup, base: Path) -> None:
    path = base / "run" / "elevate.sock"

    async def go() -> None:
        async with serving(setup, base, FakePrompter()):
            path.unlink()  # gone: nothing to remove, no error
        async with serving(setup, base, FakePrompter()):
            path.unlink()
            other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            other.bind(str(path))  # another instance's socket now
            other.close()

    run(go)
    assert path.is_socket()


def test_close_gives_up_on_a_held_start_up_lock_and_leaves_the_socket(
    setup: Setup, base: Path
) -> None:
    path = base / "run" / "elevate.sock"

    async def go() -> float:
        server = BrokerServer(setup.broker(FakePrompter()), path)
        await server.start()
        with exclusive(lock_path_for(path)):  # a starting instance holds it
            started = time.monotonic()
            await server.close()
            return time.monotonic() - started

    took = run(go)
    assert 4.9 < took < 5.9  # five seconds for the lock
    assert path.is_socket()  # not removed without the lock


def test_a_connection_accepted_while_closing_is_closed_unserved(setup: Setup, base: Path) -> None:
    ours, peer = socket.socketpair(socket.AF_UNIX)  # a peer the server would admit

    class FakeTransport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.closed = False

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return ours if name == "socket" else default

        def close(self) -> None:
            self.closed = True

    async def go() -> tuple[_Connection, FakeTransport, BrokerServer]:
        async with serving(setup, base, FakePrompter()) as server:
            pass
        transport = FakeTransport()
        conn = _Connection(server)  # the protocol of a connection accepted late
        conn.connection_made(transport)
        return conn, transport, server

    with ours, peer:
        conn, transport, server = run(go)
    assert transport.closed
    assert conn.requester is None and conn.peer is None
    assert server.peers.connections() == 0


def test_close_waits_for_slow_readers_and_cuts_off_peers_that_never_read(
    setup: Setup, base: Path
) -> None:
    """A peer that reads late still gets every reply and its denial; one that never
    reads is cut off two seconds later, so close() cannot hang on it."""
    prompter = FakePrompter(hold=True)
    pings = b"".join(b'{"v":1,"id":%d,"op":"ping"}\n' % n for n in range(2000))

    async def flood(server: BrokerServer, socks: tuple[socket.socket, ...]) -> None:
        """Send pings, never reading the pongs, until the server stops reading (whole
        frames: a partial send is completed before the next batch)."""
        rest = dict.fromkeys(socks, b"")
        async with asyncio.timeout(WAIT):
            while any(c.transport and c.transport.is_reading() for c in server.connections):
                for sock in socks:
                    data = rest[sock] or pings
                    with contextlib.suppress(BlockingIOError):
                        data = data[sock.send(data) :]
                    rest[sock] = data
                await asyncio.sleep(0.01)

    async def go() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        server = BrokerServer(setup.broker(prompter), base / "run" / "elevate.sock")
        await server.start()
        slow, never = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
        try:
            for sock in (slow, never):
                sock.setblocking(False)
                await loop.sock_connect(sock, str(server.path))
            request = json.dumps({"v": 1, **elevate(setup, "w")}).encode() + b"\n"
            await loop.sock_sendall(slow, request)
            await prompter.until(lambda: len(prompter.asked) == 1)
            async with asyncio.timeout(WAIT):
                while server.connection_count < 2:
                    await asyncio.sleep(0.01)
            await flood(server, (slow, never))

            async def read_late() -> bytes:
                while not server.broker.closing:
                    await asyncio.sleep(0.01)
                data = b""
                async with asyncio.timeout(WAIT):
                    with contextlib.suppress(ConnectionResetError):  # its pings unread
                        while chunk := await loop.sock_recv(slow, 65536):
                            data += chunk
                return data

            late = asyncio.create_task(read_late())
            started = time.monotonic()
            await server.close()
            took = time.monotonic() - started
            async with asyncio.timeout(WAIT):
                while server.connection_count:
                    await asyncio.sleep(0.01)
            return await late, took
        finally:
            slow.close()
            never.close()

    data, took = run(go)
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines[-1] == {
        "v": 1,
        "id": "w",
        "op": "decision",
        "decision": "deny",
        "reason": "the broker is shutting down",
        "by": "shutdown",
        "remember": None,
        "grant": None,
    }
    pongs = [f["id"] for f in lines if f["op"] == "pong"]
    assert len(pongs) == len(lines) - 2 and pongs == [n % 2000 for n in range(len(pongs))]
    assert 1.9 <= took < 2.9  # the peer that never reads held it until the two-second cut-off
