"""The scan cache: what loaders remember across processes about unchanged .meta files."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from registry_core.errors import ToolChangedError
from registry_core.registry import loader as loader_mod
from registry_core.registry import scan_cache
from registry_core.registry.loader import RegistryLoader
from registry_core.registry.meta import (
    meta_from_skeleton,
    parse_meta,
    parsed_from_problems,
    problems_of,
    skeleton_of,
)
from registry_core.registry.model import Status, Tier
from registry_core.registry.scan_cache import CachedContent, ScanCache, cache_file
from registry_core.registry.serialize import tool_details

PLAIN = {
    "description": "Plain tool.",
    "prompt": "## plain\n\nReads things.",
    "args": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    "tier": "warm",
    "readOnly": True,
}
VARIANTS = {
    "description": "Top description.",
    "prompt": "top prompt",
    "cmd": "helper",
    "variants": [
        {"match": {"os": "plan9"}, "prompt": "plan9 prompt", "args": {"type": "object"}},
        {
            "match": {"os": "linux", "env": "HOME"},
            "description": "Linux description.",
            "args": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
            "sudo": True,
        },
    ],
}
WARNS = {"description": "Has an unknown key.", "colour": "blue"}


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled at once (no two-second wait)."""
    monkeypatch.setattr(scan_cache, "SETTLE_NS", 0)


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    for name, doc in (("plain", PLAIN), ("multi", VARIANTS), ("warns", WARNS)):
        (d / f"{name}.meta").write_text(json.dumps(doc, indent=2))
    (d / "broken.meta").write_text('{"description": "x",}')
    helper = d / "helper"
    helper.write_text("#!/bin/sh\n")
    helper.chmod(0o755)
    return d


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "no-bin"
    empty.mkdir()
    return {"PATH": str(empty), "HOME": str(tmp_path)}


def loader(tools: Path, env: dict[str, str], cache: Path | None) -> RegistryLoader:
    return RegistryLoader([tools], env=env, cache_dir=cache)


def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Files the loader opens to read their content, in order."""
    opened: list[str] = []
    real_fast, real_slow = loader_mod.read_fast, loader_mod.read_careful

    def fast(path: str) -> Any:
        opened.append(os.path.basename(path))
        return real_fast(path)

    def slow(path: Any) -> Any:
        opened.append(os.path.basename(str(path)))
        return real_slow(path)

    monkeypatch.setattr(loader_mod, "read_fast", fast)
    monkeypatch.setattr(loader_mod, "read_careful", slow)
    return opened


def details(registry: Any) -> dict[str, str]:
    out = {}
    for name, tool in registry.tools.items():
        d = tool_details(tool)
        d["errors"] = [e["message"] for e in d["errors"]]
        out[name] = json.dumps(d, sort_keys=True)
    return out


def test_a_cached_load_is_the_same_registry_without_reading_flawless_files(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    fresh = loader(tools, env, cache).load()
    assert cache_file(cache, [tools]).is_file()
    opened = reads(monkeypatch)
    cached = loader(tools, env, cache).load()
    # Only what the cache does not keep is read: a file with warnings.
    assert opened == ["warns.meta"]
    broken = cached.get("broken")
    assert broken.status is Status.BROKEN
    assert [(e.path, e.message, e.line, e.column) for e in broken.errors] == [
        (e.path, e.message, e.line, e.column) for e in fresh.get("broken").errors
    ]
    assert broken.errors[0].line is not None
    assert not cached.get("plain").docs.decoded
    assert not cached.get("multi").docs.decoded
    assert details(cached) == details(fresh)  # docs are read here, on demand
    assert cached.get("multi").prompt == "top prompt"
    assert cached.get("multi").args == VARIANTS["variants"][1]["args"]  # type: ignore[index]
    assert cached.get("plain").tier is Tier.WARM
    assert cached.get("plain").docs.decoded


def test_files_that_just_changed_are_not_remembered(
    tools: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    loader(tools, env, cache).load()  # every file is younger than SETTLE_NS
    assert not cache_file(cache, [tools]).exists()
    opened = reads(monkeypatch)
    loader(tools, env, cache).load()
    assert "plain.meta" in opened


def test_a_file_changed_between_scans_is_read_again(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    loader(tools, env, cache).load()
    (tools / "plain.meta").write_text(json.dumps({**PLAIN, "description": "Changed."}))
    tool = loader(tools, env, cache).load().get("plain")
    assert tool.description == "Changed."


def test_docs_of_a_file_changed_after_the_scan_raise_instead_of_mixing_versions(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    loader(tools, env, cache).load()
    snapshot = loader(tools, env, cache).load()
    (tools / "plain.meta").write_text(json.dumps({**PLAIN, "prompt": "new"}))
    with pytest.raises(ToolChangedError, match=r"plain\.meta changed since"):
        _ = snapshot.get("plain").prompt
    (tools / "multi.meta").unlink()
    with pytest.raises(ToolChangedError, match=r"multi\.meta became unreadable"):
        _ = snapshot.get("multi").args
    with pytest.raises(ToolChangedError):
        snapshot.load("plain")  # the spec's tool_load says so too


def test_content_that_does_not_match_the_recorded_crc_is_refused(tmp_path: Path) -> None:
    meta = tmp_path / "t.meta"
    meta.write_text(json.dumps(PLAIN))
    st = os.stat(meta)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with pytest.raises(ToolChangedError, match="changed"):
        CachedContent(str(meta), key, 12345).content()


def test_skeletons_round_trip_everything_but_the_docs() -> None:
    parsed = parse_meta("/tools/multi.meta", json.dumps(VARIANTS).encode())
    assert parsed.fast and parsed.meta is not None
    skeleton = json.loads(json.dumps(skeleton_of(parsed.meta)))  # as stored
    source = CachedContent("/tools/multi.meta", (0, 0, 0, 0, 0), 0)
    rebuilt = meta_from_skeleton("/tools/multi.meta", "multi", skeleton, source)
    assert rebuilt is not None
    assert rebuilt.docs_source is source
    assert rebuilt.variants is not None and parsed.meta.variants is not None
    for got, want in zip(rebuilt.variants, parsed.meta.variants, strict=True):
        assert got.conditions == want.conditions
        assert got.fields.set_names() == want.fields.set_names()
        assert got.fields._replace(prompt=None, args=None) == want.fields._replace(
            prompt=None, args=None
        )


@pytest.mark.parametrize(
    "skeleton",
    [
        None,
        [],
        [["d", True, True, "hot", None, None, None, None]],  # no variants slot
        [["d", True, True, "lukewarm", None, None, None, None], None],
        [[5, True, True, None, None, None, None, None], None],
        [["d", "yes", True, None, None, None, None, None], None],
        [["d", True, True, None, None, "", None, None], None],
        [["d", False, False, None, None, None, None, None], []],
        [["d", False, False, None, None, None, None, None], [[["os"], []]]],
        [["d", False, False, None, None, None, None, None], [[["distro", "x"], []]]],
        [["d", False, False, None, None, None, None, None], [[["os", ""], []]]],
    ],
)
def test_a_malformed_skeleton_is_refused(skeleton: Any) -> None:
    source = CachedContent("/tools/t.meta", (0, 0, 0, 0, 0), 0)
    assert meta_from_skeleton("/tools/t.meta", "t", skeleton, source) is None


@pytest.mark.parametrize(
    "problems",
    [
        None,
        [],
        {"errors": []},  # a broken version has errors
        {"errors": [["m", 1, 1]]},  # no warnings slot
        {"errors": [["m", "1", 1]], "warnings": []},
        {"errors": [[5, 1, 1]], "warnings": []},
        {"errors": [["m", 1]], "warnings": []},
        {"errors": [["m", 1, 1]], "warnings": [None]},
    ],
)
def test_malformed_problems_are_refused(problems: Any) -> None:
    assert parsed_from_problems("/tools/t.meta", problems) is None


def test_problems_round_trip() -> None:
    parsed = parse_meta("/tools/t.meta", b'{"tier": "lukewarm", "colour": 1}')
    assert parsed.meta is None and parsed.errors and parsed.warnings
    again = parsed_from_problems("/tools/t.meta", json.loads(json.dumps(problems_of(parsed))))
    assert again is not None
    assert [str(e) for e in again.errors] == [str(e) for e in parsed.errors]
    assert again.warnings == parsed.warnings


def test_a_bad_tool_name_is_never_taken_from_the_cache() -> None:
    skeleton = [["d", False, False, None, None, None, None, None], None]
    source = CachedContent("/tools/.x.meta", (0, 0, 0, 0, 0), 0)
    assert meta_from_skeleton("/tools/.x.meta", ".x", skeleton, source) is None


def _corrupt(file: Path, how: str) -> None:
    doc = json.loads(file.read_text())
    if how == "garbage":
        file.write_bytes(b"\x00not json")
    elif how == "rules":
        doc["rules"] = "0" * 64
        file.write_text(json.dumps(doc))
    elif how == "format":
        doc["format"] = "something-else"
        file.write_text(json.dumps(doc))
    elif how == "entries":
        doc["entries"] = [1, 2, 3]
        file.write_text(json.dumps(doc))
    elif how == "entry":
        doc["entries"] = {path: ["x"] for path in doc["entries"]}
        file.write_text(json.dumps(doc))
    elif how == "skeleton":
        doc["entries"] = {p: [*e[:6], ["oops"]] for p, e in doc["entries"].items()}
        file.write_text(json.dumps(doc))
    elif how == "writable":
        file.chmod(0o666)
    elif how == "symlink":
        real = file.with_name("real.json")
        file.rename(real)
        file.symlink_to(real)


@pytest.mark.parametrize(
    "how", ["garbage", "rules", "format", "entries", "entry", "skeleton", "writable", "symlink"]
)
def test_an_untrustworthy_cache_is_ignored_and_replaced(
    settled: None,
    tools: Path,
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    cache = tmp_path / "cache"
    fresh = loader(tools, env, cache).load()
    file = cache_file(cache, [tools])
    _corrupt(file, how)
    opened = reads(monkeypatch)
    again = loader(tools, env, cache).load()
    assert "plain.meta" in opened  # nothing was taken from the bad cache
    assert details(again) == details(fresh)
    if how != "symlink":
        assert not file.is_symlink()
        assert ScanCache(file).lookup(str(tools / "plain.meta"), _key(tools / "plain.meta"))


def test_a_cache_owned_by_somebody_else_is_ignored(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    loader(tools, env, cache).load()
    file = cache_file(cache, [tools])
    assert ScanCache(file).lookup(str(tools / "plain.meta"), _key(tools / "plain.meta"))
    monkeypatch.setattr(scan_cache.os, "geteuid", lambda: os.getuid() + 1)
    assert ScanCache(file).lookup(str(tools / "plain.meta"), _key(tools / "plain.meta")) is None


def _key(path: Path) -> tuple[int, int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def test_the_cache_is_private_to_the_user(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    loader(tools, env, cache).load()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache_file(cache, [tools]).stat().st_mode) == 0o600
    assert [p.name for p in cache.iterdir()] == [cache_file(cache, [tools]).name]  # no temp left


def test_each_tools_path_has_its_own_file_and_old_ones_are_pruned(
    settled: None, tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan_cache, "MAX_FILES", 3)
    cache = tmp_path / "cache"
    dirs = []
    for i in range(5):
        d = tmp_path / f"tools{i}"
        d.mkdir()
        (d / "t.meta").write_text(json.dumps(PLAIN))
        dirs.append(d)
        loader(d, env, cache).load()
        os.utime(cache_file(cache, [d]), ns=(i * 10**9, i * 10**9))  # an order by age
    kept = sorted(p.name for p in cache.iterdir())
    assert kept == sorted(cache_file(cache, [d]).name for d in dirs[2:])


def test_a_full_scan_keeps_what_it_met_and_a_refresh_adds_to_it(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    file = cache_file(cache, [tools])

    def kept() -> str:
        return " ".join(
            sorted(os.path.basename(p) for p in json.loads(file.read_text())["entries"])
        )

    the_loader = loader(tools, env, cache)
    the_loader.load()
    assert kept() == "broken.meta multi.meta plain.meta"

    (tools / "new.meta").write_text(json.dumps(PLAIN))
    the_loader.refresh([tools / "new.meta"])
    assert kept() == "broken.meta multi.meta new.meta plain.meta"

    (tools / "plain.meta").unlink()
    (tools / "other.meta").write_text(json.dumps(PLAIN))
    the_loader.load()
    assert kept() == "broken.meta multi.meta new.meta other.meta"


def test_a_cache_that_cannot_be_written_costs_only_time(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory should be")
    registry = loader(tools, env, blocked / "cache").load()
    assert registry.get("plain").status is Status.AVAILABLE
    assert registry.get("plain").prompt == PLAIN["prompt"]


def test_check_never_trusts_the_cache(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry_core.cli.tools import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tools))
    (tools / "broken.meta").unlink()
    (tools / "warns.meta").unlink()
    assert main(["list"], out=io.StringIO()) == 0
    assert any((tmp_path / "xdg-cache" / "ollie" / "registry").iterdir())
    opened = reads(monkeypatch)
    assert main(["check", str(tools)], out=io.StringIO()) == 0
    assert {"plain.meta", "multi.meta"} <= set(opened)


def test_a_temporary_file_left_by_a_dead_writer_does_not_block_saving(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    file = cache_file(cache, [tools])
    leftover = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    leftover.write_text("half a cache")
    loader(tools, env, cache).load()
    assert file.is_file() and not leftover.exists()


def test_ollie_tools_show_and_dump_retry_once_on_a_newer_snapshot(
    settled: None, tools: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry_core.cli import tools as tools_cli

    cache = tmp_path / "cache"
    loader(tools, env, cache).load()
    stale = loader(tools, env, cache).load()
    (tools / "plain.meta").write_text(json.dumps({**PLAIN, "prompt": "## plain, version 2"}))
    snapshots = [stale]
    monkeypatch.setattr(
        tools_cli,
        "_registry",
        lambda _env: snapshots.pop() if snapshots else loader(tools, env, None).load(),
    )
    # ``show`` looks the one tool up: it reads that file now, never a stale scan.
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tools))
    out = io.StringIO()
    assert tools_cli.main(["show", "plain", "--json"], out=out) == 0
    assert json.loads(out.getvalue())["prompt"] == "## plain, version 2"
    assert snapshots.pop() is stale  # not taken by show

    snapshots.append(stale)
    out = io.StringIO()
    assert tools_cli.main(["dump"], out=out) == 0
    dumped = {t["name"]: t for t in json.loads(out.getvalue())["tools"]}
    assert dumped["plain"]["prompt"] == "## plain, version 2"
