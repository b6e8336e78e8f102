"""Edges of path-template expansion an attacker would lean on (registry_core.sandbox.rules).

Each test pins one decision of :mod:`registry_core.sandbox.rules` that a
mutation test found unpinned: which variables split on colons, where the
literal text around a template goes, which rules are merged, what a dropped
rule's warning says.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.sandbox.ldd import LddResult
from registry_core.sandbox.profiles import (
    Access,
    LogLevel,
    NetworkMode,
    SandboxProfile,
    parse_profile,
)
from registry_core.sandbox.rules import (
    EffectiveRules,
    PathRule,
    UnresolvedTemplateError,
    effective_rules,
    expand_path,
    template_value,
    with_command,
)

CWD = "/work/here"


def profile(data: dict[str, object]) -> SandboxProfile:
    return parse_profile(data, name="edge", source="/p/edge.yaml")


@pytest.mark.parametrize("name", ["PATH", "LD_LIBRARY_PATH", "XDG_DATA_DIRS", "MY_DIRS"])
def test_list_variables_expand_into_one_rule_per_entry(name: str) -> None:
    env = {"HOME": "/h", name: "/one:/two"}
    assert expand_path(f"{{{name}}}/x", env, CWD) == ("/one/x", "/two/x")


@pytest.mark.parametrize("name", ["PATHS", "MYPATH", "SOME_DIR", "DIRS", "PROJECT"])
def test_other_variables_are_never_split_on_a_colon(name: str) -> None:
    # A directory whose name holds a colon must not smuggle in a second path.
    env = {"HOME": "/h", name: "/srv/a:/etc"}
    assert expand_path(f"{{{name}}}", env, CWD) == ("/srv/a:/etc",)


def test_a_home_with_a_colon_is_one_path() -> None:
    env = {"HOME": "/home/a:/etc"}
    assert template_value("HOME", env, CWD) == ("/home/a:/etc",)
    assert expand_path("{HOME}/.gitconfig", env, CWD) == ("/home/a:/etc/.gitconfig",)


def test_an_unset_home_falls_back_to_the_dispatchers_own() -> None:
    home = str(Path.home())
    assert template_value("HOME", {}, CWD) == (home,)
    assert template_value("HOME", {"HOME": ""}, CWD) == (home,)
    assert expand_path("{XDG_CACHE_HOME}", {}, CWD) == (f"{home}/.cache",)


def test_xdg_data_and_cache_homes_come_from_the_environment_when_set() -> None:
    env = {"HOME": "/h", "XDG_DATA_HOME": "/data", "XDG_CACHE_HOME": "/cache"}
    assert expand_path("{XDG_DATA_HOME}", env, CWD) == ("/data",)
    assert expand_path("{XDG_CACHE_HOME}", env, CWD) == ("/cache",)
    assert expand_path("{XDG_STATE_HOME}", {**env, "XDG_STATE_HOME": "/st"}, CWD) == ("/st",)


def test_cwd_is_the_calls_directory_not_an_environment_variable() -> None:
    env = {"HOME": "/h", "CWD": "/etc"}
    assert expand_path("{CWD}", env, CWD) == (CWD,)


def test_text_before_and_after_a_template_stays_in_place() -> None:
    env = {"HOME": "/h", "NAME": "proj", "LIST_PATH": "a:b"}
    assert expand_path("/srv/{NAME}/data", env, CWD) == ("/srv/proj/data",)
    assert expand_path("/x{NAME}y", env, CWD) == ("/xprojy",)
    assert expand_path("/{NAME}/{NAME}", env, CWD) == ("/proj/proj",)
    assert expand_path("/r/{LIST_PATH}/{NAME}", env, CWD) == ("/r/a/proj", "/r/b/proj")


def test_duplicate_expansions_are_listed_once_in_order() -> None:
    env = {"HOME": "/h", "PATH": "/b:/a:/b:/a/"}
    assert expand_path("{PATH}", env, CWD) == ("/b", "/a")


def test_the_unresolved_error_names_the_template_and_the_variable() -> None:
    with pytest.raises(UnresolvedTemplateError) as caught:
        expand_path("/x/{NOPE}/y", {"HOME": "/h"}, CWD)
    assert (caught.value.template, caught.value.variable) == ("/x/{NOPE}/y", "NOPE")
    assert str(caught.value) == "'/x/{NOPE}/y': template variable {NOPE} is not set"
    with pytest.raises(UnresolvedTemplateError) as tilde:
        expand_path("~/notes", {"HOME": "/h"}, CWD)
    assert (tilde.value.template, tilde.value.variable) == ("~/notes", "~")


def test_the_second_unset_variable_is_named_when_the_first_is_set() -> None:
    with pytest.raises(UnresolvedTemplateError) as caught:
        expand_path("{HOME}/{NOPE}", {"HOME": "/h"}, CWD)
    assert caught.value.variable == "NOPE"


def test_dropped_rules_are_warned_and_reported_word_for_word() -> None:
    rules = effective_rules(
        profile({"filesystem": {"rw": ["~/notes"], "rox": ["{NOPE}/bin"]}}),
        {"HOME": "/h"},
        CWD,
    )
    assert rules.paths == ()
    assert rules.warnings == (
        "filesystem.rox, line 3: '{NOPE}/bin' dropped: template variable {NOPE} is not set",
        "filesystem.rw, line 5: '~/notes' dropped:"
        " '~' is not expanded (as in ollie-core); write {HOME}",
    )
    assert [(s.path, s.reason) for s in rules.skipped] == [
        ("{NOPE}/bin", "template variable {NOPE} is not set"),
        ("~/notes", "'~' is not expanded (as in ollie-core); write {HOME}"),
    ]


def test_the_profiles_own_warnings_come_first() -> None:
    rules = effective_rules(
        profile({"filesystem": {"ro": ["{NOPE}"]}, "surprise": 1}), {"HOME": "/h"}, CWD
    )
    assert len(rules.warnings) == 2
    assert "surprise" in rules.warnings[0]
    assert rules.warnings[1].startswith("filesystem.ro, line 3: '{NOPE}' dropped")


def test_the_same_path_is_kept_once_per_access_class() -> None:
    rules = effective_rules(
        profile(
            {
                "filesystem": {"ro": ["/srv", "/srv/", "{CWD}"], "rw": ["/srv", CWD]},
                "advanced": {"add_exec": ["/srv"]},
            }
        ),
        {"HOME": "/h"},
        CWD,
    )
    assert [(r.path, r.access, r.origin) for r in rules.paths] == [
        ("/srv", Access.RO, "filesystem.ro, line 6"),  # "/srv/" (line 7) is the same path
        (CWD, Access.RO, "filesystem.ro, line 8"),
        ("/srv", Access.RW, "filesystem.rw, line 10"),
        (CWD, Access.RW, "filesystem.rw, line 11"),
        ("/srv", Access.ROX, "advanced.add_exec (list)"),
    ]


def test_every_access_class_keeps_its_own_origin() -> None:
    rules = effective_rules(
        profile({"filesystem": {"ro": ["/a"], "rox": ["/b"], "rw": ["/c"], "rwx": ["/d"]}}),
        {"HOME": "/h"},
        CWD,
    )
    assert [(r.path, r.access, r.origin) for r in rules.paths] == [
        ("/a", Access.RO, "filesystem.ro, line 3"),
        ("/b", Access.ROX, "filesystem.rox, line 5"),
        ("/c", Access.RW, "filesystem.rw, line 7"),
        ("/d", Access.RWX, "filesystem.rwx, line 9"),
    ]


@pytest.mark.parametrize(
    ("network", "mode", "ports"),
    [
        (
            {"enabled": True, "unrestricted": True, "connect_tcp": [443]},
            NetworkMode.UNRESTRICTED,
            (),
        ),
        (
            {"enabled": True, "bind_tcp": [80], "connect_tcp": [443]},
            NetworkMode.RESTRICTED,
            ((80,), (443,)),
        ),
    ],
)
def test_ports_are_kept_only_for_a_restricted_network(
    network: dict[str, object], mode: NetworkMode, ports: tuple[tuple[int, ...], ...]
) -> None:
    rules = effective_rules(profile({"network": network}), {"HOME": "/h"}, CWD)
    assert rules.network.mode is mode
    assert (rules.network.bind_tcp, rules.network.connect_tcp) == (ports or ((), ()))


def test_the_log_level_and_flags_are_the_profiles() -> None:
    rules = effective_rules(
        profile({"general": {"log_level": "debug"}, "advanced": {"ldd": True, "add_exec": True}}),
        {"HOME": "/h"},
        CWD,
    )
    assert rules.log_level is LogLevel.DEBUG
    assert (rules.ldd, rules.add_exec, rules.best_effort) == (True, True, False)
    default = effective_rules(profile({}), {"HOME": "/h"}, CWD)
    assert default.log_level is LogLevel.ERROR
    assert (default.ldd, default.add_exec) == (False, False)


def test_the_cache_key_changes_with_access_network_and_best_effort() -> None:
    base = effective_rules(profile({"filesystem": {"ro": ["/a"]}}), {"HOME": "/h"}, CWD)
    wider = effective_rules(profile({"filesystem": {"rw": ["/a"]}}), {"HOME": "/h"}, CWD)
    online = effective_rules(
        profile({"filesystem": {"ro": ["/a"]}, "network": {"enabled": True}}), {"HOME": "/h"}, CWD
    )
    lax = effective_rules(
        profile({"filesystem": {"ro": ["/a"]}, "general": {"best_effort": True}}),
        {"HOME": "/h"},
        CWD,
    )
    keys = [r.cache_key() for r in (base, wider, online, lax)]
    assert len(set(keys)) == 4
    assert base.cache_key() == (
        (("/a", Access.RO),),
        base.network,
        False,
    )


class Libraries:
    def __init__(self, *libraries: str) -> None:
        self.result = LddResult(libraries, ())

    def __call__(self, executable: str) -> LddResult:
        return self.result


def bare(*paths: PathRule, ldd: bool = False, add_exec: bool = False) -> EffectiveRules:
    return EffectiveRules(
        profile="edge",
        source="/p/edge.yaml",
        paths=paths,
        network=effective_rules(profile({}), {"HOME": "/h"}, CWD).network,
        env=(),
        best_effort=False,
        ldd=ldd,
        add_exec=add_exec,
        warnings=("earlier",),
    )


def test_with_command_adds_nothing_already_granted_and_keeps_other_access_classes() -> None:
    rules = bare(
        PathRule("/bin/tool", Access.ROX, "filesystem.rox"),
        PathRule("/lib/a.so", Access.RO, "filesystem.ro"),
        ldd=True,
        add_exec=True,
    )
    ran = with_command(rules, "/bin/tool", libraries=Libraries("/lib/a.so", "/lib/b.so"))
    assert [(r.path, r.access, r.origin) for r in ran.paths] == [
        ("/bin/tool", Access.ROX, "filesystem.rox"),
        ("/lib/a.so", Access.RO, "filesystem.ro"),
        ("/lib/a.so", Access.ROX, "advanced.ldd (/bin/tool)"),
        ("/lib/b.so", Access.ROX, "advanced.ldd (/bin/tool)"),
    ]
    assert ran.warnings == ("earlier",)


def test_with_command_always_uses_the_given_origin() -> None:
    ran = with_command(bare(), "/bin/tool", origin="the tool", always=True, libraries=Libraries())
    assert [(r.path, r.access, r.origin) for r in ran.paths] == [
        ("/bin/tool", Access.ROX, "the tool")
    ]


def test_with_command_adds_nothing_without_add_exec_ldd_or_always() -> None:
    rules = bare(PathRule("/a", Access.RO, "filesystem.ro"))
    assert with_command(rules, "/bin/tool", libraries=Libraries("/lib/x.so")) == rules


def test_missing_libraries_are_warned_word_for_word() -> None:
    def lookup(executable: str) -> LddResult:
        return LddResult(("/lib/a.so",), ("libgone.so", "libother.so"))

    ran = with_command(bare(ldd=True), "/bin/tool", libraries=lookup)
    assert ran.warnings == (
        "earlier",
        "advanced.ldd: /bin/tool: library libgone.so not found",
        "advanced.ldd: /bin/tool: library libother.so not found",
    )


def test_the_default_library_lookup_runs_the_real_resolver() -> None:
    # No resolver passed: the command's real libraries are looked up with ldd.
    ran = with_command(bare(ldd=True), "/bin/sh")
    assert ran.paths
    for rule in ran.paths:
        assert os.path.isabs(rule.path) and os.path.exists(rule.path)
        assert (rule.access, rule.origin) == (Access.ROX, "advanced.ldd (/bin/sh)")
    assert any("libc.so" in rule.path for rule in ran.paths)
