"""Dispatcher results and refusals as MCP ``tools/call`` results.

The tool's content blocks (its text, or its own ``{"content": [...]}``
structured output) become MCP content items; a block MCP cannot carry is
passed on as its JSON text, never dropped.  ``structuredContent`` keeps
stdout, stderr, the exit code and how the tool ran.  Every failure -- a bad
argument, a denial, a tool error, a timeout -- is a result with ``isError``
set and the reason as text: the model reads it; the session goes on.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types
from pydantic import TypeAdapter, ValidationError

from registry_core.dispatch.output import ContentBlock
from registry_core.dispatch.result import CallResult

_CONTENT: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


def content_item(block: ContentBlock) -> types.ContentBlock:
    """One MCP content item for a tool's content block (text, image, audio, resource...)."""
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return types.TextContent(type="text", text=block["text"])
    try:
        return _CONTENT.validate_python(block)
    except ValidationError:
        return types.TextContent(type="text", text=json.dumps(block, ensure_ascii=False))


def structured(result: CallResult) -> dict[str, Any]:
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "sandboxed": result.sandboxed,
        "elevated": result.elevated,
        "sudo": result.sudo,
        "duration": round(result.duration, 6),
    }


def call_result(result: CallResult) -> types.CallToolResult:
    content = [content_item(block) for block in result.content]
    if not result.ok:
        error = result.error
        if not any(isinstance(c, types.TextContent) and c.text.strip() for c in content):
            content = [types.TextContent(type="text", text=error), *content]
        elif result.timed_out:
            content.append(types.TextContent(type="text", text=error))
    return types.CallToolResult(
        content=content, structuredContent=structured(result), isError=not result.ok
    )


def error_result(message: str, **facts: Any) -> types.CallToolResult:
    """A call refused or failed before (or instead of) the tool's own result."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structuredContent={"error": message, **facts},
        isError=True,
    )
