"""Hostile ``.meta`` files make one broken tool each, never a crash or a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_core.registry.loader import RegistryLoader
from registry_core.registry.meta import MAX_META_DEPTH
from registry_core.registry.model import Status

GOOD = b'{"description": "fine"}'


def _load(tools: Path) -> dict[str, Status]:
    result: list[dict[str, Status]] = []

    def run() -> None:
        registry = RegistryLoader([tools], env={}, cache_dir=None).load()
        result.append({name: tool.status for name, tool in registry.tools.items()})

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "loading the registry hung"
    return result[0]


def test_deep_nesting_is_one_broken_tool_with_a_position(tmp_path: Path) -> None:
    (tmp_path / "deep.meta").write_bytes(b'{"args":' + b"[" * 5000 + b"]" * 5000 + b"}")
    (tmp_path / "good.meta").write_bytes(GOOD)
    registry = RegistryLoader([tmp_path], env={}, cache_dir=None).load()
    deep = registry.tools["deep"]
    assert deep.status is Status.BROKEN
    assert f"nested more than {MAX_META_DEPTH} levels deep" in str(deep.errors[0])
    assert (deep.errors[0].line, deep.errors[0].column) == (1, 8 + MAX_META_DEPTH)
    assert registry.tools["good"].status is Status.AVAILABLE


def test_nesting_at_the_limit_is_fine(tmp_path: Path) -> None:
    inner = "[" * (MAX_META_DEPTH - 3) + "]" * (MAX_META_DEPTH - 3)  # 3 levels outside
    doc = '{"args": {"type": "object", "default": {"x": ' + inner + "}}}"
    (tmp_path / "ok.meta").write_text(doc)
    assert _load(tmp_path) == {"ok": Status.AVAILABLE}


@pytest.mark.parametrize("kind", ["fifo", "device", "loop", "directory", "huge", "dangling"])
def test_files_that_are_not_plain_meta_files(tmp_path: Path, kind: str) -> None:
    bad = tmp_path / "bad.meta"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "device":
        bad.symlink_to("/dev/zero")
    elif kind == "loop":
        bad.symlink_to(bad)
    elif kind == "directory":
        bad.mkdir()
    elif kind == "huge":
        with open(bad, "wb") as fh:
            fh.truncate(64 * 1024 * 1024)  # sparse: big without using the disk
    else:
        bad.symlink_to(tmp_path / "nowhere.meta")
    (tmp_path / "good.meta").write_bytes(GOOD)
    assert _load(tmp_path) == {"bad": Status.BROKEN, "good": Status.AVAILABLE}


def test_ollie_tools_list_survives_a_deep_file(tmp_path: Path) -> None:
    (tmp_path / "deep.meta").write_bytes(b"[" * 5000 + b"]" * 5000)
    (tmp_path / "good.meta").write_bytes(GOOD)
    env = {**os.environ, "OLLIE_TOOLS_PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "registry_core.cli.tools", "list", "--all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr
    assert "good" in proc.stdout
    assert "deep  broken" in proc.stdout


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    *("description", "args", "variants", "match", "cmd", "tier", "prompt"),
                    *("readOnly", "sudo", "elevated", "type", "properties", "os", "binary", "env"),
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=40,
)


def _nested(depth: int, opener: str) -> bytes:
    closer = {"[": "]", "{": "}"}[opener]
    body = '{"a":' * depth if opener == "{" else "[" * depth
    tail = "}" * depth if opener == "{" else closer * depth
    return (body + "1" + tail).encode()


_hostile = st.one_of(
    st.binary(max_size=300),
    _json.map(lambda v: json.dumps(v).encode()),
    _json.map(lambda v: json.dumps({"description": "x", "args": v}).encode()),
    _json.map(lambda v: json.dumps({"variants": [{"match": v}]}).encode()),
    st.builds(_nested, st.integers(0, 3000), st.sampled_from(["[", "{"])),
    st.text(alphabet='{}[]":,01 \\\nab', max_size=400).map(str.encode),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=_hostile)
def test_no_generated_content_makes_load_raise(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tools = Path(tmp)
        (tools / "hostile.meta").write_bytes(content)
        (tools / "good.meta").write_bytes(GOOD)
        statuses = _load(tools)
    assert statuses["good"] is Status.AVAILABLE
    assert statuses["hostile"] in (Status.AVAILABLE, Status.HIDDEN, Status.BROKEN)
