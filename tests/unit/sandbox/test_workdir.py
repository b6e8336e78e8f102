"""Tests of the working directories a sandboxed call refuses (registry_core.sandbox.workdir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.errors import SandboxError, UnsafeWorkingDirectoryError
from registry_core.sandbox.workdir import check_working_directory


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".config" / "ollie" / "tools").mkdir(parents=True)
    (home / "project").mkdir()
    return {"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path / "run")}


@pytest.mark.parametrize(
    ("cwd", "reason"),
    [
        ("/", "the root directory"),
        ("/tmp", "the shared temporary directory"),
        ("{home}", "your home directory"),
        ("{home}/.config", "an ancestor of Ollie's configuration directory"),
        ("{home}/.config/ollie/tools", "inside Ollie's configuration directory"),
        ("{home}/.cache/ollie/x", "inside Ollie's cache directory"),
        ("{home}/.local/state/ollie", "inside Ollie's state directory"),
        ("{tmp}/run", "an ancestor of the elevation broker's socket directory"),
        ("{tmp}/run/ollie", "the elevation broker's socket directory"),
        ("{tmp}/tools/sub", "inside a tools directory"),
    ],
)
def test_dangerous_directories_are_refused(
    env: dict[str, str], tmp_path: Path, cwd: str, reason: str
) -> None:
    path = cwd.format(home=env["HOME"], tmp=tmp_path)
    with pytest.raises(UnsafeWorkingDirectoryError) as caught:
        check_working_directory(path, env, [tmp_path / "tools"])
    assert caught.value.cwd == path
    assert reason in caught.value.reason
    assert "project directory" in str(caught.value)
    assert isinstance(caught.value, SandboxError)  # the CLI's sandbox-error path


def test_a_project_directory_is_fine(env: dict[str, str], tmp_path: Path) -> None:
    check_working_directory(env["HOME"] + "/project", env, [tmp_path / "tools"])
    # A subdirectory of a socket directory configured elsewhere is harmless ...
    sockets = tmp_path / "sockets"
    elsewhere = {**env, "OLLIE_ELEVATE_SOCKET": str(sockets / "b.sock")}
    check_working_directory(str(sockets / "sub"), elsewhere, [])


def test_inside_ollies_runtime_directory_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    # ... but the default one is Ollie's runtime directory (MCP token, ollie-remote's sockets).
    with pytest.raises(UnsafeWorkingDirectoryError) as caught:
        check_working_directory(str(tmp_path / "run" / "ollie" / "sub"), env, [])
    assert caught.value.reason == f"inside Ollie's runtime directory ({tmp_path / 'run' / 'ollie'})"


def test_a_symlink_to_home_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(env["HOME"])
    with pytest.raises(UnsafeWorkingDirectoryError):
        check_working_directory(str(tmp_path / "link"), env, [])
