"""Tests of path templates and effective rules (registry_core.sandbox.rules)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.sandbox.ldd import LddResult
from registry_core.sandbox.profiles import Access, NetworkMode, parse_profile
from registry_core.sandbox.rules import (
    UnresolvedTemplateError,
    effective_rules,
    expand_path,
    template_value,
    with_command,
)

ENV = {"HOME": "/home/u", "TMPDIR": "/tmp/u", "PROJECT": "/srv/p"}
CWD = "/work/here"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{CWD}", ("/work/here",)),
        ("{CWD}/sub/", ("/work/here/sub",)),
        ("{HOME}/.gitconfig", ("/home/u/.gitconfig",)),
        ("{TMPDIR}", ("/tmp/u",)),
        ("{XDG_CONFIG_HOME}/ollie/tools", ("/home/u/.config/ollie/tools",)),
        ("{XDG_DATA_HOME}", ("/home/u/.local/share",)),
        ("{XDG_CACHE_HOME}", ("/home/u/.cache",)),
        ("{XDG_STATE_HOME}", ("/home/u/.local/state",)),
        ("{PROJECT}/src", ("/srv/p/src",)),
        ("relative/dir", ("/work/here/relative/dir",)),
        ("/a/../b", ("/b",)),
    ],
)
def test_expand_path(template: str, expected: tuple[str, ...]) -> None:
    assert expand_path(template, ENV, CWD) == expected


def test_tmpdir_defaults_to_tmp() -> None:
    assert expand_path("{TMPDIR}", {"HOME": "/h"}, CWD) == ("/tmp",)


def test_xdg_variables_come_from_the_environment_when_set() -> None:
    env = {**ENV, "XDG_CONFIG_HOME": "/cfg", "XDG_RUNTIME_DIR": "/run/user/1"}
    assert expand_path("{XDG_CONFIG_HOME}/x", env, CWD) == ("/cfg/x",)
    assert expand_path("{XDG_RUNTIME_DIR}", env, CWD) == ("/run/user/1",)


def test_colon_separated_tools_path_expands_to_several_paths() -> None:
    env = {**ENV, "OLLIE_TOOLS_PATH": "/t/one::/t/two"}
    assert expand_path("{OLLIE_TOOLS_PATH}", env, CWD) == ("/t/one", "/t/two")


def test_tools_path_has_the_default_when_unset() -> None:
    assert template_value("OLLIE_TOOLS_PATH", ENV, CWD) == ("/home/u/.config/ollie/tools",)


def test_a_colon_in_cwd_is_never_split() -> None:
    assert expand_path("{CWD}", ENV, "/home/u/a:/etc") == ("/home/u/a:/etc",)


@pytest.mark.parametrize(
    "template", ["{NOPE}/x", "{XDG_DATA_DIRS}", "~other/x", "~", "~/bin", "{EMPTY}"]
)
def test_unset_variable_is_unresolved(template: str) -> None:
    with pytest.raises(UnresolvedTemplateError):
        expand_path(template, {**ENV, "EMPTY": ""}, CWD)


def test_effective_rules_drop_unresolved_paths_with_a_warning() -> None:
    profile = parse_profile(
        {"filesystem": {"ro": ["/etc", "{NOT_SET}/data"], "rw": ["{CWD}"]}},
        name="t",
        source="/p/t.yaml",
    )
    rules = effective_rules(profile, ENV, CWD)
    assert [(r.path, r.access) for r in rules.paths] == [
        ("/etc", Access.RO),
        ("/work/here", Access.RW),
    ]
    assert len(rules.warnings) == 1
    assert "{NOT_SET}" in rules.warnings[0]
    assert "filesystem.ro" in rules.warnings[0]
    assert rules.skipped[0].path == "{NOT_SET}/data"


def test_effective_rules_carry_network_env_and_best_effort() -> None:
    profile = parse_profile(
        {
            "network": {"enabled": True, "connect_tcp": [443], "bind_tcp": ["8080"]},
            "env": ["PATH", "EDITOR=vi"],
            "general": {"best_effort": True},
        },
        name="t",
        source="/p/t.yaml",
    )
    rules = effective_rules(profile, ENV, CWD)
    assert rules.network.mode is NetworkMode.RESTRICTED
    assert rules.network.connect_tcp == (443,)
    assert rules.network.bind_tcp == (8080,)
    assert rules.env == ("PATH",)
    assert rules.env_values == (("EDITOR", "vi"),)
    assert rules.best_effort is True
    assert rules.profile == "t"
    assert rules.source == "/p/t.yaml"


def test_ports_are_dropped_when_network_is_denied() -> None:
    profile = parse_profile(
        {"network": {"enabled": False, "connect_tcp": [443]}}, name="t", source="/p/t.yaml"
    )
    rules = effective_rules(profile, ENV, CWD)
    assert rules.network.mode is NetworkMode.DENY
    assert rules.network.connect_tcp == ()


def test_the_old_add_exec_list_form_still_grants_rox() -> None:
    profile = parse_profile(
        {"advanced": {"add_exec": ["{HOME}/bin/tool"]}}, name="t", source="/p/t.yaml"
    )
    rules = effective_rules(profile, ENV, CWD)
    assert [(r.path, r.access, r.origin) for r in rules.paths] == [
        ("/home/u/bin/tool", Access.ROX, "advanced.add_exec (list)")
    ]
    assert rules.add_exec is False


def test_ollie_core_templates_have_its_defaults() -> None:
    env = {"HOME": "/home/u"}
    assert expand_path("{OLLIE_CFG_PATH}/x", env, CWD) == ("/home/u/.config/ollie/x",)
    assert expand_path("{OLLIE_DATA_PATH}", env, CWD) == ("/home/u/.local/share/ollie",)
    assert expand_path("{XDG_RUNTIME_DIR}", env, CWD) == (f"/run/user/{os.getuid()}",)
    set_env = {**env, "OLLIE_CFG_PATH": "/c", "OLLIE_DATA_PATH": "/d", "XDG_RUNTIME_DIR": "/r"}
    assert expand_path("{OLLIE_CFG_PATH}", set_env, CWD) == ("/c",)
    assert expand_path("{OLLIE_DATA_PATH}", set_env, CWD) == ("/d",)
    assert expand_path("{XDG_RUNTIME_DIR}", set_env, CWD) == ("/r",)


@pytest.mark.parametrize("template", ["{home}/x", "{Project}/x", "/a/{b}"])
def test_braces_around_other_names_are_literal_text(template: str) -> None:
    # ollie-core only substitutes upper-case names; the rest is part of the path.
    env = {**ENV, "home": "/elsewhere", "Project": "/elsewhere", "b": "/elsewhere"}
    assert expand_path(template, env, "/c") == (os.path.normpath(os.path.join("/c", template)),)


def test_a_tilde_path_is_dropped_with_a_hint() -> None:
    profile = parse_profile({"filesystem": {"ro": ["~/notes"]}}, name="t", source="/p/t.yaml")
    rules = effective_rules(profile, ENV, CWD)
    assert rules.paths == ()
    assert "write {HOME}" in rules.warnings[0]


def test_rules_with_the_same_paths_share_a_cache_key() -> None:
    profile = parse_profile({"filesystem": {"rw": ["{CWD}"]}}, name="t", source="/p/t.yaml")
    one = effective_rules(profile, ENV, "/a")
    two = effective_rules(profile, ENV, "/a")
    other = effective_rules(profile, ENV, "/b")
    assert one.cache_key() == two.cache_key()
    assert hash(one) == hash(two)
    assert one.cache_key() != other.cache_key()


class FakeLdd:
    def __init__(self, result: LddResult | None = None, error: OSError | None = None) -> None:
        self.result = result or LddResult()
        self.error = error
        self.calls: list[str] = []

    def __call__(self, executable: str) -> LddResult:
        self.calls.append(executable)
        if self.error is not None:
            raise self.error
        return self.result


def make_executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_ldd_adds_only_the_commands_libraries(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    other = make_executable(tmp_path / "other")
    profile = parse_profile(
        {"filesystem": {"rox": [other], "ro": ["/etc"]}, "advanced": {"ldd": True}},
        name="t",
        source="/p/t.yaml",
    )
    fake = FakeLdd(LddResult(("/lib/libc.so.6", "/lib64/ld.so"), ("libgone.so",)))
    rules = effective_rules(profile, ENV, CWD)
    assert rules.ldd is True
    assert [r.path for r in rules.paths] == ["/etc", other]  # nothing resolved yet
    ran = with_command(rules, tool, libraries=fake)
    assert fake.calls == [tool]  # the command only, not the other executable
    added = [(r.path, r.access) for r in ran.paths if r.origin.startswith("advanced.ldd")]
    assert added == [("/lib/libc.so.6", Access.ROX), ("/lib64/ld.so", Access.ROX)]
    assert any("libgone.so" in warning for warning in ran.warnings)
    assert tool not in [r.path for r in ran.paths]  # add_exec is false


def test_add_exec_allows_the_command_itself(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    profile = parse_profile({"advanced": {"add_exec": True}}, name="t", source="/p/t.yaml")
    rules = effective_rules(profile, ENV, CWD)
    assert rules.add_exec is True
    ran = with_command(rules, tool, libraries=FakeLdd())
    assert [(r.path, r.access, r.origin) for r in ran.paths] == [
        (tool, Access.ROX, "advanced.add_exec")
    ]


def test_ldd_failure_is_a_warning(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    profile = parse_profile({"advanced": {"ldd": True}}, name="t", source="/p/t.yaml")
    rules = effective_rules(profile, ENV, CWD)
    ran = with_command(rules, tool, always=True, libraries=FakeLdd(error=OSError("boom")))
    assert [r.path for r in ran.paths] == [tool]
    assert ran.warnings == (f"advanced.ldd: {tool}: boom",)


def test_ldd_is_not_run_when_disabled(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    profile = parse_profile({"filesystem": {"rox": [tool]}}, name="t", source="/p/t.yaml")
    fake = FakeLdd()
    with_command(effective_rules(profile, ENV, CWD), tool, libraries=fake)
    assert fake.calls == []
    assert os.access(tool, os.X_OK)
