"""The remembered parse of a sandbox profile: same result, never trusted blindly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry_core.sandbox import profile_cache
from registry_core.sandbox.profiles import (
    load_profile,
    load_profile_file,
    parse_profile_text,
    shipped_default_profile,
)

ODD = """\
filesystem:
  ro: ["/usr", "{HOME}/docs"]
  rw: ["{TMPDIR}"]
network: {enabled: true, connect_tcp: ["443", 80]}
env: [PATH, LANG=C, "EDITOR=vi"]
general: {best_effort: true, log_level: debug}
advanced: {ldd: true, add_exec: ["/opt/x"]}
surprise: 1
"""


@pytest.mark.parametrize("text", [shipped_default_profile().read_text(), ODD, "{}\n"])
def test_the_remembered_parse_equals_a_fresh_parse(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    fresh = parse_profile_text(text, name="p", source=str(path))
    first = load_profile_file(path, remember=True)
    assert profile_cache.cache_path(path).is_file()
    assert profile_cache.recall(path, text, name="p", source=str(path)) == fresh
    assert load_profile_file(path, remember=True) == first == fresh


def _poison(path: Path) -> None:
    """Rewrite the cache to claim the profile allows writing everywhere."""
    cache = profile_cache.cache_path(path)
    doc = json.loads(cache.read_text())
    doc["profile"]["filesystem"][2] = ["/"]
    cache.write_text(json.dumps(doc))


def test_an_edited_profile_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(ODD)
    load_profile_file(path, remember=True)
    _poison(path)
    path.write_text(ODD.replace('"{TMPDIR}"', '"{TMPDIR}", "/srv"'))
    assert load_profile_file(path, remember=True).filesystem.rw == ("{TMPDIR}", "/srv")


@pytest.mark.parametrize("how", ["group-writable", "symlink", "other-text", "other-code", "shape"])
def test_an_untrustworthy_cache_is_ignored(tmp_path: Path, how: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(ODD)
    load_profile_file(path, remember=True)
    cache = profile_cache.cache_path(path)
    _poison(path)
    doc = json.loads(cache.read_text())
    if how == "group-writable":
        cache.chmod(0o620)
    elif how == "symlink":
        real = tmp_path / "elsewhere.json"
        cache.rename(real)
        cache.symlink_to(real)
    elif how == "other-text":
        doc["text"] = ODD + "\n"
        cache.write_text(json.dumps(doc))
    elif how == "other-code":
        doc["code"] = "an older parser"
        cache.write_text(json.dumps(doc))
    else:
        doc["profile"]["network"][0] = "yes"
        cache.write_text(json.dumps(doc))
    if how in ("group-writable", "symlink"):
        # The poisoned entry is otherwise valid: only the file's trust rules reject it.
        assert profile_cache.from_json(doc["profile"], name="p", source=str(path))
    assert load_profile_file(path, remember=True).filesystem.rw == ("{TMPDIR}",)


def test_a_remembered_profile_loads_without_a_yaml_parser(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(ODD)
    load_profile_file(path, remember=True)
    code = (
        "import sys; from pathlib import Path\n"
        "from registry_core.sandbox.profiles import load_profile_file\n"
        f"p = load_profile_file(Path({str(path)!r}), remember=True)\n"
        "assert p.network.connect_tcp == (443, 80), p\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_only_the_users_configured_profiles_keep_a_parse(tmp_path: Path) -> None:
    # Reading some other profile file (the shipped default, a file named on a command
    # line, a read-only checkout) must leave nothing beside it.
    path = tmp_path / "elsewhere.yaml"
    path.write_text("filesystem:\n  rw: ['{TMPDIR}']\n")
    load_profile_file(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.yaml"]

    env = {"HOME": str(tmp_path / "home"), "OLLIE_CFG_PATH": str(tmp_path / "cfg")}
    load_profile(env)  # installs the default, then loads it as the user's own
    sandbox_dir = tmp_path / "cfg" / "sandbox"
    assert sorted(p.name for p in sandbox_dir.iterdir()) == [
        ".default.yaml.parsed.json",
        "default.yaml",
    ]
