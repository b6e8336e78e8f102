"""Registry tools as MCP tool definitions (``tools/list``).

Only *available* tools are listed (hidden and broken ones never appear); the
registry has already merged the matching variant's fields into each tool.
``inputSchema`` is the tool's ``args`` schema unchanged (with ``"type":
"object"`` added when the schema leaves it out, which MCP requires).
Annotations come from the tool's flags: ``readOnlyHint`` from ``readOnly``;
elevated and sudo tools are marked destructive, with a title saying that a
call asks the person for approval.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp import types

from registry_core.registry import Registry, Tool

ASKS_SANDBOX = "asks for approval: runs outside the sandbox"
ASKS_SUDO = "asks for approval: runs as root via sudo"


def approval_note(tool: Tool) -> str | None:
    """What calling ``tool`` asks of the person, or ``None`` for a plain sandboxed tool."""
    if tool.sudo:
        return ASKS_SUDO
    if tool.elevated:
        return ASKS_SANDBOX
    return None


def input_schema(tool: Tool) -> dict[str, Any]:
    schema = copy.deepcopy(dict(tool.args))
    schema.setdefault("type", "object")
    return schema


def tool_annotations(tool: Tool) -> types.ToolAnnotations:
    note = approval_note(tool)
    return types.ToolAnnotations(
        title=f"{tool.name} ({note})" if note else tool.name,
        readOnlyHint=tool.read_only,
        destructiveHint=True if note else None,
    )


def mcp_tool(tool: Tool) -> types.Tool:
    description = tool.description
    note = approval_note(tool)
    if note:
        description = f"{description} [{note}]" if description else f"[{note}]"
    return types.Tool(
        name=tool.name,
        description=description,
        inputSchema=input_schema(tool),
        annotations=tool_annotations(tool),
    )


def tool_listing(registry: Registry) -> list[types.Tool]:
    """Every available tool of ``registry``, sorted by name."""
    return [mcp_tool(tool) for tool in registry.available()]


def listing_key(registry: Registry) -> tuple[Any, ...]:
    """What a client sees of ``tools/list``: equal keys, no ``list_changed``."""
    return tuple(
        (t.name, t.description, t.docs, t.read_only, t.elevated, t.sudo)
        for t in registry.available()
    )
