"""Registry tools as MCP tool definitions (``tools/list``).

Only *available* tools are listed (hidden and broken ones never appear); the
registry has already merged the matching variant's fields into each tool.
``inputSchema`` is the tool's ``args`` schema unchanged (with ``"type":
"object"`` added when the schema leaves it out, which MCP requires).
Annotations come from the tool's flags: ``readOnlyHint`` from ``readOnly``
(never true for elevated and sudo tools: they run outside the sandbox, so no
client may take them for harmless); elevated and sudo tools are marked
destructive, with a title saying that a call asks the person for approval.

Speed (bench/mcp.py): a listing of thousands of tools is served as plain
JSON-ready dicts, never as the SDK's pydantic models: :func:`tool_definition`
builds exactly what ``mcp_tool(tool).model_dump(by_alias=True, mode="json",
exclude_none=True)`` gives (a unit test holds them equal), and
:class:`ListedTools` hands the SDK that dump instead of having it walk ten
thousand models.  :class:`ListingCache` keeps one prepared result per
registry snapshot and each definition as long as its registry tool is the
same object: after a watcher refresh of one ``.meta`` only that tool's
definition is built again.  Schemas the cold load left unread are decoded
with pydantic-core's JSON parser (about three times as fast as
:func:`json.loads`; the SDK depends on it); the schema is copied at its top
level only (the one key added is there), never deep-copied.
"""

from __future__ import annotations

import gc
import json
from typing import Any

import pydantic_core
from mcp import types
from pydantic import PrivateAttr

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
        readOnlyHint=tool.read_only and note is None,
        destructiveHint=True if note else None,
    )


def listed_description(tool: Tool) -> str | None:
    """The tool's description, with what calling it asks of the person appended."""
    description = tool.description
    note = approval_note(tool)
    if note:
        description = f"{description} [{note}]" if description else f"[{note}]"
    return description


def mcp_tool(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=listed_description(tool),
        inputSchema=input_schema(tool),
        annotations=tool_annotations(tool),
    )


def tool_listing(registry: Registry) -> list[types.Tool]:
    """Every available tool of ``registry``, sorted by name, as SDK models."""
    return [mcp_tool(tool) for tool in registry.available()]


def _loads(data: bytes) -> Any:
    """pydantic-core's parser; :func:`json.loads` for what it refuses (a lone surrogate
    escape, which :func:`json.loads` accepts), so both give the same documents."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return json.loads(data)


def tool_definition(tool: Tool) -> dict[str, Any]:
    """``mcp_tool(tool)`` as the SDK would send it, built without the models."""
    tool.docs.decode_with(_loads)
    note = approval_note(tool)
    description = listed_description(tool)
    annotations: dict[str, Any] = {
        "title": f"{tool.name} ({note})" if note else tool.name,
        "readOnlyHint": tool.read_only and note is None,
    }
    if note:
        annotations["destructiveHint"] = True
    definition: dict[str, Any] = {"name": tool.name}
    if description is not None:
        definition["description"] = description
    definition["inputSchema"] = input_schema(tool)
    definition["annotations"] = annotations
    return definition


class ListedTools(types.ServerResult):
    """A ``tools/list`` result whose JSON form is prepared once.

    The SDK sends a handler's result as ``result.model_dump(by_alias=True,
    mode="json", exclude_none=True)``; for this result that is the prepared
    dump (a new top-level dict each time; the definitions inside are shared and
    never changed), so ten thousand tools are not rebuilt as models and walked
    again per listing.  Any other dump goes the SDK's own way through a
    validated :class:`~mcp.types.ListToolsResult`.
    """

    _dump: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, definitions: list[dict[str, Any]]) -> ListedTools:
        made = cls.model_construct(types.ListToolsResult.model_construct(tools=[]))
        made._dump = {"tools": definitions}
        return made

    @property
    def definitions(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self._dump["tools"]
        return tools

    def validated(self) -> types.ListToolsResult:
        """The result as the SDK's model (slow: every definition validated)."""
        return types.ListToolsResult.model_validate(self._dump)

    def model_dump(self, **kwargs: Any) -> Any:
        sdk_form = kwargs.get("mode") == "json" and kwargs.get("by_alias") is True
        if sdk_form and kwargs.get("exclude_none") is True and set(kwargs) == _SDK_DUMP_KEYS:
            return dict(self._dump)
        return types.ServerResult(self.validated()).model_dump(**kwargs)


_SDK_DUMP_KEYS = frozenset({"mode", "by_alias", "exclude_none"})


class ListingCache:
    """``tools/list`` per registry snapshot, each definition kept while its tool is.

    Registry tools are immutable; a refresh replaces the ones it re-examined
    and keeps the others as the same objects, so identity says "unchanged".
    Only available tools are ever kept: a tool that turns hidden or broken
    leaves the listing and the cache at the next :meth:`listing`.
    """

    def __init__(self) -> None:
        self._snapshot: Registry | None = None
        self._listing = ListedTools.of([])
        self._defs: dict[int, tuple[Tool, dict[str, Any]]] = {}

    def listing(self, registry: Registry) -> ListedTools:
        """The result listing ``registry``'s available tools, sorted by name."""
        if registry is self._snapshot:
            return self._listing
        # As RegistryLoader.load: everything built here lives on with the listing; the
        # cyclic collector would only rescan it and the registry, again and again.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._build(registry)
        finally:
            if collecting:
                gc.enable()

    def _build(self, registry: Registry) -> ListedTools:
        defs: dict[int, tuple[Tool, dict[str, Any]]] = {}
        listing: list[dict[str, Any]] = []
        for tool in registry.available():
            kept = self._defs.get(id(tool))
            # The id is only trusted while the kept tool is alive and is this one.
            made = kept[1] if kept is not None and kept[0] is tool else tool_definition(tool)
            defs[id(tool)] = (tool, made)
            listing.append(made)
        self._snapshot, self._listing, self._defs = registry, ListedTools.of(listing), defs
        return self._listing


def listing_key(registry: Registry) -> tuple[Any, ...]:
    """What a client sees of ``tools/list``: equal keys, no ``list_changed``."""
    return tuple(
        (t.name, t.description, t.docs, t.read_only, t.elevated, t.sudo)
        for t in registry.available()
    )
