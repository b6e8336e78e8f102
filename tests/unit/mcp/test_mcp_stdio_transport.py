"""The stdio transport writes what the SDK's would, only faster; reads the same way."""

from __future__ import annotations

import io
from typing import Any

import anyio
from mcp import types
from mcp.shared.message import SessionMessage

from registry_core.mcp.listing import ListingCache
from registry_core.mcp.stdio import encode, stdio_transport
from registry_core.registry import Registry, Status, Tool, ToolDocs


def _registry() -> Registry:
    def tool(name: str, **kw: Any) -> Tool:
        docs = ToolDocs("", {"type": "object", "properties": {"p": {"type": "string"}}})
        return Tool(name, f"/t/{name}.meta", Status.AVAILABLE, description="d", docs=docs, **kw)

    return Registry({"a": tool("a", read_only=True), "b": tool("b", sudo=True)})


def _messages() -> list[types.JSONRPCMessage]:
    listed = ListingCache().listing(_registry())
    result = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
    return [
        types.JSONRPCMessage(types.JSONRPCResponse(jsonrpc="2.0", id=3, result=result)),
        types.JSONRPCMessage(types.JSONRPCRequest(jsonrpc="2.0", id="x", method="ping")),
        types.JSONRPCMessage(
            types.JSONRPCNotification(
                jsonrpc="2.0", method="notifications/tools/list_changed", params=None
            )
        ),
        types.JSONRPCMessage(
            types.JSONRPCError(
                jsonrpc="2.0", id=4, error=types.ErrorData(code=-32602, message="bad ü", data=None)
            )
        ),
    ]


def test_each_message_is_written_as_the_sdk_writes_it() -> None:
    for message in _messages():
        assert encode(message) == message.model_dump_json(by_alias=True, exclude_none=True)


def test_lines_in_and_out() -> None:
    request = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    stdin = io.StringIO(f"{request}\nnot json at all\n")
    stdout = io.StringIO()
    got: list[SessionMessage | Exception] = []

    async def main() -> None:
        async with stdio_transport(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as (
            read,
            write,
        ):
            with anyio.fail_after(10):
                got.append(await read.receive())
                got.append(await read.receive())
                for message in _messages():
                    await write.send(SessionMessage(message))
                await write.aclose()
                async for _ in read:  # end of input ends the reader
                    pass
            await read.aclose()

    anyio.run(main)
    first, second = got
    assert isinstance(first, SessionMessage)
    assert isinstance(first.message.root, types.JSONRPCRequest)
    assert first.message.root.method == "ping"
    assert isinstance(second, Exception)  # handed to the session, which answers it
    written = stdout.getvalue().splitlines()
    assert written == [m.model_dump_json(by_alias=True, exclude_none=True) for m in _messages()]
