"""LiveRegistry: one scan, then file-system events; never a rescan per request."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from registry_core.registry.live import LiveRegistry
from registry_core.registry.loader import RegistryLoader
from registry_core.registry.snapshot import Registry


class CountingLoader(RegistryLoader):
    """The real loader, counting full scans."""

    loads = 0

    def load(self) -> Registry:
        self.loads += 1
        return super().load()


def _tool(directory: Path, name: str, description: str) -> None:
    (directory / f"{name}.meta").write_text(json.dumps({"description": description}))


def test_changes_arrive_without_a_rescan(tmp_path: Path) -> None:
    _tool(tmp_path, "a", "first")
    loader = CountingLoader([tmp_path], env={}, cache_dir=None)
    live = LiveRegistry(loader)
    try:
        assert live.watching
        first = live.current()
        assert live.current() is first  # nothing changed: the same snapshot
        _tool(tmp_path, "a", "edited")
        _tool(tmp_path, "b", "new")
        second = live.current()
        assert second.tools["a"].description == "edited"
        assert second.tools["b"].description == "new"
        (tmp_path / "a.meta").unlink()
        assert set(live.current().tools) == {"b"}
        assert loader.loads == 1
    finally:
        live.close()


def test_a_directory_that_appears_later_is_watched(tmp_path: Path) -> None:
    later = tmp_path / "later"
    _tool(tmp_path, "a", "first")
    live = LiveRegistry(RegistryLoader([later, tmp_path], env={}, cache_dir=None))
    try:
        assert live.current().tools["a"].description == "first"
        later.mkdir()
        _tool(later, "a", "shadowing")
        assert live.current().tools["a"].description == "shadowing"
        _tool(later, "a", "shadowing, edited")  # watched now: the edit is an event
        assert live.current().tools["a"].description == "shadowing, edited"
        shutil.rmtree(later)
        assert live.current().tools["a"].description == "first"
        later.mkdir()  # removed and made again: watched again
        _tool(later, "c", "back")
        assert "c" in live.current().tools
        _tool(later, "c", "back, edited")
        assert live.current().tools["c"].description == "back, edited"
    finally:
        live.close()


def test_the_headless_broker_keeps_one_snapshot_between_requests(tmp_path: Path) -> None:
    from registry_core.broker.headless import build_broker

    tools = tmp_path / "tools"
    tools.mkdir()
    _tool(tools, "a", "first")
    env = {
        "OLLIE_TOOLS_PATH": str(tools),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "HOME": str(tmp_path),
    }
    broker = build_broker(env, "none")
    first = broker.registry()
    assert broker.registry() is first  # no rescan for a request
    _tool(tools, "a", "edited")
    assert broker.registry().tools["a"].description == "edited"


def test_a_full_load_by_anyone_is_what_the_next_request_gets(tmp_path: Path) -> None:
    # The tray's periodic rescan and the Tool Browser's reload call loader.load();
    # the brokers' registry is the loader's own snapshot, not a copy of its own.
    _tool(tmp_path, "a", "first")
    loader = RegistryLoader([tmp_path], env={}, cache_dir=None)
    live = LiveRegistry(loader)
    try:
        assert live.current() is loader.current
        reloaded = loader.load()
        assert live.current() is reloaded
        assert live.fileno() is not None
    finally:
        live.close()
