"""The session's runtime directory: $XDG_RUNTIME_DIR, else logind's /run/user/<uid> when
it is ours and 0700, else the private fallback under Ollie's cache directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core import paths


@pytest.fixture
def run_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "run-user"
    root.mkdir()
    monkeypatch.setattr(paths, "SYSTEM_RUNTIME_ROOT", str(root))
    return root / str(os.getuid())


def test_xdg_runtime_dir_wins(run_user: Path, tmp_path: Path) -> None:
    run_user.mkdir(mode=0o700)
    assert paths.runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == tmp_path


def test_loginds_directory_is_used_without_the_variable(run_user: Path) -> None:
    run_user.mkdir(mode=0o700)
    env = {"HOME": "/home/x"}
    assert paths.runtime_dir(env) == run_user
    assert paths.elevate_socket(env) == run_user / "ollie" / "elevate.sock"
    assert paths.sandbox_tmp_base(env) == run_user / "ollie-tmp"


@pytest.mark.parametrize("mode", [0o755, 0o711, 0o770])
def test_a_directory_others_may_enter_is_not_taken(run_user: Path, mode: int) -> None:
    run_user.mkdir()
    run_user.chmod(mode)
    env = {"HOME": "/home/x"}
    assert paths.runtime_dir(env) == Path("/home/x/.cache/ollie") / f"runtime-{os.uname().nodename}"


def test_a_symlink_is_not_taken(run_user: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    run_user.symlink_to(target)
    assert paths.session_runtime_dir({}) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_directory_of_another_user_is_not_taken(run_user: Path) -> None:
    run_user.mkdir(mode=0o700)
    os.chown(run_user, 65534, 65534)
    assert paths.session_runtime_dir({}) is None


def test_nothing_there_falls_back_to_the_cache(run_user: Path) -> None:
    assert paths.session_runtime_dir({}) is None
    assert paths.sandbox_tmp_base({"HOME": "/h"}) == Path("/h/.cache/ollie/tmp")
