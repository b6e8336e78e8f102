"""The broker server's start and close, on a real Unix socket.

Accept errors quieted, a long listen queue, a close that leaves another instance's
socket alone, waits for slow readers and cuts off peers that never read.

Written against the mutants of ``server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from core_helpers import WAIT, FakePrompter, Setup, run
from server_helpers import elevate, serving, shutdown_denial

from registry_core.broker.serve.server import BrokerServer, _Connection
from registry_core.file_lock import exclusive, lock_path_for

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

    with caplog.at_level(logging.ERROR, logger="registry_core.broker.serve.server"):
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
    assert lines[-1] == shutdown_denial("w")
    pongs = [f["id"] for f in lines if f["op"] == "pong"]
    assert len(pongs) == len(lines) - 2 and pongs == [n % 2000 for n in range(len(pongs))]
    assert 1.9 <= took < 2.9  # the peer that never reads held it until the two-second cut-off
