"""Working directories a sandboxed call refuses: every reason word for word, every
protected directory, symlinks and ``~`` (registry_core.sandbox.workdir).

A refused working directory that slipped through would hand a tool write access
to Ollie's configuration, its tools or the broker's socket directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.errors import UnsafeWorkingDirectoryError
from registry_core.sandbox.workdir import check_working_directory, protected_dirs


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    return {"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path / "run")}


def reason(cwd: str | Path, env: dict[str, str], tools: list[Path] | None = None) -> str:
    with pytest.raises(UnsafeWorkingDirectoryError) as caught:
        check_working_directory(str(cwd), env, tools or [])
    assert caught.value.cwd == str(cwd)
    return caught.value.reason


def test_the_fixed_refusals_word_for_word(env: dict[str, str]) -> None:
    assert reason("/", env) == "the root directory"
    assert reason(env["HOME"], env) == "your home directory"
    assert reason("/tmp", env) == "the shared temporary directory"
    assert reason("/tmp/../tmp/", env) == "the shared temporary directory"


def test_the_socket_directory_and_its_ancestors(env: dict[str, str], tmp_path: Path) -> None:
    socket_dir = tmp_path / "run" / "ollie"
    assert reason(socket_dir, env) == "the elevation broker's socket directory"
    assert reason(tmp_path / "run", env) == (
        f"an ancestor of the elevation broker's socket directory ({socket_dir})"
    )


def test_a_configured_socket_elsewhere_is_guarded_there(
    env: dict[str, str], tmp_path: Path
) -> None:
    sockets = tmp_path / "sockets"
    env = {**env, "OLLIE_ELEVATE_SOCKET": str(sockets / "b.sock")}
    assert reason(sockets, env) == "the elevation broker's socket directory"
    assert reason(tmp_path, env) == (
        f"an ancestor of the elevation broker's socket directory ({sockets})"
    )


@pytest.mark.parametrize(
    ("where", "what"),
    [
        (".config/ollie", "Ollie's configuration directory"),
        (".local/state/ollie", "Ollie's state directory"),
        (".cache/ollie", "Ollie's cache directory"),
    ],
)
def test_inside_and_above_each_of_ollies_directories(
    env: dict[str, str], where: str, what: str
) -> None:
    protected = Path(env["HOME"]) / where
    assert reason(protected, env) == f"inside {what} ({protected})"
    assert reason(protected / "deeper" / "still", env) == f"inside {what} ({protected})"
    assert reason(protected.parent, env) == f"an ancestor of {what} ({protected})"


def test_the_private_tmp_base_is_protected(env: dict[str, str], tmp_path: Path) -> None:
    base = tmp_path / "run" / "ollie-tmp"
    what = "where sandboxed calls get their private /tmp"
    assert reason(base / "call-1", env) == f"inside {what} ({base})"
    # Without a runtime directory the private /tmp lives in Ollie's cache directory.
    bare = {"HOME": env["HOME"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert protected_dirs(bare, [])[str(tmp_path / "cache" / "ollie" / "tmp")] == what


def test_a_tools_directory_inside_and_above(env: dict[str, str], tmp_path: Path) -> None:
    tools = tmp_path / "elsewhere" / "tools"
    assert reason(tools / "x", env, [tools]) == f"inside a tools directory ({tools})"
    assert reason(tools.parent, env, [tools]) == f"an ancestor of a tools directory ({tools})"


def test_a_tools_directory_inside_ollies_configuration_keeps_that_name(
    env: dict[str, str],
) -> None:
    tools = Path(env["HOME"]) / ".config" / "ollie" / "tools"
    found = protected_dirs(env, [tools, tools])
    assert found[str(tools.parent)] == "Ollie's configuration directory"
    assert found[str(tools)] == "a tools directory"
    config = protected_dirs(env, [tools.parent])
    assert config[str(tools.parent)] == "Ollie's configuration directory"


def test_symlinks_and_tilde_are_resolved_before_the_check(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Path(env["HOME"]) / ".config" / "ollie"
    config.mkdir(parents=True)
    (tmp_path / "to-config").symlink_to(config)
    assert reason(tmp_path / "to-config", env) == (
        f"inside Ollie's configuration directory ({config})"
    )
    monkeypatch.setenv("HOME", env["HOME"])
    assert reason("~", env) == "your home directory"
    assert reason("~/.config", env) == f"an ancestor of Ollie's configuration directory ({config})"


def test_an_unset_home_is_the_processes_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "own-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "run")}
    assert reason(home, env) == "your home directory"
    assert reason(home, {**env, "HOME": ""}) == "your home directory"


def test_siblings_whose_names_merely_start_alike_are_fine(
    env: dict[str, str], tmp_path: Path
) -> None:
    home = Path(env["HOME"])
    for fine in (
        home / ".config" / "ollie-other",
        home / ".cache" / "ollie2",
        tmp_path / "run" / "ollie-x",
        tmp_path / "tools-old",
        home / "project",
    ):
        check_working_directory(str(fine), env, [tmp_path / "tools"])
