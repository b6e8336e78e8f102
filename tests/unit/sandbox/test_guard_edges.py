"""Edges of the broker-socket guard (registry_core.sandbox.guard): a writable rule at
``/``, the refusal's every field, and the in-process broker's socket path."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core import paths
from registry_core.errors import BrokerSocketExposedError
from registry_core.sandbox.guard import exposing_rule, guard_broker_socket, refuse_exposed_socket
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def rules(*entries: PathRule) -> EffectiveRules:
    return EffectiveRules(
        profile="strict",
        source="/cfg/ollie/sandbox/strict.yaml",
        paths=entries,
        network=NetworkPolicy(NetworkMode.DENY),
        env=(),
        best_effort=False,
    )


@pytest.mark.parametrize("access", [Access.RW, Access.RWX])
def test_a_writable_rule_at_the_root_covers_every_socket(tmp_path: Path, access: Access) -> None:
    socket = tmp_path / "run" / "ollie" / "elevate.sock"
    rule = PathRule("/", access, "filesystem.rw")
    assert exposing_rule(rules(rule), socket) == rule
    assert exposing_rule(rules(PathRule("/", Access.ROX, "filesystem.rox")), socket) is None


def test_the_refusal_carries_every_field_of_the_rule(tmp_path: Path) -> None:
    socket = tmp_path / "run" / "ollie" / "elevate.sock"
    first = PathRule(str(tmp_path / "run"), Access.RWX, "advanced.ldd (/bin/x)")
    second = PathRule(str(tmp_path), Access.RW, "filesystem.rw")
    with pytest.raises(BrokerSocketExposedError) as caught:
        refuse_exposed_socket(rules(first, second), socket)
    error = caught.value
    assert (error.profile, error.source, error.rule_path, error.access, error.origin) == (
        "strict",
        "/cfg/ollie/sandbox/strict.yaml",
        str(tmp_path / "run"),
        "rwx",
        "advanced.ldd (/bin/x)",
    )
    assert error.socket == str(socket)
    assert f"(from advanced.ldd (/bin/x)), which holds the elevation broker's socket {socket}:" in (
        str(error)
    )


def test_the_in_process_brokers_socket_directory_is_guarded_exactly(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "OLLIE_ELEVATE_SOCKET": str(tmp_path / "configured" / "b.sock"),
    }
    runtime = paths.runtime_dir(env)
    assert runtime == tmp_path / "run"
    # A rule at <runtime>/ollie itself, not above it: only that socket's directory.
    with pytest.raises(BrokerSocketExposedError) as caught:
        guard_broker_socket(rules(PathRule(str(runtime / "ollie"), Access.RW, "o")), env)
    assert caught.value.socket == str(runtime / "ollie" / "elevate.sock")
    guard_broker_socket(rules(PathRule(str(runtime / "other"), Access.RW, "o")), env)
    with pytest.raises(BrokerSocketExposedError) as configured:
        guard_broker_socket(rules(PathRule(str(tmp_path / "configured"), Access.RW, "o")), env)
    assert configured.value.socket == str(tmp_path / "configured" / "b.sock")


@pytest.mark.parametrize("sibling", ["runX", "run/ollieX", "ru", "run/olli"])
def test_a_writable_sibling_whose_name_only_starts_alike_passes(
    tmp_path: Path, sibling: str
) -> None:
    socket = tmp_path / "run" / "ollie" / "elevate.sock"
    rule = PathRule(str(tmp_path / sibling), Access.RW, "filesystem.rw")
    assert exposing_rule(rules(rule), socket) is None
