"""Registry tools as MCP tool definitions: schema unchanged, annotations from the flags."""

from __future__ import annotations

from typing import Any

from registry_core.mcp.listing import listing_key, mcp_tool, tool_listing
from registry_core.registry import Registry, Status, Tool, ToolDocs

ARGS = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}


def tool(name: str, status: Status = Status.AVAILABLE, **kw: Any) -> Tool:
    docs = ToolDocs("docs", kw.pop("args", ARGS))
    fields: dict[str, Any] = {"description": f"{name} does things.", "docs": docs, **kw}
    return Tool(name=name, source_file=f"/tools/{name}.meta", status=status, **fields)


def test_only_available_tools_are_listed_sorted() -> None:
    registry = Registry(
        {
            "b": tool("b"),
            "a": tool("a"),
            "hidden": tool("hidden", Status.HIDDEN),
            "broken": tool("broken", Status.BROKEN),
        }
    )
    assert [t.name for t in tool_listing(registry)] == ["a", "b"]


def test_input_schema_is_the_args_schema_unchanged() -> None:
    listed = mcp_tool(tool("reader", read_only=True))
    assert listed.inputSchema == ARGS
    assert listed.description == "reader does things."
    assert listed.annotations is not None
    assert listed.annotations.readOnlyHint is True
    assert listed.annotations.destructiveHint is None
    assert listed.annotations.title == "reader"


def test_a_schema_without_type_gets_object_and_the_tool_keeps_its_own() -> None:
    args = {"properties": {"n": {"type": "integer"}}}
    source = tool("untyped", args=args)
    assert mcp_tool(source).inputSchema == {"type": "object", **args}
    assert source.args == args  # never modified in place


def test_elevated_and_sudo_tools_say_they_ask_for_approval() -> None:
    for flags, note in (({"elevated": True}, "outside the sandbox"), ({"sudo": True}, "root")):
        listed = mcp_tool(tool("x", **flags))
        assert listed.annotations is not None
        assert listed.annotations.destructiveHint is True
        assert listed.annotations.readOnlyHint is False
        assert listed.annotations.title is not None
        assert "asks for approval" in listed.annotations.title
        assert note in listed.annotations.title
        assert listed.description is not None and "asks for approval" in listed.description


def test_listing_key_changes_with_what_clients_see_only() -> None:
    one = Registry({"a": tool("a")})
    same = Registry({"a": tool("a"), "h": tool("h", Status.HIDDEN)})
    edited = Registry({"a": tool("a", description="new words")})
    assert listing_key(one) == listing_key(same)
    assert listing_key(one) != listing_key(edited)
