"""Tests of path templates and effective rules (registry_core.sandbox.rules)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.sandbox.ldd import LddResult
from registry_core.sandbox.profile import Access, NetworkMode, parse_profile
from registry_core.sandbox.rules import (
    UnresolvedTemplateError,
    effective_rules,
    expand_path,
    template_value,
)

ENV = {"HOME": "/home/u", "TMPDIR": "/tmp/u", "PROJECT": "/srv/p"}
CWD = "/work/here"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{CWD}", ("/work/here",)),
        ("{CWD}/sub/", ("/work/here/sub",)),
        ("{HOME}/.gitconfig", ("/home/u/.gitconfig",)),
        ("~", ("/home/u",)),
        ("~/bin", ("/home/u/bin",)),
        ("{TMPDIR}", ("/tmp/u",)),
        ("{XDG_CONFIG_HOME}/ollie/tools", ("/home/u/.config/ollie/tools",)),
        ("{XDG_DATA_HOME}", ("/home/u/.local/share",)),
        ("{XDG_CACHE_HOME}", ("/home/u/.cache",)),
        ("{XDG_STATE_HOME}", ("/home/u/.local/state",)),
        ("{XDG_DATA_DIRS}/icons", ("/usr/local/share/icons", "/usr/share/icons")),
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


@pytest.mark.parametrize("template", ["{NOPE}/x", "{XDG_RUNTIME_DIR}", "~other/x", "{EMPTY}"])
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
            "network": {"connect_tcp": [443], "bind_tcp": ["8080"]},
            "env": ["PATH"],
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


def test_add_exec_paths_are_rox() -> None:
    profile = parse_profile(
        {"advanced": {"add_exec": ["{HOME}/bin/tool"]}}, name="t", source="/p/t.yaml"
    )
    rules = effective_rules(profile, ENV, CWD)
    assert [(r.path, r.access, r.origin) for r in rules.paths] == [
        ("/home/u/bin/tool", Access.ROX, "advanced.add_exec")
    ]


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


def test_ldd_adds_libraries_of_listed_executables(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    (tmp_path / "dir").mkdir()
    profile = parse_profile(
        {
            "filesystem": {"rox": [tool, str(tmp_path / "dir")], "ro": ["/etc"]},
            "advanced": {"ldd": True},
        },
        name="t",
        source="/p/t.yaml",
    )
    fake = FakeLdd(LddResult(("/lib/libc.so.6", "/lib64/ld.so"), ("libgone.so",)))
    rules = effective_rules(profile, ENV, CWD, libraries=fake)
    assert fake.calls == [tool]  # not the directory, not the ro entry
    added = [(r.path, r.access) for r in rules.paths if r.origin.startswith("advanced.ldd")]
    assert added == [("/lib/libc.so.6", Access.ROX), ("/lib64/ld.so", Access.ROX)]
    assert any("libgone.so" in warning for warning in rules.warnings)


def test_ldd_failure_is_a_warning(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    profile = parse_profile(
        {"filesystem": {"rwx": [tool]}, "advanced": {"ldd": True}}, name="t", source="/p/t.yaml"
    )
    rules = effective_rules(profile, ENV, CWD, libraries=FakeLdd(error=OSError("boom")))
    assert [r.path for r in rules.paths] == [tool]
    assert rules.warnings == (f"advanced.ldd: {tool}: boom",)


def test_ldd_is_not_run_when_disabled(tmp_path: Path) -> None:
    tool = make_executable(tmp_path / "tool")
    profile = parse_profile({"filesystem": {"rox": [tool]}}, name="t", source="/p/t.yaml")
    fake = FakeLdd()
    effective_rules(profile, ENV, CWD, libraries=fake)
    assert fake.calls == []
    assert os.access(tool, os.X_OK)
