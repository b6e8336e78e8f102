"""Evaluating a parsed ``.meta`` on a host (registry_core.registry.evaluate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.registry.evaluate import check_condition, evaluate, resolve_executable
from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.meta import parse_meta
from registry_core.registry.model import (
    Condition,
    Fields,
    MatchKey,
    MetaFile,
    Resolution,
    Status,
    Tier,
    Tool,
)


def make_file(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def meta_of(doc: dict[str, Any], directory: Path, name: str = "t") -> MetaFile:
    path = directory / f"{name}.meta"
    parsed = parse_meta(path, json.dumps(doc).encode())
    assert parsed.meta is not None, [str(e) for e in parsed.errors]
    return parsed.meta


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    return d


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    return d


@pytest.fixture
def facts(bindir: Path) -> HostFacts:
    return HostFacts(
        os_name="linux",
        arch="amd64",
        env={"PATH": str(bindir), "DISPLAY": ":0", "EMPTY": ""},
    )


def cond(facts: HostFacts, key: str, value: str) -> tuple[bool, str]:
    result = check_condition(Condition(MatchKey(key), value), facts)
    assert result.key == key
    assert result.value == value
    return result.passed, result.detail


# --- each match key ------------------------------------------------------------------------


def test_binary_bare_name_found_on_path(facts: HostFacts, bindir: Path) -> None:
    make_file(bindir / "journalctl", 0o755)
    assert cond(facts, "binary", "journalctl") == (True, f"found at {bindir / 'journalctl'}")


def test_binary_bare_name_not_executable_on_path(facts: HostFacts, bindir: Path) -> None:
    make_file(bindir / "journalctl", 0o644)
    assert cond(facts, "binary", "journalctl") == (False, "not found on PATH")


def test_binary_bare_name_missing(facts: HostFacts) -> None:
    assert cond(facts, "binary", "journalctl") == (False, "not found on PATH")


def test_binary_absolute_path_with_exec_bit(facts: HostFacts, tmp_path: Path) -> None:
    exe = make_file(tmp_path / "opt" / "rg", 0o755)
    assert cond(facts, "binary", str(exe)) == (True, f"{exe} is executable")


def test_binary_absolute_path_without_exec_bit(facts: HostFacts, tmp_path: Path) -> None:
    plain = make_file(tmp_path / "opt" / "rg", 0o644)
    assert cond(facts, "binary", str(plain)) == (False, f"{plain} exists but is not executable")


def test_binary_absolute_path_missing(facts: HostFacts, tmp_path: Path) -> None:
    missing = tmp_path / "opt" / "rg"
    assert cond(facts, "binary", str(missing)) == (False, f"{missing} missing")


def test_binary_absolute_directory_is_not_a_binary(facts: HostFacts, tmp_path: Path) -> None:
    passed, _ = cond(facts, "binary", str(tmp_path))
    assert not passed


def test_binary_relative_path_is_refused(facts: HostFacts, bindir: Path) -> None:
    make_file(bindir / "x", 0o755)
    passed, detail = cond(facts, "binary", "bin/x")
    assert not passed
    assert "relative paths are not allowed" in detail


def test_file_exists_as_file_or_directory(facts: HostFacts, tmp_path: Path) -> None:
    f = make_file(tmp_path / "syslog", 0o644)
    assert cond(facts, "file", str(f)) == (True, "exists")
    assert cond(facts, "file", str(tmp_path)) == (True, "exists")
    assert cond(facts, "file", str(tmp_path / "missing")) == (False, "missing")


def test_file_with_tilde_is_expanded(
    facts: HostFacts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    make_file(tmp_path / ".marker", 0o644)
    assert cond(facts, "file", "~/.marker") == (True, "exists")
    assert cond(facts, "file", "~/.other") == (False, "missing")


def test_os_uses_go_names(facts: HostFacts) -> None:
    assert cond(facts, "os", "linux") == (True, "host os is linux")
    assert cond(facts, "os", "darwin") == (False, "host os is linux")
    assert cond(facts, "os", "Linux") == (False, "host os is linux")


def test_arch_uses_go_names(facts: HostFacts) -> None:
    assert cond(facts, "arch", "amd64") == (True, "host arch is amd64")
    assert cond(facts, "arch", "x86_64") == (False, "host arch is amd64")
    assert cond(facts, "arch", "arm64") == (False, "host arch is amd64")


def test_env_requires_a_non_empty_value(facts: HostFacts) -> None:
    assert cond(facts, "env", "DISPLAY") == (True, "set")
    assert cond(facts, "env", "EMPTY") == (False, "empty")
    assert cond(facts, "env", "UNSET") == (False, "unset")


def test_nenv_requires_empty_or_unset(facts: HostFacts) -> None:
    assert cond(facts, "nenv", "DISPLAY") == (False, "set")
    assert cond(facts, "nenv", "EMPTY") == (True, "empty")
    assert cond(facts, "nenv", "UNSET") == (True, "unset")


def test_simulated_details_say_so(bindir: Path) -> None:
    facts = HostFacts(os_name="darwin", arch="arm64", env={}, simulated=True)
    result = check_condition(Condition(MatchKey.OS, "darwin"), facts)
    assert result.passed
    assert result.detail == "host os is darwin (simulated)"


# --- variant selection ---------------------------------------------------------------------


def test_no_variants_is_always_available(facts: HostFacts, tools: Path) -> None:
    tool = evaluate(meta_of({"description": "d"}, tools), facts)
    assert tool.status is Status.AVAILABLE
    assert tool.variant is None
    assert tool.variants == ()
    assert tool.problem == ""


def test_all_conditions_of_a_match_must_pass(facts: HostFacts, tools: Path) -> None:
    doc = {"variants": [{"match": {"os": "linux", "arch": "arm64", "env": "DISPLAY"}}]}
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.status is Status.HIDDEN
    (variant,) = tool.variants
    assert not variant.matched
    assert [c.passed for c in variant.conditions] == [True, False, True]


def test_first_matching_variant_wins_and_every_condition_is_evaluated(
    facts: HostFacts, tools: Path
) -> None:
    doc = {
        "variants": [
            {"match": {"os": "darwin"}, "description": "mac"},
            {"match": {"os": "linux", "env": "DISPLAY"}, "description": "linux desktop"},
            {"match": {"os": "linux"}, "description": "linux"},
            {"match": {"os": "freebsd", "arch": "amd64"}, "description": "bsd"},
        ]
    }
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.status is Status.AVAILABLE
    assert tool.variant == 1
    assert tool.description == "linux desktop"
    assert [v.matched for v in tool.variants] == [False, True, True, False]
    # Even variants after the winner are fully evaluated (the browser shows them).
    assert [(c.key, c.passed) for c in tool.variants[3].conditions] == [
        ("os", False),
        ("arch", True),
    ]


def test_no_matching_variant_hides_the_tool_and_explains_why(facts: HostFacts, tools: Path) -> None:
    doc = {
        "description": "Read system logs.",
        "variants": [
            {"match": {"binary": "journalctl"}},
            {"match": {"file": "/definitely/not/here/syslog", "os": "linux"}},
        ],
    }
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.status is Status.HIDDEN
    assert tool.variant is None
    assert tool.executable is None
    assert tool.resolution is None
    assert tool.description == "Read system logs."
    assert tool.problem == (
        "no variant matches this host ("
        "variant 0: binary journalctl → not found on PATH; "
        "variant 1: file /definitely/not/here/syslog → missing)"
    )


def test_empty_variants_hide_the_tool(facts: HostFacts, tools: Path) -> None:
    tool = evaluate(meta_of({"variants": []}, tools), facts)
    assert tool.status is Status.HIDDEN
    assert tool.problem == "no variant"


def test_variant_without_match_always_matches(facts: HostFacts, tools: Path) -> None:
    doc = {"variants": [{"match": {"os": "plan9"}}, {"description": "fallback"}]}
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.variant == 1
    assert tool.description == "fallback"


# --- merging and defaults ---------------------------------------------------------------------

_TOP: dict[str, Any] = {
    "description": "top d",
    "prompt": "top p",
    "args": {"type": "object", "properties": {"top": {"type": "string"}}},
    "tier": "warm",
    "readOnly": True,
    "cmd": "top_cmd",
    "sudo": True,
    "elevated": True,
}
_VARIANT: dict[str, Any] = {
    "description": "var d",
    "prompt": "var p",
    "args": {"type": "object", "properties": {"var": {"type": "integer"}}},
    "tier": "cold",
    "readOnly": False,
    "cmd": "var_cmd",
    "sudo": False,
    "elevated": False,
}
_ATTR = {
    "description": "description",
    "prompt": "prompt",
    "args": "args",
    "tier": "tier",
    "readOnly": "read_only",
    "cmd": "cmd",
    "sudo": "sudo",
    "elevated": "elevated",
}


def _value(tool: Tool, key: str) -> Any:
    value = getattr(tool, _ATTR[key])
    return value.value if isinstance(value, Tier) else value


@pytest.mark.parametrize("key", list(_ATTR))
def test_variant_field_overrides_only_where_set(key: str, facts: HostFacts, tools: Path) -> None:
    doc = {**_TOP, "variants": [{"match": {"os": "linux"}, key: _VARIANT[key]}]}
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.variant == 0
    assert _value(tool, key) == _VARIANT[key]
    for other in _ATTR:
        if other != key:
            assert _value(tool, other) == _TOP[other], other
    assert tool.variants[0].fields == (key,)


@pytest.mark.parametrize("key", list(_ATTR))
def test_variant_field_set_only_in_the_variant(key: str, facts: HostFacts, tools: Path) -> None:
    doc = {"variants": [{"match": {"os": "linux"}, key: _VARIANT[key]}]}
    assert _value(evaluate(meta_of(doc, tools), facts), key) == _VARIANT[key]


def test_match_is_not_a_mergeable_field(facts: HostFacts, tools: Path) -> None:
    doc = {"variants": [{"match": {"os": "linux"}}]}
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.variants[0].fields == ()
    assert "match" not in Fields.__slots__


def test_hidden_tool_shows_top_level_fields(facts: HostFacts, tools: Path) -> None:
    doc = {**_TOP, "variants": [{"match": {"os": "plan9"}, "description": "never"}]}
    tool = evaluate(meta_of(doc, tools), facts)
    assert tool.status is Status.HIDDEN
    assert tool.description == "top d"


def test_defaults(facts: HostFacts, tools: Path) -> None:
    tool = evaluate(meta_of({}, tools), facts)
    assert tool.tier is Tier.HOT
    assert tool.read_only is False
    assert tool.sudo is False
    assert tool.elevated is False
    assert tool.needs_elevation is False
    assert tool.description == ""
    assert tool.prompt == ""
    assert tool.cmd is None
    assert tool.args == {"type": "object", "properties": {}}


def test_sudo_implies_elevation(facts: HostFacts, tools: Path) -> None:
    tool = evaluate(meta_of({"sudo": True}, tools), facts)
    assert tool.sudo
    assert not tool.elevated
    assert tool.needs_elevation


def test_shadowed_paths_are_passed_through(facts: HostFacts, tools: Path) -> None:
    later = (Path("/b/t.meta"), Path("/c/t.meta"))
    assert evaluate(meta_of({}, tools), facts, later).shadowed == later


# --- executable resolution ------------------------------------------------------------------------


def test_colocated_executable_wins_over_cmd_and_path(
    facts: HostFacts, tools: Path, bindir: Path, tmp_path: Path
) -> None:
    colocated = make_file(tools / "t", 0o755)
    absolute = make_file(tmp_path / "opt" / "t", 0o755)
    make_file(bindir / "t", 0o755)
    tool = evaluate(meta_of({"cmd": str(absolute)}, tools), facts)
    assert tool.executable == colocated
    assert tool.resolution is Resolution.TOOLS_DIR
    assert tool.resolution_detail == "executable t in the tools directory"


def test_non_executable_colocated_file_is_skipped(
    facts: HostFacts, tools: Path, bindir: Path
) -> None:
    make_file(tools / "t", 0o644)
    on_path = make_file(bindir / "t", 0o755)
    tool = evaluate(meta_of({}, tools), facts)
    assert tool.executable == on_path
    assert tool.resolution is Resolution.PATH


def test_colocated_directory_is_skipped(facts: HostFacts, tools: Path, bindir: Path) -> None:
    (tools / "t").mkdir()
    on_path = make_file(bindir / "t", 0o755)
    assert evaluate(meta_of({}, tools), facts).executable == on_path


def test_cmd_absolute(facts: HostFacts, tools: Path, tmp_path: Path) -> None:
    exe = make_file(tmp_path / "opt" / "rg", 0o755)
    tool = evaluate(meta_of({"cmd": str(exe)}, tools), facts)
    assert tool.executable == exe
    assert tool.resolution is Resolution.CMD
    assert tool.resolution_detail == f"cmd {exe} (absolute path)"


def test_cmd_absolute_missing_gives_no_executable_with_a_detail(
    facts: HostFacts, tools: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "opt" / "rg"
    tool = evaluate(meta_of({"cmd": str(missing)}, tools), facts)
    assert tool.status is Status.AVAILABLE
    assert tool.executable is None
    assert tool.resolution is None
    assert tool.resolution_detail == f"cmd {missing} does not exist"
    assert [w.message for w in tool.warnings] == [f"no executable: cmd {missing} does not exist"]


def test_cmd_absolute_not_executable(facts: HostFacts, tools: Path, tmp_path: Path) -> None:
    plain = make_file(tmp_path / "opt" / "rg", 0o644)
    tool = evaluate(meta_of({"cmd": str(plain)}, tools), facts)
    assert tool.executable is None
    assert tool.resolution_detail == f"cmd {plain} is not executable"


def test_cmd_absolute_does_not_fall_back_to_path(
    facts: HostFacts, tools: Path, bindir: Path, tmp_path: Path
) -> None:
    make_file(bindir / "t", 0o755)
    tool = evaluate(meta_of({"cmd": str(tmp_path / "nope")}, tools), facts)
    assert tool.executable is None


def test_cmd_bare_found_in_tools_dir_before_path(
    facts: HostFacts, tools: Path, bindir: Path
) -> None:
    local = make_file(tools / "helper", 0o755)
    make_file(bindir / "helper", 0o755)
    tool = evaluate(meta_of({"cmd": "helper"}, tools), facts)
    assert tool.executable == local
    assert tool.resolution is Resolution.CMD
    assert tool.resolution_detail == "cmd helper in the tools directory"


def test_cmd_bare_found_on_path(facts: HostFacts, tools: Path, bindir: Path) -> None:
    make_file(tools / "helper", 0o644)  # not executable: skipped
    on_path = make_file(bindir / "helper", 0o755)
    tool = evaluate(meta_of({"cmd": "helper"}, tools), facts)
    assert tool.executable == on_path
    assert tool.resolution is Resolution.CMD
    assert tool.resolution_detail == "cmd helper found on PATH"


def test_cmd_bare_missing(facts: HostFacts, tools: Path, bindir: Path) -> None:
    make_file(bindir / "t", 0o755)  # the tool's own name on PATH is NOT used when cmd is set
    tool = evaluate(meta_of({"cmd": "helper"}, tools), facts)
    assert tool.executable is None
    assert tool.resolution_detail == f"cmd helper not found in {tools} or on PATH"


def test_cmd_relative_path_is_relative_to_the_tools_dir(facts: HostFacts, tools: Path) -> None:
    exe = make_file(tools / "sub" / "run", 0o755)
    tool = evaluate(meta_of({"cmd": "sub/run"}, tools), facts)
    assert tool.executable == exe
    assert tool.resolution is Resolution.CMD
    missing = evaluate(meta_of({"cmd": "sub/nope"}, tools), facts)
    assert missing.executable is None
    assert missing.resolution_detail == f"cmd sub/nope not found relative to {tools}"


def test_path_fallback_by_tool_name(facts: HostFacts, tools: Path, bindir: Path) -> None:
    exe = make_file(bindir / "t", 0o755)
    tool = evaluate(meta_of({}, tools), facts)
    assert tool.executable == exe
    assert tool.resolution is Resolution.PATH
    assert tool.resolution_detail == "t found on PATH"


def test_nothing_found_is_available_with_a_warning(facts: HostFacts, tools: Path) -> None:
    tool = evaluate(meta_of({}, tools), facts)
    assert tool.status is Status.AVAILABLE
    assert tool.executable is None
    assert tool.resolution_detail == f"no executable t in {tools} and none on PATH"
    assert len(tool.warnings) == 1


def test_variant_cmd_is_used_for_resolution(facts: HostFacts, tools: Path) -> None:
    journald = make_file(tools / "logs_journald", 0o755)
    make_file(tools / "logs_syslog", 0o755)
    doc = {
        "cmd": "logs_syslog",
        "variants": [{"match": {"os": "linux"}, "cmd": "logs_journald"}],
    }
    tool = evaluate(meta_of(doc, tools, "logs"), facts)
    assert tool.executable == journald


def test_hidden_tool_is_not_resolved(facts: HostFacts, tools: Path) -> None:
    make_file(tools / "t", 0o755)
    tool = evaluate(meta_of({"variants": [{"match": {"os": "plan9"}}]}, tools), facts)
    assert tool.executable is None
    assert tool.resolution_detail == ""
    assert tool.warnings == ()


def test_resolve_executable_directly(facts: HostFacts, tools: Path) -> None:
    exe = make_file(tools / "x", 0o755)
    assert resolve_executable("x", tools, None, facts) == (
        exe,
        Resolution.TOOLS_DIR,
        "executable x in the tools directory",
    )
