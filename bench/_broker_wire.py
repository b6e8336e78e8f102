"""What bench/broker.py's clients send: elevate frames and a blocking line client."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
from pathlib import Path

from registry_core.broker.remember.policies import file_sha256
from registry_core.pinned import approved_argv
from registry_core.trusted import find_trusted


@functools.cache
def _argv(exe: Path) -> list[str]:
    """The argv the broker expects for ``exe`` (what the dispatcher would run:
    ``pinned.approved_argv``); any other is a mismatch a remembered allow never
    covers."""
    return approved_argv(find_trusted("python3") or "python3", file_sha256(exe), str(exe))


def elevate_frame(request_id: int | str, tool: str, exe: Path) -> bytes:
    message = {
        "v": 1,
        "id": request_id,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": _argv(exe),
        "args": {"path": "/home/someone/notes.txt", "text": "hello"},
        "cwd": "/home/someone/project",
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class LineClient:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        return self.reader.readline()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


class OneReply(asyncio.Protocol):
    """A client that sends one frame and keeps the first reply that is not a
    progress notice (``b""`` when the connection ends first).

    The bench's 5,000 concurrent clients share one process, which stands for
    5,000 agents' processes: this is the least a client can do per connection
    (no stream reader or writer objects)."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.frame)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if b'"op":"progress"' in line:
                continue
            if not self.reply.done():
                self.reply.set_result(line)
            self.transport.close()
            return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.reply.done():
            self.reply.set_result(b"")


async def connect_blocking_style(path: Path) -> socket.socket:
    """A connected socket, connecting as a blocking client does: while the listen
    backlog is full (EAGAIN), wait and try again.  (asyncio's own connect takes
    EAGAIN on a Unix socket for "in progress" and hands back a socket that never
    connected: ENOTCONN.)"""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        while True:
            try:
                sock.connect(str(path))
                return sock
            except BlockingIOError:
                await asyncio.sleep(0.001)
    except BaseException:
        sock.close()
        raise


async def one_request(path: Path, frame: bytes) -> bytes:
    """Connect to ``path``, send ``frame``, return the reply line (``b""``: none)."""
    sock = await connect_blocking_style(path)
    loop = asyncio.get_running_loop()
    try:
        _transport, client = await loop.create_unix_connection(lambda: OneReply(frame), sock=sock)
    except BaseException:
        sock.close()
        raise
    return await client.reply
