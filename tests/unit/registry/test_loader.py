"""Discovery, bad input, shadowing and incremental reload (registry_core.registry.loader)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry_core.registry import loader as loader_mod
from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.loader import RegistryLoader, load_registry
from registry_core.registry.meta import MAX_META_BYTES, ParsedMeta, parse_meta
from registry_core.registry.model import Resolution, Status, Tool

GOOD = {
    "description": "A good tool.",
    "prompt": "## good\n\nWorks.",
    "args": {"type": "object", "properties": {"x": {"type": "string"}}},
    "readOnly": True,
}


def write_meta(directory: Path, name: str, doc: dict[str, Any] | str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.meta"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2), encoding="utf-8")
    return path


def make_exe(path: Path, mode: int = 0o755) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def env_for(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "HOME": str(tmp_path)}


def new_loader(tmp_path: Path, *dirs: Path) -> RegistryLoader:
    return RegistryLoader(list(dirs), env=env_for(tmp_path))


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    return d


@pytest.fixture
def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files ``parse_meta`` was called for, in order."""
    calls: list[str] = []
    real = parse_meta

    def counting(path: Path, data: bytes, name: str | None = None) -> ParsedMeta:
        calls.append(Path(path).name)
        return real(path, data, name)

    monkeypatch.setattr(loader_mod, "parse_meta", counting)
    return calls


# --- discovery ---------------------------------------------------------------------------


def test_discovers_every_meta_file_and_only_those(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "alpha", GOOD)
    write_meta(tools, "beta", {"description": "b"})
    make_exe(tools / "alpha")
    (tools / "notes.txt").write_text("not a tool")
    (tools / "meta").write_text("{}")
    registry = new_loader(tmp_path, tools).load()
    assert sorted(registry.tools) == ["alpha", "beta"]
    alpha = registry.get("alpha")
    assert alpha.status is Status.AVAILABLE
    assert alpha.source == tools / "alpha.meta"
    assert alpha.executable == tools / "alpha"
    assert alpha.resolution is Resolution.TOOLS_DIR


def test_missing_directory_is_no_tools_not_an_error(tmp_path: Path) -> None:
    registry = new_loader(tmp_path, tmp_path / "nope").load()
    assert len(registry) == 0


def test_directories_are_made_absolute(
    tmp_path: Path, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_meta(tools, "alpha", GOOD)
    make_exe(tools / "alpha")
    monkeypatch.chdir(tmp_path)
    loader = RegistryLoader([Path("tools")], env=env_for(tmp_path))
    assert loader.dirs == (tools,)
    assert loader.load().get("alpha").executable == tools / "alpha"


def test_default_dirs_come_from_ollie_tools_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_meta(a, "one", GOOD)
    write_meta(b, "two", GOOD)
    env = {**env_for(tmp_path), "OLLIE_TOOLS_PATH": f"{a}::{b}"}
    loader = RegistryLoader(env=env)
    assert loader.dirs == (a, b)
    assert sorted(loader.load().tools) == ["one", "two"]
    assert sorted(load_registry(env=env).tools) == ["one", "two"]


def test_default_dir_is_xdg_config_home(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    write_meta(config / "ollie" / "tools", "one", GOOD)
    env = {**env_for(tmp_path), "XDG_CONFIG_HOME": str(config)}
    loader = RegistryLoader(env=env)
    assert loader.dirs == (config / "ollie" / "tools",)
    assert list(loader.load().tools) == ["one"]


def test_env_is_used_for_path_lookups(tmp_path: Path, tools: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = make_exe(bindir / "onpath")
    write_meta(tools, "onpath", GOOD)
    registry = RegistryLoader([tools], env={"PATH": str(bindir)}).load()
    assert registry.get("onpath").executable == exe
    assert registry.get("onpath").resolution is Resolution.PATH


def test_facts_factory_is_used_per_scan(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "mac", {"variants": [{"match": {"os": "darwin"}}]})
    made: list[HostFacts] = []

    def factory() -> HostFacts:
        made.append(HostFacts(os_name="darwin", arch="arm64", env={}, simulated=True))
        return made[-1]

    loader = RegistryLoader([tools], env={}, facts_factory=factory)
    registry = loader.load()
    assert registry.get("mac").status is Status.AVAILABLE
    assert registry.host["simulated"] is True
    loader.load()
    assert len(made) == 2


# --- each kind of bad input: that tool broken, all others unaffected --------------------------

BAD_TEXT: dict[str, tuple[str, str, tuple[int, int] | None]] = {
    # name: (file content, expected message fragment, expected (line, col) or None)
    "bad_json": (
        '{\n  "description": "x"\n  "tier": "hot"\n}',
        "invalid JSON: Expecting ','",
        (3, 3),
    ),
    "wrong_type": (
        '{\n  "readOnly": "yes"\n}',
        'readOnly: must be true or false, not "yes"',
        (2, 3),
    ),
    "unknown_tier": ('{"tier": "lukewarm"}', 'tier: unknown tier "lukewarm"', (1, 2)),
    "bad_schema": ('{"args": {"type": "strin"}}', "args.type: not a valid JSON Schema", (1, 11)),
    "args_not_object": (
        '{"args": ["x"]}',
        "args: must be a JSON Schema object, not an array",
        (1, 2),
    ),
    "not_object": ("[1, 2]", "the top level must be a JSON object, not an array", None),
    "bad_match": (
        '{"variants": [{"match": {"distro": "debian"}}]}',
        "variants[0].match.distro: unknown match key 'distro'",
        (1, 26),
    ),
    "empty": ("", "invalid JSON: Expecting value", (1, 1)),
}


def write_good(directory: Path) -> Path:
    """The "good" tool: a valid .meta with its co-located executable."""
    path = write_meta(directory, "good", GOOD)
    make_exe(directory / "good")
    return path


def _assert_good_unaffected(tmp_path: Path, tools: Path, registry_tools: dict[str, Tool]) -> None:
    alone_dir = tmp_path / "alone"
    write_good(alone_dir)
    alone = new_loader(tmp_path, alone_dir).load().get("good")
    good = registry_tools["good"]
    assert good.status is Status.AVAILABLE
    assert good.executable == tools / "good"
    assert good.resolution is alone.resolution is Resolution.TOOLS_DIR
    assert good.description == alone.description
    assert good.prompt == alone.prompt
    assert good.args == alone.args
    assert good.read_only is alone.read_only
    assert good.warnings == ()
    assert good.errors == ()


@pytest.mark.parametrize("name", list(BAD_TEXT))
def test_bad_content_breaks_only_that_tool(tmp_path: Path, tools: Path, name: str) -> None:
    text, fragment, position = BAD_TEXT[name]
    bad_path = write_meta(tools, name, text)
    write_good(tools)
    registry = new_loader(tmp_path, tools).load()
    bad = registry.get(name)
    assert bad.status is Status.BROKEN
    assert bad.source == bad_path
    (err,) = bad.errors
    assert err.path == str(bad_path)
    assert fragment in err.message
    assert (err.line, err.column) == (position or (None, None))
    assert fragment in bad.problem
    assert name not in [t.name for t in registry.available()]
    _assert_good_unaffected(tmp_path, tools, dict(registry.tools))


def _non_utf8(tools: Path) -> Path:
    path = tools / "latin1.meta"
    path.write_bytes(b'{"description": "caf\xe9"}')
    return path


def _too_big(tools: Path) -> Path:
    path = tools / "huge.meta"
    path.write_bytes(b'{"description": "' + b"x" * MAX_META_BYTES + b'"}')
    return path


def _dangling(tools: Path) -> Path:
    path = tools / "dangling.meta"
    path.symlink_to(tools / "gone.json")
    return path


def _directory(tools: Path) -> Path:
    path = tools / "x.meta"
    path.mkdir()
    return path


def _fifo(tools: Path) -> Path:
    path = tools / "pipe.meta"
    os.mkfifo(path)
    return path


def _hidden_name(tools: Path) -> Path:
    return write_meta(tools, ".hidden", GOOD)


def _spaced_name(tools: Path) -> Path:
    return write_meta(tools, "bad name", GOOD)


def _symlink_loop(tools: Path) -> Path:
    path = tools / "loop.meta"
    path.symlink_to(path)
    return path


BAD_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "non_utf8": (_non_utf8, "not valid UTF-8"),
    "too_big": (_too_big, "over the 1 MiB limit"),
    "dangling": (_dangling, "dangling symlink to "),
    "directory": (_directory, "not a regular file"),
    "fifo": (_fifo, "not a regular file"),
    "hidden_name": (_hidden_name, "must not start with '.'"),
    "spaced_name": (_spaced_name, "may only contain letters, digits"),
    "symlink_loop": (_symlink_loop, "cannot "),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_files_break_only_that_tool(tmp_path: Path, tools: Path, kind: str) -> None:
    make, fragment = BAD_FILES[kind]
    bad_path = make(tools)
    write_good(tools)
    registry = new_loader(tmp_path, tools).load()
    name = bad_path.name.removesuffix(".meta")
    bad = registry.get(name)
    assert bad.status is Status.BROKEN
    (err,) = bad.errors
    assert err.path == str(bad_path)
    assert fragment in err.message
    _assert_good_unaffected(tmp_path, tools, dict(registry.tools))


def test_dangling_symlink_names_its_target(tmp_path: Path, tools: Path) -> None:
    _dangling(tools)
    (err,) = new_loader(tmp_path, tools).load().get("dangling").errors
    assert err.message == f"dangling symlink to {tools / 'gone.json'}"


def test_too_big_file_reports_its_size(tmp_path: Path, tools: Path) -> None:
    path = _too_big(tools)
    (err,) = new_loader(tmp_path, tools).load().get("huge").errors
    assert err.message == f"file is {path.stat().st_size} bytes, over the 1 MiB limit"


def test_unreadable_file_is_broken(tmp_path: Path, tools: Path) -> None:
    path = write_meta(tools, "secret", GOOD)
    write_meta(tools, "good", GOOD)
    path.chmod(0)
    try:
        registry = new_loader(tmp_path, tools).load()
    finally:
        path.chmod(0o644)
    if os.geteuid() == 0:
        # root reads mode-000 files; the unreadable path is covered by x.meta/dir tests.
        assert registry.get("secret").status is Status.AVAILABLE
    else:
        secret = registry.get("secret")
        assert secret.status is Status.BROKEN
        assert secret.errors[0].message == "cannot read: permission denied"
    assert registry.get("good").status is Status.AVAILABLE


def test_symlink_to_a_valid_meta_is_followed(tmp_path: Path, tools: Path) -> None:
    target = write_meta(tmp_path / "elsewhere", "real", GOOD)
    (tools / "linked.meta").symlink_to(target)
    tool = new_loader(tmp_path, tools).load().get("linked")
    assert tool.status is Status.AVAILABLE
    assert tool.source == tools / "linked.meta"


def test_unknown_keys_are_warnings_not_errors(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "extra", '{\n  "description": "d",\n  "colour": "red"\n}')
    tool = new_loader(tmp_path, tools).load().get("extra")
    assert tool.status is Status.AVAILABLE
    (warning, no_exe) = tool.warnings
    assert (warning.line, warning.column) == (3, 3)
    assert warning.message == "colour: unknown key 'colour' (ignored)"
    assert no_exe.message.startswith("no executable: ")


def test_many_broken_files_never_hide_good_ones(tmp_path: Path, tools: Path) -> None:
    for i, (text, _, _) in enumerate(BAD_TEXT.values()):
        write_meta(tools, f"bad{i}", text)
    for i in range(5):
        write_meta(tools, f"good{i}", GOOD)
    registry = new_loader(tmp_path, tools).load()
    assert [t.name for t in registry.available()] == [f"good{i}" for i in range(5)]
    assert all(t.status is Status.BROKEN for n, t in registry.tools.items() if n.startswith("bad"))


# --- shadowing ------------------------------------------------------------------------------


def test_earlier_directory_shadows_later_ones(tmp_path: Path) -> None:
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    winner = write_meta(first, "greet", {"description": "first"})
    later = write_meta(second, "greet", {"description": "second"})
    last = write_meta(third, "greet", {"description": "third"})
    write_meta(second, "only_second", {"description": "s"})
    registry = new_loader(tmp_path, first, second, third).load()
    greet = registry.get("greet")
    assert greet.description == "first"
    assert greet.source == winner
    assert greet.shadowed == (later, last)
    assert registry.get("only_second").shadowed == ()


def test_shadowing_resolves_the_colocated_executable_of_the_winner(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_meta(first, "greet", GOOD)
    write_meta(second, "greet", GOOD)
    make_exe(second / "greet")
    greet = new_loader(tmp_path, first, second).load().get("greet")
    # The co-located executable is looked up in the winner's own directory only.
    assert greet.executable is None


def test_a_broken_earlier_file_still_shadows(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_meta(first, "greet", "{oops")
    later = write_meta(second, "greet", GOOD)
    greet = new_loader(tmp_path, first, second).load().get("greet")
    assert greet.status is Status.BROKEN
    assert greet.shadowed == (later,)


# --- incremental reload ---------------------------------------------------------------------------


def test_second_load_reuses_the_parse_cache(
    tmp_path: Path, tools: Path, count_parses: list[str]
) -> None:
    for name in ("a", "b", "c"):
        write_meta(tools, name, GOOD)
    loader = new_loader(tmp_path, tools)
    first = loader.load()
    assert sorted(count_parses) == ["a.meta", "b.meta", "c.meta"]
    second = loader.load()
    assert sorted(count_parses) == ["a.meta", "b.meta", "c.meta"]
    assert second.tools == first.tools


def test_editing_one_file_reparses_only_that_one(
    tmp_path: Path, tools: Path, count_parses: list[str]
) -> None:
    for name in ("a", "b", "c"):
        write_meta(tools, name, GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    count_parses.clear()
    write_meta(tools, "b", {**GOOD, "description": "edited, and longer than before"})
    registry = loader.load()
    assert count_parses == ["b.meta"]
    assert registry.get("b").description == "edited, and longer than before"


def test_same_size_same_mtime_rewrite_is_still_noticed(
    tmp_path: Path, tools: Path, count_parses: list[str]
) -> None:
    path = write_meta(tools, "a", {"description": "aaaa"})
    before = path.stat()
    loader = new_loader(tmp_path, tools)
    loader.load()
    path.write_text(json.dumps({"description": "bbbb"}, indent=2))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert loader.load().get("a").description == "bbbb"
    assert count_parses == ["a.meta", "a.meta"]


def test_refresh_replaces_only_the_named_tool(
    tmp_path: Path, tools: Path, count_parses: list[str]
) -> None:
    for name in ("a", "b", "c"):
        write_meta(tools, name, GOOD)
    loader = new_loader(tmp_path, tools)
    old = loader.load()
    count_parses.clear()
    path = write_meta(tools, "b", {**GOOD, "description": "new b"})
    new = loader.refresh([path])
    assert count_parses == ["b.meta"]
    assert new.get("b").description == "new b"
    assert new.get("a") is old.get("a")
    assert new.get("c") is old.get("c")
    assert loader.current is new


def test_refresh_of_an_unchanged_file_does_not_reparse(
    tmp_path: Path, tools: Path, count_parses: list[str]
) -> None:
    path = write_meta(tools, "a", GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    loader.refresh([path])
    assert count_parses == ["a.meta"]


def test_refresh_after_delete_removes_the_tool(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    gone = write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    old = loader.load()
    gone.unlink()
    new = loader.refresh([gone])
    assert sorted(new.tools) == ["a"]
    assert new.get("a") is old.get("a")
    assert "b" in old


def test_refresh_after_add_adds_the_tool(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    added = write_meta(tools, "z", GOOD)
    assert sorted(loader.refresh([added]).tools) == ["a", "z"]


def test_load_after_delete_and_add(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    gone = write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    gone.unlink()
    write_meta(tools, "c", GOOD)
    assert sorted(loader.load().tools) == ["a", "c"]


def test_refresh_of_a_deleted_shadowing_file_reveals_the_later_one(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    front = write_meta(first, "greet", {"description": "first"})
    write_meta(second, "greet", {"description": "second"})
    loader = new_loader(tmp_path, first, second)
    loader.load()
    front.unlink()
    greet = loader.refresh([front]).get("greet")
    assert greet.description == "second"
    assert greet.shadowed == ()


def test_refresh_of_a_new_shadowing_file(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    back = write_meta(second, "greet", {"description": "second"})
    loader = new_loader(tmp_path, first, second)
    loader.load()
    front = write_meta(first, "greet", {"description": "first"})
    greet = loader.refresh([front]).get("greet")
    assert greet.description == "first"
    assert greet.shadowed == (back,)


def test_refresh_of_a_colocated_executable(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    old = loader.load()
    assert old.get("a").executable is None
    exe = make_exe(tools / "a")
    new = loader.refresh([exe])
    assert new.get("a").executable == exe
    assert new.get("a").resolution is Resolution.TOOLS_DIR
    assert new.get("b") is old.get("b")


def test_refresh_of_a_whole_directory(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    gone = write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    gone.unlink()
    write_meta(tools, "c", GOOD)
    assert sorted(loader.refresh([tools]).tools) == ["a", "c"]


def test_refresh_ignores_paths_outside_the_tools_dirs(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    loader = new_loader(tmp_path, tools)
    old = loader.load()
    other = write_meta(tmp_path / "elsewhere", "x", GOOD)
    new = loader.refresh([other])
    assert new.tools == old.tools


def test_refresh_of_a_file_that_became_broken(tmp_path: Path, tools: Path) -> None:
    path = write_meta(tools, "a", GOOD)
    write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    loader.load()
    path.write_text("{nope")
    new = loader.refresh([path])
    assert new.get("a").status is Status.BROKEN
    assert new.get("b").status is Status.AVAILABLE


def test_old_snapshot_is_unchanged_after_reload(tmp_path: Path, tools: Path) -> None:
    write_meta(tools, "a", GOOD)
    path = write_meta(tools, "b", GOOD)
    loader = new_loader(tmp_path, tools)
    old = loader.load()
    old_tools = dict(old.tools)
    old_b = old.get("b")
    path.write_text(json.dumps({"description": "changed"}))
    write_meta(tools, "c", GOOD)
    loader.refresh([path])
    loader.load()
    (tools / "a.meta").unlink()
    loader.load()
    assert dict(old.tools) == old_tools
    assert old.get("b") is old_b
    assert old.get("b").description == "A good tool."
    assert sorted(old.tools) == ["a", "b"]
    assert sorted(loader.current.tools) == ["b", "c"]
