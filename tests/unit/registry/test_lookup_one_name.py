"""``RegistryLoader.lookup(name)`` builds exactly the tool a full scan builds.

A property over generated tools trees: several directories in search order,
tool files that are fine, hidden (no variant matches), broken (bad JSON, an
unknown tier), symlinked, dangling, a directory or a FIFO where a file should
be, co-located executables; for every name, ``lookup(name)`` equals
``load().tools.get(name)``: shadowing, variants and errors included.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_core.registry.loader import RegistryLoader
from registry_core.registry.model import Tool
from registry_core.registry.serialize import tool_details

NAMES = ["alpha", "beta", "gamma", "x.y", "-dash"]
KINDS = [
    "plain",
    "colocated",
    "variants_hidden",
    "variants_second",
    "bad_json",
    "bad_tier",
    "symlink",
    "dangling",
    "directory",
    "fifo",
    "binary_cmd",
]
ENV = {"PATH": "/usr/bin:/bin", "OLLIE_I19_SET": "1"}


def _write(directory: Path, name: str, kind: str) -> None:
    meta = directory / f"{name}.meta"
    doc: dict[str, object] = {"description": f"{name} in {directory.name} ({kind})"}
    if kind == "colocated":
        exe = directory / name
        exe.write_text("#!/bin/sh\necho hi\n")
        exe.chmod(0o755)
    elif kind == "variants_hidden":
        doc["variants"] = [{"match": [{"env": "OLLIE_I19_UNSET"}]}]
    elif kind == "variants_second":
        doc["variants"] = [
            {"match": [{"binary": "no-such-binary-i19"}], "description": "first"},
            {"match": [{"env": "OLLIE_I19_SET"}], "description": "second", "cmd": "sh"},
        ]
    elif kind == "bad_json":
        meta.write_text('{"description": ')
        return
    elif kind == "bad_tier":
        doc["tier"] = "galactic"
    elif kind == "symlink":
        target = directory / f"{name}.target"
        target.write_text(json.dumps(doc))
        meta.symlink_to(target)
        return
    elif kind == "dangling":
        meta.symlink_to(directory / "nowhere.meta")
        return
    elif kind == "directory":
        meta.mkdir()
        return
    elif kind == "fifo":
        os.mkfifo(meta)
        return
    elif kind == "binary_cmd":
        doc["cmd"] = "true"
    meta.write_text(json.dumps(doc))


def _details(tool: Tool | None) -> str | None:
    return None if tool is None else json.dumps(tool_details(tool), sort_keys=True)


trees = st.lists(
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from(KINDS), max_size=len(NAMES)),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees, missing_dir=st.booleans(), cached=st.booleans())
def test_lookup_equals_the_full_scan(
    tree: list[dict[str, str]], missing_dir: bool, cached: bool
) -> None:
    root = Path(tempfile.mkdtemp(prefix="i19-lookup-"))
    try:
        dirs = []
        for index, files in enumerate(tree):
            directory = root / f"d{index}"
            directory.mkdir()
            for name, kind in files.items():
                _write(directory, name, kind)
            dirs.append(directory)
        if missing_dir:
            dirs.insert(1, root / "absent")
        cache = root / "cache" if cached else None
        full = RegistryLoader(dirs, env=ENV, cache_dir=cache).load()
        # A second full scan (from the scan cache when there is one) agrees too.
        again = RegistryLoader(dirs, env=ENV, cache_dir=cache).load()
        for name in [*NAMES, "absent", "a/b", ""]:
            single = RegistryLoader(dirs, env=ENV, cache_dir=cache)
            expected = _details(full.tools.get(name))
            assert _details(single.lookup(name)) == expected, name
            assert _details(again.tools.get(name)) == expected, name
            snapshot = single.lookup_registry(name)
            assert list(snapshot.tools) == ([name] if expected is not None else [])
    finally:
        shutil.rmtree(root)


def test_lookup_sees_a_file_changed_since_the_last_lookup(tmp_path: Path) -> None:
    (tmp_path / "t.meta").write_text('{"description": "one"}')
    loader = RegistryLoader([tmp_path], env=ENV, cache_dir=None)
    first = loader.lookup("t")
    assert first is not None and first.description == "one"
    (tmp_path / "t.meta").write_text('{"description": "two, longer"}')
    second = loader.lookup("t")
    assert second is not None and second.description == "two, longer"
    (tmp_path / "t.meta").unlink()
    assert loader.lookup("t") is None


def test_lookup_reads_no_other_tool(tmp_path: Path) -> None:
    (tmp_path / "wanted.meta").write_text('{"description": "w"}')
    for i in range(50):
        (tmp_path / f"other{i}.meta").write_text('{"description": "o"}')
    (tmp_path / "other0.meta").chmod(0)  # would be a broken tool if it were read
    loader = RegistryLoader([tmp_path], env=ENV, cache_dir=None)
    tool = loader.lookup("wanted")
    assert tool is not None
    assert list(loader._cache) == [str(tmp_path / "wanted.meta")]
