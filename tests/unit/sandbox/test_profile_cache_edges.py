"""The remembered profile parse (registry_core.sandbox.profile_cache), field by field.

Every shape ``from_json`` refuses, word for word; every key ``recall``
compares; the file ``remember`` writes (name, mode, exact text) and what it
leaves behind when it cannot; the parser fingerprint.
"""

from __future__ import annotations

import copy
import importlib.machinery
import json
import os
import stat
import sys
import types
import zlib
from pathlib import Path
from typing import Any

import pytest

from registry_core.sandbox import profile_cache
from registry_core.sandbox.limits import LimitsSection
from registry_core.sandbox.profile_cache import (
    cache_path,
    fingerprint,
    from_json,
    recall,
    remember,
    to_json,
)
from registry_core.sandbox.profiles import (
    AdvancedSection,
    FilesystemSection,
    GeneralSection,
    LogLevel,
    NetworkSection,
    SandboxProfile,
)

PROFILE = SandboxProfile(
    name="p",
    source="/cfg/p.yaml",
    filesystem=FilesystemSection(
        ("/ro",), ("/rox",), ("/rw",), ("/rwx", "/rwx2"), (3, 5, 7, 9, 10)
    ),
    network=NetworkSection(
        True,
        False,
        (8080,),
        (443, 80),
        ("a.example", "*.b.example"),
        ("c.example",),
        True,
        (4, 5, 7),
    ),
    env=("PATH", "LC_*"),
    general=GeneralSection(True, LogLevel.DEBUG),
    advanced=AdvancedSection(True, False, ("/opt/x",)),
    warnings=("a warning",),
    env_values=(("LANG", "C"), ("EMPTY", "")),
    limits=LimitsSection(64, None, 90),
)
DOC: dict[str, Any] = {
    "filesystem": [["/ro"], ["/rox"], ["/rw"], ["/rwx", "/rwx2"], [3, 5, 7, 9, 10]],
    "network": [
        True,
        False,
        [8080],
        [443, 80],
        ["a.example", "*.b.example"],
        ["c.example"],
        True,
        [4, 5, 7],
    ],
    "env": ["PATH", "LC_*"],
    "general": [True, "debug"],
    "advanced": [True, False, ["/opt/x"]],
    "warnings": ["a warning"],
    "env_values": [["LANG", "C"], ["EMPTY", ""]],
    "limits": [64, None, 90],
}


def test_the_parse_as_json_field_by_field() -> None:
    assert to_json(PROFILE) == DOC
    assert from_json(copy.deepcopy(DOC), name="p", source="/cfg/p.yaml") == PROFILE


def test_the_name_and_source_are_the_callers() -> None:
    loaded = from_json(copy.deepcopy(DOC), name="q", source="/other/q.yaml")
    assert (loaded.name, loaded.source) == ("q", "/other/q.yaml")


def _changed(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    where: Any = doc
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("filesystem",), [[], [], []], "wrong section sizes"),
        (("filesystem",), [[], [], [], []], "wrong section sizes"),
        (("filesystem", 4), ["3"], "expected a list of integers"),
        (("network",), [True, False, []], "wrong section sizes"),
        (("general",), [True], "wrong section sizes"),
        (("advanced",), [True, False], "wrong section sizes"),
        (("env_values",), {"LANG": "C"}, "env_values: expected [name, value] pairs"),
        (("env_values", 0), ("LANG", "C"), "env_values: expected [name, value] pairs"),
        (("env_values", 0), ["LANG"], "env_values: expected [name, value] pairs"),
        (("env_values", 0), ["LANG", "C", "x"], "env_values: expected [name, value] pairs"),
        (("env_values", 1), ["EMPTY", None], "env_values: expected [name, value] pairs"),
        (("env_values", 1), [1, ""], "env_values: expected [name, value] pairs"),
        (("general", 1), 3, "general.log_level: expected a string"),
        (("general", 1), "loud", "'loud' is not a valid LogLevel"),
        (("filesystem", 0), "/ro", "expected a list of strings"),
        (("filesystem", 3), ["/rwx", 2], "expected a list of strings"),
        (("env",), ("PATH",), "expected a list of strings"),
        (("warnings",), [None], "expected a list of strings"),
        (("advanced", 2), [b"/opt"], "expected a list of strings"),
        (("network", 2), [True], "expected a list of integers"),
        (("network", 3), [443.0], "expected a list of integers"),
        (("network", 3), (443,), "expected a list of integers"),
        (("network", 0), 1, "expected a boolean"),
        (("network", 1), None, "expected a boolean"),
        (("network", 4), "a.example", "expected a list of strings"),
        (("network", 5), [1], "expected a list of strings"),
        (("network", 6), 1, "expected a boolean"),
        (("network", 7), ["4"], "expected a list of integers"),
        (("general", 0), "true", "expected a boolean"),
        (("advanced", 0), 0, "expected a boolean"),
        (("advanced", 1), [], "expected a boolean"),
        (("limits",), [64, None], "limits: expected [tasks, memory, cpu]"),
        (("limits",), {"tasks": 64}, "limits: expected [tasks, memory, cpu]"),
        (("limits", 0), 0, "limits: expected [tasks, memory, cpu]"),
        (("limits", 2), "90", "limits: expected [tasks, memory, cpu]"),
        (("limits", 1), True, "limits: expected [tasks, memory, cpu]"),
    ],
)
def test_every_other_shape_is_refused_word_for_word(
    path: tuple[str | int, ...], value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=r".") as info:
        from_json(_changed(path, value), name="p", source="/cfg/p.yaml")
    assert str(info.value) == message


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^expected an object$"):
        from_json([DOC], name="p", source="/cfg/p.yaml")


# --- recall and remember ------------------------------------------------------------


def _remembered(tmp_path: Path, text: str = "env: [PATH]\n") -> Path:
    profile = tmp_path / "p.yaml"
    profile.write_text(text)
    remember(profile, text, PROFILE)
    return profile


def test_the_file_beside_the_profile(tmp_path: Path) -> None:
    assert cache_path(tmp_path / "p.yaml") == tmp_path / ".p.yaml.parsed.json"
    profile = _remembered(tmp_path)
    file = cache_path(profile)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".p.yaml.parsed.json", "p.yaml"]
    doc = {
        "format": "ollie-profile-parse",
        "code": fingerprint(),
        "name": "p",
        "source": "/cfg/p.yaml",
        "text": "env: [PATH]\n",
        "profile": DOC,
    }
    assert file.read_text(encoding="utf-8") == json.dumps(doc, separators=(",", ":"))


def test_it_is_recalled_for_exactly_that_text_name_and_source(tmp_path: Path) -> None:
    profile = _remembered(tmp_path)
    text = "env: [PATH]\n"
    assert recall(profile, text, name="p", source="/cfg/p.yaml") == PROFILE
    assert recall(profile, text + " ", name="p", source="/cfg/p.yaml") is None
    assert recall(profile, text, name="q", source="/cfg/p.yaml") is None
    assert recall(profile, text, name="p", source="/cfg/q.yaml") is None


@pytest.mark.parametrize(
    ("key", "value"),
    [("format", "ollie-profile-parse2"), ("code", "x"), ("format", None), ("profile", [])],
)
def test_a_cache_of_another_format_or_parser_is_not_recalled(
    tmp_path: Path, key: str, value: Any
) -> None:
    profile = _remembered(tmp_path)
    file = cache_path(profile)
    doc = json.loads(file.read_text())
    doc[key] = value
    file.write_text(json.dumps(doc))
    assert recall(profile, "env: [PATH]\n", name="p", source="/cfg/p.yaml") is None


@pytest.mark.parametrize("content", ["[]", "not json", '{"format": 1', "", "\xff"])
def test_a_cache_that_is_not_an_object_is_not_recalled(tmp_path: Path, content: str) -> None:
    profile = tmp_path / "p.yaml"
    cache_path(profile).write_text(content, encoding="latin-1")
    assert recall(profile, "", name="p", source=str(profile)) is None


def test_a_cache_missing_a_section_is_not_recalled(tmp_path: Path) -> None:
    profile = _remembered(tmp_path)
    file = cache_path(profile)
    doc = json.loads(file.read_text())
    del doc["profile"]["env_values"]
    file.write_text(json.dumps(doc))
    assert recall(profile, "env: [PATH]\n", name="p", source="/cfg/p.yaml") is None


def test_a_cache_over_its_limit_is_not_read(tmp_path: Path) -> None:
    profile = _remembered(tmp_path)
    file = cache_path(profile)
    doc = json.loads(file.read_text())
    padded = json.dumps(doc, separators=(",", ":"))
    padded = padded[:-1] + " " * (profile_cache.MAX_BYTES - len(padded)) + "}"
    file.write_text(padded)
    assert len(padded) == 4 * 1024 * 1024
    assert recall(profile, "env: [PATH]\n", name="p", source="/cfg/p.yaml") == PROFILE
    file.write_text(padded[:-1] + " }")
    assert recall(profile, "env: [PATH]\n", name="p", source="/cfg/p.yaml") is None


def test_a_temporary_of_this_process_in_the_way_leaves_everything_alone(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    in_the_way = tmp_path / f".p.yaml.parsed.json.{os.getpid()}.tmp"
    in_the_way.symlink_to(tmp_path / "target")
    remember(profile, "", PROFILE)
    assert sorted(p.name for p in tmp_path.iterdir()) == [in_the_way.name]
    assert not (tmp_path / "target").exists()


def test_a_cache_that_cannot_be_replaced_leaves_no_temporary(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    cache_path(profile).mkdir()
    (cache_path(profile) / "keep").write_text("")
    remember(profile, "", PROFILE)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".p.yaml.parsed.json"]


def test_no_directory_to_write_in_is_no_error(tmp_path: Path) -> None:
    remember(tmp_path / "missing" / "p.yaml", "", PROFILE)
    assert list(tmp_path.iterdir()) == []


# --- the fingerprint -----------------------------------------------------------------


def test_the_fingerprint_names_the_parsing_code_and_versions() -> None:
    here = Path(profile_cache.__file__).resolve().parent
    import yaml

    files = [
        here / "profiles.py",
        here / "profile_parse.py",
        here / "yamlnodes.py",
        here / "limits.py",
        here.parent / "egress" / "rules.py",
        Path(str(yaml.__file__)),
    ]
    expected = [f"ollie-profile-parse 3 {sys.version}"]
    expected += [f"{f}:{zlib.crc32(f.read_bytes()):08x}" for f in files]
    assert fingerprint().split("\n") == expected
    assert fingerprint() is fingerprint()


def _own_files() -> list[Path]:
    here = Path(profile_cache.__file__).resolve().parent
    own = [here / f for f in ("profiles.py", "profile_parse.py", "yamlnodes.py", "limits.py")]
    return [*own, here.parent / "egress" / "rules.py"]  # checks allow_hosts / deny_hosts


def test_without_pyyaml_the_fingerprint_names_only_this_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules makes the import system report yaml as absent.
    monkeypatch.setitem(sys.modules, "yaml", None)
    monkeypatch.setattr(profile_cache, "_FINGERPRINT", [])
    expected = [f"ollie-profile-parse 3 {sys.version}"]
    expected += [f"{f}:{zlib.crc32(f.read_bytes()):08x}" for f in _own_files()]
    assert fingerprint().split("\n") == expected


def test_a_parser_file_that_cannot_be_read_is_named_unreadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # yaml as loaded from a file that is gone since: its spec still names the file.
    gone = tmp_path / "gone" / "__init__.py"
    loaded = types.ModuleType("yaml")
    loaded.__spec__ = importlib.machinery.ModuleSpec("yaml", None, origin=str(gone))
    monkeypatch.setitem(sys.modules, "yaml", loaded)
    monkeypatch.setattr(profile_cache, "_FINGERPRINT", [])
    lines = fingerprint().split("\n")
    assert lines[1:] == [
        *(f"{f}:{zlib.crc32(f.read_bytes()):08x}" for f in _own_files()),
        f"{gone}:unreadable",
    ]
