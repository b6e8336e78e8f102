"""Tests of the kernel-independent parts of registry_core.sandbox.apply.

Everything here runs with an explicit ABI of 0..3, so no Landlock ruleset is
created; the real enforcement is tested in tests/integration/test_landlock.py.
"""

from __future__ import annotations

import pytest

from registry_core.errors import LandlockUnavailableError, SandboxError
from registry_core.sandbox.apply import ACCESS_RIGHTS, SandboxCache, gaps, prepare, sandbox_env
from registry_core.sandbox.landlock import FILE_ONLY_ACCESS, FsAccess, fs_access_for_abi
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def make_rules(
    mode: NetworkMode = NetworkMode.RESTRICTED,
    *,
    best_effort: bool = False,
    env: tuple[str, ...] = (),
    paths: tuple[PathRule, ...] = (),
) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source="/p/t.yaml",
        paths=paths,
        network=NetworkPolicy(mode, (), (443,) if mode is NetworkMode.RESTRICTED else ()),
        env=env,
        best_effort=best_effort,
    )


def features(rules: EffectiveRules, abi: int) -> set[str]:
    return {gap.feature for gap in gaps(rules, abi)}


def test_access_classes_nest() -> None:
    assert ACCESS_RIGHTS[Access.RO] == FsAccess.READ_FILE | FsAccess.READ_DIR
    assert ACCESS_RIGHTS[Access.ROX] == ACCESS_RIGHTS[Access.RO] | FsAccess.EXECUTE
    assert ACCESS_RIGHTS[Access.RWX] == fs_access_for_abi(7)
    assert not ACCESS_RIGHTS[Access.RW] & FsAccess.EXECUTE
    assert ACCESS_RIGHTS[Access.RO] & FILE_ONLY_ACCESS == FsAccess.READ_FILE


def test_no_landlock_is_a_single_requested_gap() -> None:
    found = gaps(make_rules(), 0)
    assert [(g.feature, g.requested) for g in found] == [("landlock", True)]


def test_gaps_by_abi() -> None:
    rules = make_rules()
    assert {"truncate", "tcp", "ioctl_dev", "scope"} <= features(rules, 1)
    assert "truncate" not in features(rules, 3)
    assert "tcp" not in features(rules, 4)
    assert "ioctl_dev" not in features(rules, 5)
    assert "scope" not in features(rules, 6)
    assert features(rules, 7) == {"udp", "unix_sockets"}


def test_unrestricted_network_has_no_tcp_gap() -> None:
    rules = make_rules(NetworkMode.UNRESTRICTED)
    assert "tcp" not in features(rules, 3)
    assert "udp" not in features(rules, 7)


def test_no_landlock_refuses_without_best_effort() -> None:
    with pytest.raises(LandlockUnavailableError, match="best_effort") as info:
        prepare(make_rules(), abi=0)
    assert isinstance(info.value, SandboxError)
    assert "/p/t.yaml" in str(info.value)


def test_no_landlock_with_best_effort_only_sets_no_new_privs() -> None:
    sandbox = prepare(make_rules(best_effort=True), abi=0)
    assert not sandbox.enforcing
    assert sandbox.report.enforced is False
    assert sandbox.report.abi == 0
    assert sandbox.report.unenforced[0].startswith("landlock:")


@pytest.mark.parametrize("mode", [NetworkMode.RESTRICTED, NetworkMode.DENY])
def test_network_rules_on_old_abi_refuse_without_best_effort(mode: NetworkMode) -> None:
    with pytest.raises(LandlockUnavailableError, match=r"ABI 3.*needs Landlock ABI 4"):
        prepare(make_rules(mode), abi=3)


def test_sandbox_env_keeps_only_the_allowlist() -> None:
    base = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_TIME": "de_DE",
        "LC_NUMERIC": "de_DE",
        "DISPLAY": ":0",
        "WAYLAND_DISPLAY": "wayland-0",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1/bus",
        "SSH_AUTH_SOCK": "/tmp/ssh/agent",
        "GITHUB_TOKEN": "secret",
        "OLLIE_TOOLS_PATH": "/t",
        "OLLIE_ELEVATE_SOCKET": "/run/e.sock",
        "PWD": "/w",
    }
    env = sandbox_env(make_rules(env=("PATH", "LANG", "LC_*", "NOT_PRESENT")), base)
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_TIME": "de_DE",
        "LC_NUMERIC": "de_DE",
        "OLLIE_TOOLS_PATH": "/t",
        "OLLIE_ELEVATE_SOCKET": "/run/e.sock",
        "PWD": "/w",
    }


def test_sandbox_env_passes_a_socket_variable_only_when_listed() -> None:
    base = {"DISPLAY": ":0", "SSH_AUTH_SOCK": "/s"}
    assert sandbox_env(make_rules(env=("DISPLAY",)), base, always=()) == {"DISPLAY": ":0"}


def test_sandbox_env_prefix_needs_the_star() -> None:
    assert sandbox_env(make_rules(env=("LC",)), {"LC_ALL": "C"}, always=()) == {}


def test_cache_builds_once_per_rule_set_and_evicts() -> None:
    cache = SandboxCache(max_entries=2, abi=0)
    one = make_rules(best_effort=True, paths=(PathRule("/a", Access.RO, "x"),))
    two = make_rules(best_effort=True, paths=(PathRule("/b", Access.RO, "x"),))
    three = make_rules(best_effort=True, paths=(PathRule("/c", Access.RO, "x"),))
    first = cache.get(one)
    assert cache.get(one) is first
    cache.get(two)
    cache.get(three)
    assert len(cache) == 2
    assert first.closed
    assert cache.get(one) is not first
    cache.close()
    assert len(cache) == 0


def test_cache_refusal_is_not_cached() -> None:
    cache = SandboxCache(abi=0)
    with pytest.raises(LandlockUnavailableError):
        cache.get(make_rules())
    assert len(cache) == 0


def test_cache_needs_room() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        SandboxCache(max_entries=0)
