"""The ``tools/list`` cache: built once per registry snapshot, fresh after a change.

Real tools directories and the real :class:`RegistryLoader` (``refresh`` is
what the server's watcher calls); the server's own handlers are driven in
process through the SDK's in-memory client session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from registry_core.mcp.listing import ListingCache, mcp_tool
from registry_core.mcp.server import RegistryServer
from registry_core.registry import RegistryLoader

HIDDEN = {"description": "Never on this host.", "variants": [{"match": {"os": "darwin"}}]}


def _meta(tools: Path, name: str, meta: dict[str, Any] | str) -> Path:
    exe = tools / name
    exe.write_text("#!/bin/sh\ncat >/dev/null\necho ok\n")
    exe.chmod(0o755)
    path = tools / f"{name}.meta"
    path.write_text(meta if isinstance(meta, str) else json.dumps(meta))
    return path


def _environ(root: Path) -> dict[str, str]:
    for name in ("home", "tmp", "run", "config", "state", "cache", "cwd"):
        (root / name).mkdir(exist_ok=True)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "OLLIE_TOOLS_PATH": str(root / "tools"),
        "LANG": "C.UTF-8",
    }


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    _meta(directory, "alpha", {"description": "First.", "args": {"type": "object"}})
    _meta(directory, "beta", {"description": "Second.", "readOnly": True})
    _meta(directory, "hidden_tool", HIDDEN)
    _meta(directory, "broken_tool", '{"description": "broken",')
    return directory


def test_one_snapshot_is_listed_from_the_cache(tools: Path) -> None:
    loader = RegistryLoader([tools], env={"PATH": "/usr/bin:/bin"})
    registry = loader.load()
    cache = ListingCache()
    first = cache.listing(registry)
    assert [t["name"] for t in first.definitions] == ["alpha", "beta"]
    assert cache.listing(registry) is first


def test_a_meta_edit_gives_a_fresh_listing_and_keeps_the_unchanged_definitions(
    tools: Path,
) -> None:
    loader = RegistryLoader([tools], env={"PATH": "/usr/bin:/bin"})
    cache = ListingCache()
    before = {t["name"]: t for t in cache.listing(loader.load()).definitions}
    edited = _meta(tools, "alpha", {"description": "First, edited.", "readOnly": True})
    after = {t["name"]: t for t in cache.listing(loader.refresh([edited])).definitions}
    assert after["alpha"]["description"] == "First, edited."
    assert after["alpha"]["annotations"]["readOnlyHint"] is True
    assert after["beta"] is before["beta"]  # untouched tool: its definition is reused


def test_hidden_and_broken_tools_never_appear_even_after_they_were_listed(tools: Path) -> None:
    loader = RegistryLoader([tools], env={"PATH": "/usr/bin:/bin"})
    cache = ListingCache()
    assert [t["name"] for t in cache.listing(loader.load()).definitions] == ["alpha", "beta"]
    broken = _meta(tools, "alpha", "{not json")
    hidden = _meta(tools, "beta", HIDDEN)
    assert cache.listing(loader.refresh([broken, hidden])).definitions == []
    fixed = _meta(tools, "alpha", {"description": "Back."})
    assert [t["name"] for t in cache.listing(loader.refresh([fixed])).definitions] == ["alpha"]


def test_cached_definitions_equal_freshly_built_ones(tools: Path) -> None:
    registry = RegistryLoader([tools], env={"PATH": "/usr/bin:/bin"}).load()
    cached = ListingCache().listing(registry)
    fresh = [mcp_tool(t) for t in registry.available()]
    sent = cached.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert sent == {
        "tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in fresh]
    }
    assert cached.validated().tools == fresh


def test_a_call_of_an_unlisted_name_does_not_build_the_listing(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's ``call_tool`` decorator runs the whole listing handler for a name it
    has not seen listed; with thousands of tools that is a listing per such call."""
    server = RegistryServer(_environ(tools.parent), cwd=str(tools.parent / "cwd"))
    builds: list[int] = []
    original = ListingCache.listing

    def counting(self: ListingCache, registry: Any) -> Any:
        builds.append(1)
        return original(self, registry)

    monkeypatch.setattr(ListingCache, "listing", counting)

    async def main() -> None:
        async with create_connected_server_and_client_session(server.server) as client:
            for name in ("hidden_tool", "broken_tool", "no_such_tool"):
                result = await client.call_tool(name, {})
                assert result.isError
            assert builds == []
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["alpha", "beta"]
            assert builds == [1]

    try:
        anyio.run(main)
    finally:
        server.close()
