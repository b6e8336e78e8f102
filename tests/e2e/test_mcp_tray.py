"""``ollie-tools mcp`` with the real tray: an MCP client's elevated call, approved and denied.

The MCP client is the official SDK's ``ClientSession`` (named ``e2e-agent``
in its ``initialize``); the tool is the demo's ``write_protected_note``
(``elevated: true``).  The tray's dialog must name the client, and its
answer must come back as the call's result.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from e2e_driver import APPROVAL_TITLE, click_approve, find_window, texts_of
from e2e_harness import E2E
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "write_protected_note"
TITLE = APPROVAL_TITLE.format(tool=TOOL)
NOTE = "ollie-demo-note.txt"
CLIENT = "e2e-agent"
TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"


def call_through_mcp(
    e2e: E2E, env: dict[str, str], person: Callable[[], None]
) -> types.CallToolResult:
    """One ``tools/call`` from a fresh MCP session while ``person`` answers the dialog."""
    project = e2e.tmp / "project"
    project.mkdir(exist_ok=True)
    params = StdioServerParameters(command=str(TOOLS_CLI), args=["mcp"], env=env, cwd=str(project))
    results: list[types.CallToolResult] = []

    async def main() -> None:
        with (e2e.tmp / "mcp-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                info = types.Implementation(name=CLIENT, version="1")
                async with ClientSession(read, write, client_info=info) as session:
                    await session.initialize()

                    async def call() -> None:
                        results.append(await session.call_tool(TOOL, {"text": "via mcp"}))

                    with anyio.fail_after(60):
                        async with anyio.create_task_group() as group:
                            group.start_soon(call)
                            await anyio.to_thread.run_sync(person)

    anyio.run(main)
    [result] = results
    return result


def test_an_mcp_call_is_approved_in_the_tray_which_names_the_client(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    seen: list[str] = []

    def person() -> None:
        window = e2e.display.wait_window(TITLE)
        state = tray.wait_state(lambda s: find_window(s, "ApprovalDialog"), "the dialog")
        seen.extend(texts_of(state, "ApprovalDialog"))
        e2e.shot("mcp-approval", window)
        click_approve(e2e.display, tray)

    result = call_through_mcp(e2e, env, person)
    assert result.isError is False, result
    assert any(CLIENT in text and "as the requester says" in text for text in seen), seen
    assert (Path(env["HOME"]) / NOTE).read_text().rstrip().endswith("via mcp")
    e2e.display.wait_no_window(TITLE)


def test_an_mcp_call_denied_in_the_tray_is_an_error_result(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)

    def person() -> None:
        window = e2e.display.wait_window(TITLE)
        tray.wait_state(lambda s: find_window(s, "ApprovalDialog"), "the dialog")
        e2e.display.key(window, "alt+d")

    result = call_through_mcp(e2e, env, person)
    assert result.isError is True
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    assert "denied" in text
    assert not (Path(env["HOME"]) / NOTE).exists()
    e2e.display.wait_no_window(TITLE)
