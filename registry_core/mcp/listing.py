"""Registry tools as MCP tool definitions (``tools/list``).

Only *available* tools are listed (hidden and broken ones never appear); the
registry has already merged the matching variant's fields into each tool.
``inputSchema`` is the tool's ``args`` schema unchanged (with ``"type":
"object"`` added when the schema leaves it out, which MCP requires).
Annotations come from the tool's flags: ``readOnlyHint`` from ``readOnly``;
elevated and sudo tools are marked destructive, with a title saying that a
call asks the person for approval.

Speed: the schema is copied at its top level only (the one key added is
there), never deep-copied, and :class:`ListingCache` keeps each definition as
long as its registry tool is the same object: after a watcher refresh of one
``.meta`` only that tool's definition is built again (bench/mcp.py).
"""

from __future__ import annotations

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
    # A new top-level dict: the only key added is at the top, nested values are
    # shared with the registry and never changed (neither here nor by the SDK).
    schema = dict(tool.args)
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


class ListingCache:
    """``tools/list`` per registry snapshot, each definition kept while its tool is.

    Registry tools are immutable; a refresh replaces the ones it re-examined
    and keeps the others as the same objects, so identity says "unchanged".
    Only available tools are ever kept: a tool that turns hidden or broken
    leaves the listing and the cache at the next :meth:`listing`.
    """

    def __init__(self) -> None:
        self._snapshot: Registry | None = None
        self._listing: list[types.Tool] = []
        self._defs: dict[int, tuple[Tool, types.Tool]] = {}

    def listing(self, registry: Registry) -> list[types.Tool]:
        """The definitions of ``registry``'s available tools, sorted by name."""
        if registry is self._snapshot:
            return self._listing
        defs: dict[int, tuple[Tool, types.Tool]] = {}
        listing: list[types.Tool] = []
        for tool in registry.available():
            kept = self._defs.get(id(tool))
            # The id is only trusted while the kept tool is alive and is this one.
            made = kept[1] if kept is not None and kept[0] is tool else mcp_tool(tool)
            defs[id(tool)] = (tool, made)
            listing.append(made)
        self._snapshot, self._listing, self._defs = registry, listing, defs
        return listing


def listing_key(registry: Registry) -> tuple[Any, ...]:
    """What a client sees of ``tools/list``: equal keys, no ``list_changed``."""
    return tuple(
        (t.name, t.description, t.docs, t.read_only, t.elevated, t.sudo)
        for t in registry.available()
    )
