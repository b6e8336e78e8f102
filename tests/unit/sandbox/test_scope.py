"""The call's cgroup scope (registry_core.sandbox.scope): detection and the argv it builds."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest

from registry_core.sandbox import describe as describe_mod
from registry_core.sandbox import scope as sc
from registry_core.sandbox.limits import CallLimits, stopped_by_limit

LIMITS = CallLimits(tasks=64, memory=512 << 20, cpu=30)
SCOPE = sc.Scope("/usr/bin/systemd-run", "/run/user/1000")


def _manager(runtime: Path, *, mode: int = 0o755) -> Path:
    """A runtime dir holding what a user manager leaves there: ``systemd/private``."""
    directory = runtime / "systemd"
    directory.mkdir(parents=True)
    directory.chmod(mode)
    path = directory / "private"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
    return path


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """systemd-run found as a trusted program; records the names looked up."""
    asked: list[str] = []

    def find(name: str) -> str | None:
        asked.append(name)
        return f"/usr/bin/{name}"

    monkeypatch.setattr(sc, "find_trusted", find)
    return asked


def test_a_socket_of_ours_and_a_trusted_systemd_run_is_a_manager(
    tmp_path: Path, trusted: list[str]
) -> None:
    _manager(tmp_path)
    found = sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)})
    assert found == sc.Scope("/usr/bin/systemd-run", str(tmp_path))
    assert trusted == ["systemd-run"]


def test_no_socket_is_no_manager_and_nothing_else_is_looked_at(
    tmp_path: Path, trusted: list[str]
) -> None:
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    (tmp_path / "systemd").mkdir()
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    assert trusted == []  # the common case costs a stat, no program lookup


def test_without_a_runtime_dir_there_is_no_manager(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trusted: list[str]
) -> None:
    monkeypatch.setattr(sc, "session_runtime_dir", lambda env: None)
    assert sc.find_scope({}) is None


def test_a_runtime_dir_found_without_the_variable_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trusted: list[str]
) -> None:
    _manager(tmp_path)
    monkeypatch.setattr(sc, "session_runtime_dir", lambda env: tmp_path)
    assert sc.find_scope({}) == sc.Scope("/usr/bin/systemd-run", str(tmp_path))


def test_a_regular_file_or_a_symlink_is_not_the_managers_socket(
    tmp_path: Path, trusted: list[str]
) -> None:
    (tmp_path / "systemd").mkdir()
    (tmp_path / "systemd" / "private").write_text("")
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    other = tmp_path / "other"
    real = _manager(other)
    (tmp_path / "systemd" / "private").unlink()
    (tmp_path / "systemd" / "private").symlink_to(real)
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None


@pytest.mark.parametrize("mode", [0o775, 0o757])
def test_a_socket_directory_others_can_write_is_not_trusted(
    tmp_path: Path, trusted: list[str], mode: int
) -> None:
    _manager(tmp_path, mode=mode)
    assert stat.S_IMODE(os.stat(tmp_path / "systemd").st_mode) == mode
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None


def test_a_socket_of_another_user_is_not_ours(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trusted: list[str]
) -> None:
    _manager(tmp_path)
    other = os.getuid() + 1
    monkeypatch.setattr(sc.os, "getuid", lambda: other)
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None


def test_no_trusted_systemd_run_is_no_scope(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _manager(tmp_path)
    monkeypatch.setattr(sc, "find_trusted", lambda name: None)
    assert sc.find_scope({"XDG_RUNTIME_DIR": str(tmp_path)}) is None


def test_detection_without_a_manager_is_cheap(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    start = time.perf_counter()
    for _ in range(1000):
        assert sc.find_scope(env) is None
    assert (time.perf_counter() - start) / 1000 < 0.001  # far below the 15 ms budget


# --- The argv ------------------------------------------------------------------------------

PREFIX = [
    "/usr/bin/systemd-run",
    "--user",
    "--scope",
    "--quiet",
    "--collect",
    "--unit=ollie-call-0123",
    "--description=ollie-tools sandboxed call",
    "-p",
    "TasksMax=64",
    "-p",
    f"MemoryMax={512 << 20}",
    "-p",
    "MemorySwapMax=0",
    "--",
]


def test_bwrap_runs_in_a_scope_bounded_by_the_calls_limits() -> None:
    env = {"PATH": "/usr/bin", "XDG_RUNTIME_DIR": "/run/user/1000"}
    argv, run_env = sc.scoped_command(
        SCOPE, ["/usr/bin/bwrap", "--a", "b"], env, LIMITS, "ollie-call-0123"
    )
    assert argv == [*PREFIX, "/usr/bin/bwrap", "--a", "b"]
    assert run_env == env and run_env is not env


def test_a_tool_environment_without_the_runtime_dir_stays_without_it() -> None:
    env = {"PATH": "/usr/bin"}
    argv, run_env = sc.scoped_command(
        SCOPE, ["/usr/bin/bwrap", "--a"], env, LIMITS, "ollie-call-0123"
    )
    # systemd-run needs it to find the manager; bwrap takes it away again.
    assert run_env == {"PATH": "/usr/bin", "XDG_RUNTIME_DIR": "/run/user/1000"}
    assert argv == [*PREFIX, "/usr/bin/bwrap", "--unsetenv", "XDG_RUNTIME_DIR", "--a"]
    assert env == {"PATH": "/usr/bin"}


def test_a_tool_environment_with_another_runtime_dir_gets_it_back() -> None:
    env = {"XDG_RUNTIME_DIR": "/elsewhere"}
    argv, run_env = sc.scoped_command(
        SCOPE, ["/usr/bin/bwrap", "--a"], env, LIMITS, "ollie-call-0123"
    )
    assert run_env == {"XDG_RUNTIME_DIR": "/run/user/1000"}
    assert argv[len(PREFIX) :] == [
        "/usr/bin/bwrap",
        "--setenv",
        "XDG_RUNTIME_DIR",
        "/elsewhere",
        "--a",
    ]


def test_each_call_gets_a_unit_of_its_own() -> None:
    names = {sc.unit_name() for _ in range(50)}
    assert len(names) == 50
    assert all(name.startswith("ollie-call-") and len(name) == 27 for name in names)
    argv, _ = sc.scoped_command(SCOPE, ["/usr/bin/bwrap"], {}, LIMITS)
    (unit,) = [arg for arg in argv if arg.startswith("--unit=")]
    assert unit.startswith("--unit=ollie-call-") and unit not in PREFIX


@pytest.mark.parametrize(
    ("exit_code", "stderr", "reason"),
    [
        (
            1,
            b"Failed to connect to bus: No such file or directory\n",
            "Failed to connect to bus: No such file or directory",
        ),
        (
            1,
            b"Failed to start transient scope unit: Access denied\nmore\n",
            "Failed to start transient scope unit: Access denied",
        ),
        (1, b"bwrap: Creating new namespace failed\n", None),
        (2, b"Failed to connect to bus\n", None),
        (0, b"Failed to x\n", None),
        (1, b"", None),
    ],
)
def test_systemd_runs_own_failure_is_told_from_anything_else(
    exit_code: int, stderr: bytes, reason: str | None
) -> None:
    assert sc.scope_not_created(exit_code, stderr) == reason


def test_the_unscoped_note_says_what_still_holds() -> None:
    assert sc.unscoped_note("Failed to connect to bus: x") == (
        "cgroup limits: systemd-run could not create the call's scope"
        " (Failed to connect to bus: x); rlimits only"
    )


# --- What the call and `sandbox show` say -------------------------------------------------


@pytest.mark.parametrize("code", [-9, 137])
def test_a_kill_in_a_scope_names_the_memory_bound(code: int) -> None:
    assert stopped_by_limit(code, LIMITS, scoped=True) == (
        "killed (SIGKILL), most likely by the memory limit of the call's cgroup"
        " (limits.memory: 512M for the whole call)"
    )
    assert stopped_by_limit(code, LIMITS) is None  # rlimits never kill with SIGKILL first


def test_the_cpu_note_is_the_same_in_a_scope() -> None:
    assert stopped_by_limit(152, LIMITS, scoped=True) == stopped_by_limit(152, LIMITS)
    assert stopped_by_limit(0, LIMITS, scoped=True) is None


@pytest.mark.parametrize(
    ("bwrap", "cgroup", "says"),
    [
        (True, True, "cgroup (systemd scope) + rlimits"),
        (True, False, "rlimits"),
        (False, True, "rlimits (memory and cpu only)"),
        (False, False, "rlimits (memory and cpu only)"),
    ],
)
def test_sandbox_show_names_what_enforces_the_limits(bwrap: bool, cgroup: bool, says: str) -> None:
    assert describe_mod._limits_enforced_by(bwrap, cgroup) == says
