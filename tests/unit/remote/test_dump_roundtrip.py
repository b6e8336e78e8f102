"""``ollie-tools dump`` and its inverse: a registry another host resolved, rebuilt here."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from registry_core.cli import tools as tools_cli
from registry_core.paths import resources_dir
from registry_core.registry import Registry, RegistryLoader, Tool
from registry_core.registry.serialize import (
    error_json,
    registry_dump,
    registry_from_dump,
    tool_details,
    tool_from_details,
)

EXAMPLES = resources_dir() / "examples"


@pytest.fixture(scope="module")
def registry() -> Registry:
    dirs = [EXAMPLES / "tools", EXAMPLES / "broken", EXAMPLES / "shadowed"]
    return RegistryLoader(dirs, {"PATH": "/usr/bin:/bin"}).load()


def same(a: Tool, b: Tool) -> bool:
    """Equal, errors compared by value (MetaError is an exception: identity equality)."""
    return a._replace(errors=()) == b._replace(errors=()) and [error_json(e) for e in a.errors] == [
        error_json(e) for e in b.errors
    ]


def test_every_demo_tool_round_trips(registry: Registry) -> None:
    assert len(registry.tools) > 10
    statuses = {t.status.value for t in registry.all()}
    assert statuses == {"available", "hidden", "broken"}  # every kind is covered
    for tool in registry.all():
        details = json.loads(json.dumps(tool_details(tool)))  # through real JSON
        rebuilt = tool_from_details(details)
        assert same(rebuilt, tool), tool.name
        assert tool_details(rebuilt) == details


def test_a_whole_registry_round_trips(registry: Registry) -> None:
    dump = json.loads(json.dumps(registry_dump(registry, "buildbox")))
    rebuilt = registry_from_dump(dump)
    assert rebuilt.dirs == registry.dirs
    assert rebuilt.host["hostname"] == "buildbox"
    assert sorted(rebuilt.tools) == sorted(registry.tools)
    assert all(same(rebuilt.tools[n], registry.tools[n]) for n in registry.tools)
    assert [t.name for t in rebuilt.available()] == [t.name for t in registry.available()]


def test_unknown_formats_and_bad_objects_are_refused() -> None:
    with pytest.raises(ValueError, match="format"):
        registry_from_dump({"format": 99, "tools": []})
    with pytest.raises(KeyError):
        tool_from_details({"status": "available"})
    with pytest.raises(TypeError):
        tool_from_details({"name": 5, "source": "/x", "status": "available"})
    with pytest.raises(ValueError, match="sideways"):
        tool_from_details({"name": "x", "source": "/x", "status": "sideways"})


def test_ollie_tools_dump_prints_every_tool(
    monkeypatch: pytest.MonkeyPatch, registry: Registry
) -> None:
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(EXAMPLES / "tools"))
    out = io.StringIO()
    assert tools_cli.main(["dump", "--json"], out=out) == 0
    dump = json.loads(out.getvalue())
    assert dump["format"] == 1 and dump["dirs"] == [str(EXAMPLES / "tools")]
    names = {t["name"] for t in dump["tools"]}
    assert {"gpu_status", "greet", "whoami_root"} <= names
    assert Path(dump["tools"][0]["source"]).is_absolute()
    assert "variants" in dump["tools"][0] and "resolution" in dump["tools"][0]
