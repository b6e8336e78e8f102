"""The stdio transport: the SDK's, with each message written from its own model.

:func:`stdio_transport` moves the same bytes as the SDK's
``mcp.server.stdio.stdio_server`` (one JSON-RPC message per line, UTF-8,
undecodable input replaced, a line that is not a JSON-RPC message handed to
the session as an exception, which answers it) with one difference in *how* a
message is written: from ``message.root`` (the request, notification, response
or error model) instead of the ``JSONRPCMessage`` union around it.  The text
is the same (a root model's JSON is its root's JSON; a unit test holds them
equal), but pydantic's union serializer re-checks the whole payload against
the union's members first, which made writing a 4 MB ``tools/list`` response
cost five times as much as the writing itself (bench/mcp.py).

Parsing stays the SDK's own ``JSONRPCMessage.model_validate_json``; only the
byte moving is here.  Writes go through a worker thread, as in the SDK, so a
slow reader of a large response never blocks the loop.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


def encode(message: types.JSONRPCMessage) -> str:
    """One message as the line written for it (without the newline)."""
    return message.root.model_dump_json(by_alias=True, exclude_none=True)


@asynccontextmanager
async def stdio_transport(
    stdin: anyio.AsyncFile[str] | None = None, stdout: anyio.AsyncFile[str] | None = None
) -> AsyncIterator[Streams]:
    """(messages read, messages to write) over this process's stdin and stdout.

    The standard streams are re-wrapped as UTF-8 text (whatever the locale says)
    and never closed: they belong to the process.
    """
    if stdin is None:
        stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    if stdout is None:
        stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    source = stdin
    sink = stdout
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines() -> None:
        try:
            async with read_in:
                async for line in source:
                    try:
                        message = types.JSONRPCMessage.model_validate_json(line)
                    except Exception as exc:  # the session answers a malformed message
                        await read_in.send(exc)
                        continue
                    await read_in.send(SessionMessage(message))
        except anyio.ClosedResourceError:  # the session ended first
            await anyio.lowlevel.checkpoint()

    async def write_lines() -> None:
        try:
            async with write_out:
                async for outgoing in write_out:
                    await sink.write(encode(outgoing.message) + "\n")
                    await sink.flush()
        except anyio.ClosedResourceError:  # the session ended first
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        yield read_out, write_in
