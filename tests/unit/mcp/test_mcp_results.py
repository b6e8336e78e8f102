"""Dispatcher results as MCP call results."""

from __future__ import annotations

from typing import Any

from mcp import types

from registry_core.dispatch.result import CallResult
from registry_core.mcp.results import call_result, content_item, error_result


def result(**kw: Any) -> CallResult:
    fields: dict[str, Any] = {
        "tool": "t",
        "exit_code": 0,
        "stdout": "out",
        "stderr": "",
        "content": [{"type": "text", "text": "out"}],
    }
    return CallResult(**{**fields, **kw})


def test_text_output_is_text_content_with_the_process_facts() -> None:
    mapped = call_result(result())
    assert mapped.isError is False
    assert mapped.content == [types.TextContent(type="text", text="out")]
    assert mapped.structuredContent is not None
    assert mapped.structuredContent["exit_code"] == 0
    assert mapped.structuredContent["stdout"] == "out"
    assert mapped.structuredContent["sandboxed"] is True


def test_image_blocks_become_image_content() -> None:
    block = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    item = content_item(block)
    assert isinstance(item, types.ImageContent)
    assert (item.data, item.mimeType) == ("aGk=", "image/png")


def test_a_block_mcp_cannot_carry_is_kept_as_its_json_text() -> None:
    item = content_item({"type": "hologram", "depth": 3})
    assert isinstance(item, types.TextContent)
    assert '"hologram"' in item.text


def test_a_failed_run_is_an_error_with_stderr_when_stdout_is_empty() -> None:
    failed = result(exit_code=2, stdout="", stderr="bad", content=[{"type": "text", "text": ""}])
    mapped = call_result(failed)
    assert mapped.isError is True
    assert any(isinstance(c, types.TextContent) and c.text == "bad" for c in mapped.content)
    assert mapped.structuredContent is not None
    assert mapped.structuredContent["exit_code"] == 2


def test_a_timeout_says_so_even_after_partial_output() -> None:
    timed = result(exit_code=124, timed_out=True, stderr="timed out after 1 s")
    mapped = call_result(timed)
    assert mapped.isError is True
    assert "timed out after 1 s" in [c.text for c in mapped.content if c.type == "text"]


def test_error_result_carries_the_reason_and_facts() -> None:
    mapped = error_result("denied: no", denied=True)
    assert mapped.isError is True
    assert mapped.content == [types.TextContent(type="text", text="denied: no")]
    assert mapped.structuredContent == {"error": "denied: no", "denied": True}
