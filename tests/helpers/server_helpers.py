"""Shared pieces of the broker server's unit tests: a client connection, a server.

Used by ``test_server_exact.py``, ``test_server_ops_exact.py`` and
``test_server_lifecycle_exact.py``.  Imported as a plain module: pytest puts this
test directory on ``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from core_helpers import WAIT, FakePrompter, Setup

from registry_core.broker.serve.server import BrokerServer


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
        "argv": list(setup.pinned(tool)),
        "args": {},
        "cwd": "/",
    }


def error(rid: object, code: str, message: str) -> dict[str, Any]:
    return {"v": 1, "id": rid, "op": "error", "code": code, "message": message}


def shutdown_denial(rid: object) -> dict[str, Any]:
    """The reply to a question still pending when the broker shuts down."""
    return {
        "v": 1,
        "id": rid,
        "op": "decision",
        "decision": "deny",
        "reason": "the broker is shutting down",
        "by": "shutdown",
        "remember": None,
        "grant": None,
    }
