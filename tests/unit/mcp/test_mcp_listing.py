"""Registry tools as MCP tool definitions: schema unchanged, annotations from the flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from registry_core.mcp.listing import (
    ListingCache,
    listing_key,
    mcp_tool,
    tool_definition,
    tool_listing,
)
from registry_core.registry import Registry, RegistryLoader, Status, Tool, ToolDocs, scan_cache

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
        listed = mcp_tool(tool("x", read_only=True, **flags))
        assert listed.annotations is not None
        assert listed.annotations.destructiveHint is True
        assert listed.annotations.readOnlyHint is False
        assert listed.annotations.title is not None
        assert "asks for approval" in listed.annotations.title
        assert note in listed.annotations.title
        assert listed.description is not None and "asks for approval" in listed.description


def test_elevated_and_sudo_tools_are_never_listed_read_only() -> None:
    for flags in ({"elevated": True}, {"sudo": True}, {"sudo": True, "elevated": True}):
        sent = tool_definition(tool("x", read_only=True, **flags))
        assert sent["annotations"]["readOnlyHint"] is False
    assert tool_definition(tool("x", read_only=True))["annotations"]["readOnlyHint"] is True


def test_listing_key_changes_with_what_clients_see_only() -> None:
    one = Registry({"a": tool("a")})
    same = Registry({"a": tool("a"), "h": tool("h", Status.HIDDEN)})
    edited = Registry({"a": tool("a", description="new words")})
    assert listing_key(one) == listing_key(same)
    assert listing_key(one) != listing_key(edited)


def test_the_sent_definition_is_the_sdk_models_dump_for_every_flag_mix() -> None:
    """``tool_definition`` skips the SDK's models: it must give exactly their JSON."""
    for flags in (
        {},
        {"read_only": True},
        {"elevated": True},
        {"sudo": True},
        {"sudo": True, "elevated": True, "read_only": True},
        {"description": ""},
        {"description": "", "elevated": True},
        {"args": {"properties": {"n": {"type": "integer", "minimum": 0}}}},
    ):
        source = tool("t", **flags)
        sdk = mcp_tool(source).model_dump(by_alias=True, mode="json", exclude_none=True)
        assert tool_definition(source) == sdk, flags


def test_a_prepared_listing_is_sent_as_the_sdk_would_send_it() -> None:
    registry = Registry({"b": tool("b", sudo=True), "a": tool("a", read_only=True)})
    prepared = ListingCache().listing(registry)
    sdk = types.ServerResult(types.ListToolsResult(tools=tool_listing(registry)))
    for kwargs in (
        {"by_alias": True, "mode": "json", "exclude_none": True},  # what the SDK sends
        {},
        {"mode": "json"},
        {"by_alias": True, "mode": "json", "exclude_none": True, "exclude_unset": True},
    ):
        assert prepared.model_dump(**kwargs) == sdk.model_dump(**kwargs), kwargs
    sent = prepared.model_dump(by_alias=True, mode="json", exclude_none=True)
    sent["tools"] = []  # a receiver changing its copy changes nothing kept
    assert len(prepared.definitions) == 2


def test_deferred_schemas_are_decoded_like_json_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schemas the scan cache left unread are decoded by a faster parser; what json.loads
    accepts (big integers, a lone surrogate escape, duplicate keys) reads the same."""
    tools = tmp_path / "tools"
    tools.mkdir()
    texts = {
        "big": '{"args": {"type": "object", "maximum": 123456789012345678901234567890}}',
        "surrogate": '{"args": {"type": "object", "description": "\\ud800 lone"}}',
        "duplicate": '{"args": {"type": "object", "title": "one", "title": "two"}}',
        "floats": '{"args": {"type": "object", "minimum": 0.1, "maximum": 2.5e-7}}',
    }
    for name, text in texts.items():
        (tools / f"{name}.meta").write_text(text)
    monkeypatch.setattr(scan_cache, "SETTLE_NS", 0)  # keep files written just now
    env = {"PATH": "/usr/bin:/bin"}
    cache = tmp_path / "cache"
    RegistryLoader([tools], env=env, cache_dir=cache).load()  # writes the scan cache
    registry = RegistryLoader([tools], env=env, cache_dir=cache).load()
    assert not any(t.docs.decoded for t in registry.available())  # deferred: not read yet
    sent = {d["name"]: d["inputSchema"] for d in ListingCache().listing(registry).definitions}
    assert sent == {name: json.loads(text)["args"] for name, text in texts.items()}
