"""The broker-socket guard: a writable rule at or above the socket's directory refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core import paths
from registry_core.errors import BrokerSocketExposedError, SandboxError
from registry_core.sandbox.guard import exposing_rule, guard_broker_socket, refuse_exposed_socket
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def rules(*paths_: tuple[str | Path, Access]) -> EffectiveRules:
    return EffectiveRules(
        profile="default",
        source="/cfg/ollie/sandbox/default.yaml",
        paths=tuple(PathRule(str(p), a, f"filesystem.{a.value}") for p, a in paths_),
        network=NetworkPolicy(NetworkMode.DENY),
        env=(),
        best_effort=False,
    )


@pytest.fixture
def socket(tmp_path: Path) -> Path:
    (tmp_path / "run" / "ollie").mkdir(parents=True)
    return tmp_path / "run" / "ollie" / "elevate.sock"


@pytest.mark.parametrize("access", [Access.RW, Access.RWX])
@pytest.mark.parametrize("where", ["run/ollie", "run", ".", "run/ollie/"])
def test_a_writable_rule_at_or_above_the_socket_directory_refuses(
    socket: Path, tmp_path: Path, access: Access, where: str
) -> None:
    rule_path = f"{tmp_path}/{where}" if where != "." else str(tmp_path)
    with pytest.raises(BrokerSocketExposedError) as refused:
        refuse_exposed_socket(rules(("/usr", Access.ROX), (rule_path, access)), socket)
    error = refused.value
    assert isinstance(error, SandboxError)  # the CLI reports it like any sandbox problem
    assert (error.profile, error.rule_path, error.access, error.socket) == (
        "default",
        rule_path,
        access.value,
        str(socket),
    )
    message = str(error)
    for part in ("'default'", "default.yaml", rule_path, access.value, str(socket)):
        assert part in message


@pytest.mark.parametrize(
    ("where", "access"),
    [
        ("run/ollie", Access.RO),
        ("run", Access.ROX),
        ("run/ollie/elevate.sock", Access.RW),  # below the directory: cannot rename entries
        ("run/ollie-other", Access.RW),  # a sibling whose name merely starts alike
        ("elsewhere", Access.RWX),
    ],
)
def test_read_only_sibling_and_deeper_rules_pass(
    socket: Path, tmp_path: Path, where: str, access: Access
) -> None:
    assert exposing_rule(rules((tmp_path / where, access)), socket) is None


def test_a_rule_reaching_the_directory_through_a_symlink_refuses(
    socket: Path, tmp_path: Path
) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "run")
    with pytest.raises(BrokerSocketExposedError):
        refuse_exposed_socket(rules((tmp_path / "link", Access.RW)), socket)
    # ...and a socket path given through a symlink is resolved too.
    via_link = tmp_path / "link" / "ollie" / "elevate.sock"
    with pytest.raises(BrokerSocketExposedError):
        refuse_exposed_socket(rules((tmp_path / "run", Access.RW)), via_link)


def test_the_dispatcher_check_covers_the_configured_socket_and_the_runtime_dir(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path / "home"), "OLLIE_ELEVATE_SOCKET": str(tmp_path / "s/e.sock")}
    runtime = paths.runtime_dir(env)
    assert str(runtime).startswith(str(tmp_path / "home" / ".cache" / "ollie" / "runtime-"))
    guard_broker_socket(rules((tmp_path / "work", Access.RW)), env)
    with pytest.raises(BrokerSocketExposedError, match=r"e\.sock"):
        guard_broker_socket(rules((tmp_path / "s", Access.RW)), env)
    # In-process brokers put their sockets beneath the runtime directory.
    with pytest.raises(BrokerSocketExposedError, match="runtime-"):
        guard_broker_socket(rules((tmp_path / "home" / ".cache", Access.RW)), env)


def test_without_xdg_runtime_dir_the_socket_is_never_under_tmp() -> None:
    home = Path("/home/nobody-i12b")  # compared as strings only; need not exist
    env = {"HOME": str(home)}
    socket = paths.elevate_socket(env)
    assert socket.is_relative_to(home / ".cache" / "ollie")
    # The default profile's {TMPDIR} (= /tmp) no longer reaches it.
    assert exposing_rule(rules(("/tmp", Access.RW)), socket) is None
    with_cache = {**env, "XDG_CACHE_HOME": "/srv/cache-i12b"}
    assert paths.elevate_socket(with_cache).is_relative_to("/srv/cache-i12b/ollie")
    assert paths.elevate_socket({**env, "XDG_RUNTIME_DIR": "/run/user/7"}) == Path(
        "/run/user/7/ollie/elevate.sock"
    )


def test_the_namespace_sandboxs_private_tmp_is_not_the_hosts(tmp_path: Path) -> None:
    """Under bwrap, {TMPDIR} names the tool's own fresh /tmp: a host socket in /tmp
    is not behind that rule (and is bound read-only into the view)."""
    socket = Path("/tmp/i12b-runtime/ollie/elevate.sock")
    assert exposing_rule(rules(("/tmp", Access.RW)), socket) is not None
    assert exposing_rule(rules(("/tmp", Access.RW)), socket, private=("/tmp",)) is None
    # Only that very rule is private: a host rule above the socket still refuses.
    with pytest.raises(BrokerSocketExposedError):
        refuse_exposed_socket(
            rules(("/tmp", Access.RW), ("/tmp/i12b-runtime", Access.RW)), socket, ("/tmp",)
        )
