"""The immutable snapshot and the agent-runtime API; JSON views (snapshot.py, serialize.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.errors import MetaError, ToolNotFoundError, ToolUnavailableError
from registry_core.registry.model import (
    ConditionResult,
    MetaWarning,
    Resolution,
    Status,
    Tier,
    Tool,
    ToolDocs,
    VariantResult,
)
from registry_core.registry.serialize import error_json, tool_details, tool_summary, warning_json
from registry_core.registry.snapshot import FunctionFormat, LoadedTool, Registry

ARGS = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}


def tool(name: str, status: Status = Status.AVAILABLE, **kw: Any) -> Tool:
    prompt = kw.pop("prompt", f"## {name}\n\nDocs.")
    docs = ToolDocs(prompt, kw.pop("args", ARGS))
    fields: dict[str, Any] = {"description": f"{name} does things.", "docs": docs, **kw}
    return Tool(name=name, source_file=f"/tools/{name}.meta", status=status, **fields)


HIDDEN = tool(
    "hidden_one",
    Status.HIDDEN,
    variants=(
        VariantResult(0, False, (ConditionResult("os", "plan9", False, "host os is linux"),)),
    ),
)
BROKEN = tool(
    "broken_one",
    Status.BROKEN,
    errors=(MetaError("/tools/broken_one.meta", "invalid JSON: Expecting value", 1, 1),),
)


@pytest.fixture
def registry() -> Registry:
    tools = [
        tool("zeta"),
        tool("alpha", args={"properties": {"q": {"type": "string"}}}),
        HIDDEN,
        BROKEN,
    ]
    return Registry({t.name: t for t in tools}, (Path("/tools"),), {"os": "linux"})


# --- listing ------------------------------------------------------------------------------------


def test_all_is_sorted_and_includes_every_status(registry: Registry) -> None:
    assert [t.name for t in registry.all()] == ["alpha", "broken_one", "hidden_one", "zeta"]
    assert len(registry) == 4
    assert "hidden_one" in registry
    assert "nope" not in registry


def test_available_lists_only_usable_tools(registry: Registry) -> None:
    assert [t.name for t in registry.available()] == ["alpha", "zeta"]


def test_listing_is_name_and_description_of_available_tools(registry: Registry) -> None:
    assert registry.listing() == [("alpha", "alpha does things."), ("zeta", "zeta does things.")]
    assert registry.listing_text() == "- alpha: alpha does things.\n- zeta: zeta does things."


def test_empty_registry() -> None:
    empty = Registry()
    assert empty.listing() == []
    assert empty.listing_text() == ""
    assert empty.function_definitions() == []


# --- load (the spec's tool_load) -----------------------------------------------------------------


def test_load_returns_prompt_and_args(registry: Registry) -> None:
    loaded = registry.load("zeta")
    assert loaded == LoadedTool("zeta", "zeta does things.", "## zeta\n\nDocs.", ARGS)


def test_load_returns_a_copy_of_the_schema(registry: Registry) -> None:
    loaded = registry.load("zeta")
    loaded.args["properties"]["evil"] = {}
    assert "evil" not in registry.get("zeta").args["properties"]


def test_load_unknown_name_raises_not_found(registry: Registry) -> None:
    with pytest.raises(ToolNotFoundError) as info:
        registry.load("nope")
    assert info.value.name == "nope"
    assert str(info.value) == "no tool named 'nope'"


def test_load_hidden_tool_raises_unavailable_with_reason(registry: Registry) -> None:
    with pytest.raises(ToolUnavailableError) as info:
        registry.load("hidden_one")
    assert info.value.status == "hidden"
    assert (
        info.value.reason == "no variant matches this host (variant 0: os plan9 → host os is linux)"
    )


def test_load_broken_tool_raises_unavailable_with_the_error(registry: Registry) -> None:
    with pytest.raises(ToolUnavailableError) as info:
        registry.load("broken_one")
    assert info.value.status == "broken"
    assert "/tools/broken_one.meta:1:1: invalid JSON" in info.value.reason


def test_get_returns_hidden_and_broken_tools_too(registry: Registry) -> None:
    assert registry.get("hidden_one") is HIDDEN
    with pytest.raises(ToolNotFoundError):
        registry.get("nope")


# --- function definitions -----------------------------------------------------------------------


def test_function_definitions_plain(registry: Registry) -> None:
    defs = registry.function_definitions()
    assert defs == [
        {
            "name": "alpha",
            "description": "alpha does things.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {"name": "zeta", "description": "zeta does things.", "parameters": ARGS},
    ]


def test_function_definitions_openai(registry: Registry) -> None:
    defs = registry.function_definitions(["zeta"], FunctionFormat.OPENAI)
    assert defs == [
        {
            "type": "function",
            "function": {"name": "zeta", "description": "zeta does things.", "parameters": ARGS},
        }
    ]


def test_function_definitions_anthropic(registry: Registry) -> None:
    defs = registry.function_definitions(["zeta"], FunctionFormat.ANTHROPIC)
    assert defs == [{"name": "zeta", "description": "zeta does things.", "input_schema": ARGS}]


def test_function_definitions_are_json_and_copies(registry: Registry) -> None:
    defs = registry.function_definitions()
    json.dumps(defs)
    defs[0]["parameters"]["properties"]["evil"] = {}
    assert "type" not in registry.get("alpha").args  # setdefault applied to the copy only
    assert "evil" not in registry.get("alpha").args["properties"]


def test_function_definitions_for_unusable_names_raise(registry: Registry) -> None:
    with pytest.raises(ToolUnavailableError):
        registry.function_definitions(["hidden_one"])
    with pytest.raises(ToolNotFoundError):
        registry.function_definitions(["nope"])


# --- immutability -------------------------------------------------------------------------------


def test_with_changes_returns_a_new_snapshot(registry: Registry) -> None:
    replacement = tool("zeta", description="new")
    new = registry.with_changes({"zeta": replacement, "hidden_one": None, "added": tool("added")})
    assert new is not registry
    assert new.get("zeta") is replacement
    assert "hidden_one" not in new
    assert "added" in new
    assert new.get("alpha") is registry.get("alpha")
    assert new.dirs == registry.dirs
    assert new.host == registry.host
    # The old one is untouched.
    assert registry.get("zeta").description == "zeta does things."
    assert "hidden_one" in registry
    assert "added" not in registry


def test_snapshot_and_tools_are_frozen(registry: Registry) -> None:
    with pytest.raises(AttributeError):
        registry.tools = {}  # type: ignore[misc]
    with pytest.raises(AttributeError):
        registry.get("zeta").description = "x"  # type: ignore[misc]


# --- serialize ----------------------------------------------------------------------------------


def test_tool_summary_keys_and_values() -> None:
    t = tool(
        "x",
        tier=Tier.WARM,
        read_only=True,
        executable_file="/tools/x",
        resolution=Resolution.TOOLS_DIR,
        variant=1,
    )
    summary = tool_summary(t)
    assert {"name", "status", "description", "tier", "readOnly", "executable", "variant"} <= set(
        summary
    )
    assert summary["name"] == "x"
    assert summary["status"] == "available"
    assert summary["description"] == "x does things."
    assert summary["tier"] == "warm"
    assert summary["readOnly"] is True
    assert summary["executable"] == "/tools/x"
    assert summary["variant"] == 1
    json.dumps(summary)


def test_tool_summary_of_a_hidden_tool() -> None:
    summary = tool_summary(HIDDEN)
    assert summary["status"] == "hidden"
    assert summary["executable"] is None
    assert summary["variant"] is None


def test_tool_details_has_everything() -> None:
    t = tool(
        "sys",
        sudo=True,
        elevated=False,
        cmd="sys_journald",
        variant=0,
        variants=(
            VariantResult(
                0,
                True,
                (ConditionResult("binary", "journalctl", True, "found at /usr/bin/journalctl"),),
                ("cmd",),
            ),
            VariantResult(
                1, False, (ConditionResult("file", "/var/log/syslog", False, "missing"),)
            ),
        ),
        executable_file="/tools/sys_journald",
        resolution=Resolution.CMD,
        resolution_detail="cmd sys_journald in the tools directory",
        warnings=(MetaWarning("/tools/sys.meta", "colour: unknown key", 3, 3),),
        shadowed_files=("/other/sys.meta",),
    )
    details = tool_details(t)
    required = {
        "name", "status", "source", "shadowed", "description", "prompt", "args", "tier",
        "readOnly", "sudo", "elevated", "variant", "variants", "executable", "resolution",
        "errors", "warnings",
    }  # fmt: skip
    assert required <= set(details)
    assert details["source"] == "/tools/sys.meta"
    assert details["shadowed"] == ["/other/sys.meta"]
    assert details["prompt"] == "## sys\n\nDocs."
    assert details["args"] == ARGS
    assert details["sudo"] is True
    assert details["elevated"] is False
    assert details["variant"] == 0
    assert details["resolution"] == "cmd"
    assert details["executable"] == "/tools/sys_journald"
    assert details["variants"][0]["index"] == 0
    assert details["variants"][0]["matched"] is True
    assert details["variants"][0]["conditions"] == [
        {
            "key": "binary",
            "value": "journalctl",
            "passed": True,
            "detail": "found at /usr/bin/journalctl",
        }
    ]
    assert details["variants"][1]["matched"] is False
    assert details["variants"][1]["conditions"][0]["detail"] == "missing"
    assert details["errors"] == []
    assert details["warnings"] == [
        {"path": "/tools/sys.meta", "line": 3, "column": 3, "message": "colour: unknown key"}
    ]
    json.dumps(details)


def test_tool_details_of_a_broken_tool() -> None:
    details = tool_details(BROKEN)
    assert details["status"] == "broken"
    assert details["resolution"] is None
    assert details["errors"] == [
        {
            "path": "/tools/broken_one.meta",
            "line": 1,
            "column": 1,
            "message": "invalid JSON: Expecting value",
        }
    ]


def test_error_and_warning_json_without_position() -> None:
    assert error_json(MetaError("/p", "m")) == {
        "path": "/p",
        "line": None,
        "column": None,
        "message": "m",
    }
    assert warning_json(MetaWarning("/p", "w")) == {
        "path": "/p",
        "line": None,
        "column": None,
        "message": "w",
    }
