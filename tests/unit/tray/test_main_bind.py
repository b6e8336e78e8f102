"""`ollie-tray` binds its socket before Qt starts; that bind is the single-instance check."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ollie_tray import main as tray_main
from registry_core import paths
from registry_core.broker.serve.listen import bind_socket


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("OLLIE_ELEVATE_SOCKET", raising=False)
    return run


def test_socket_is_bound_before_the_gui_starts(
    runtime: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, object] = {}

    def fake_gui(env: dict[str, str], args: object, listening: object, bind_error: object) -> int:
        path = runtime / "ollie" / "elevate.sock"
        seen["mode"] = stat.S_IMODE(os.stat(path).st_mode)
        seen["dir_mode"] = stat.S_IMODE(os.stat(path.parent).st_mode)
        seen["listening"] = listening
        seen["error"] = bind_error
        return 0

    monkeypatch.setattr(tray_main, "_run_gui", fake_gui)
    assert tray_main.main(["--demo"]) == 0
    assert seen["mode"] == 0o600
    assert seen["dir_mode"] == 0o700
    assert seen["listening"] is not None
    assert seen["error"] is None
    assert "listening on" in capsys.readouterr().err
    seen["listening"].close()  # type: ignore[attr-defined]


def test_a_live_socket_means_already_running(
    runtime: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = bind_socket(runtime / "ollie" / "elevate.sock")
    monkeypatch.setattr(tray_main, "_run_gui", lambda *a: pytest.fail("the GUI must not start"))
    try:
        assert tray_main.main(["--demo"]) == 1
    finally:
        other.close()
    assert "already running" in capsys.readouterr().err


def test_an_unsafe_socket_dir_starts_in_the_error_state(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (runtime / "ollie").mkdir(mode=0o700)
    (runtime / "ollie" / "elevate.sock").write_text("not a socket")
    seen: dict[str, object] = {}
    monkeypatch.setattr(
        tray_main, "_run_gui", lambda env, args, listening, error: seen.update(e=error) or 0
    )
    assert tray_main.main(["--demo"]) == 0
    assert "not a socket" in str(seen["e"])


def test_first_start_without_tools_opens_the_browser_once(tmp_path: Path) -> None:
    user = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    app = {**user, "XDG_STATE_HOME": str(tmp_path / "state")}
    assert tray_main.first_start_without_tools(user, app)
    assert not tray_main.first_start_without_tools(user, app)  # only the first time


def test_a_user_with_tools_gets_no_browser(tmp_path: Path) -> None:
    tools = tmp_path / "cfg" / "ollie" / "tools"
    tools.mkdir(parents=True)
    (tools / "mine.meta").write_text("{}")
    user = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    app = {**user, "XDG_STATE_HOME": str(tmp_path / "state")}
    assert not tray_main.first_start_without_tools(user, app)


def test_demo_mode_is_normal_mode_plus_the_examples(tmp_path: Path) -> None:
    """One configuration: same policies, audit log and socket; own tools first."""
    user = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
    }
    demo = tray_main.demo_env(user)
    for where in (paths.policies_file, paths.audit_file, paths.elevate_socket):
        assert where(demo) == where(user)
    dirs = paths.tools_path(demo)
    assert dirs[0] == paths.default_tools_dir(user)
    assert dirs[1:] == tray_main.demo_tool_dirs()
    assert dirs[1] == paths.resources_dir() / "examples" / "tools"
    mine = {**user, "OLLIE_TOOLS_PATH": "/a:/b"}
    assert paths.tools_path(tray_main.demo_env(mine))[:2] == [Path("/a"), Path("/b")]


def _start_plain(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    seen: dict[str, object] = {}

    def fake_gui(env: dict[str, str], args: Any, listening: Any, bind_error: object) -> int:
        seen.update(env=dict(env), browser=args.browser, demo=args.demo)
        listening.close()
        return 0

    monkeypatch.setattr(tray_main, "_run_gui", fake_gui)
    assert tray_main.main([]) == 0
    return seen


@pytest.fixture
def fresh_user(runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", "")  # unset for the tray; restored afterwards
    monkeypatch.delenv("OLLIE_CFG_PATH", raising=False)
    return tmp_path / "cfg" / "ollie" / "tools"


def test_plain_start_without_own_tools_runs_the_demo_tools_and_the_browser_once(
    fresh_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _start_plain(monkeypatch)
    env = first["env"]
    assert isinstance(env, dict)
    searched = env["OLLIE_TOOLS_PATH"].split(":")
    assert searched[0] == str(fresh_user)  # the person's own directory first
    assert {str(d) for d in tray_main.demo_tool_dirs()} <= set(searched)
    assert first["browser"] is True
    assert first["demo"] is False  # not --demo: "Start at login" stays possible
    monkeypatch.setenv("OLLIE_TOOLS_PATH", "")
    second = _start_plain(monkeypatch)
    assert second["browser"] is False  # the Browser opens on the first start only
    assert isinstance(second["env"], dict)
    assert second["env"]["OLLIE_TOOLS_PATH"] == env["OLLIE_TOOLS_PATH"]


def test_plain_start_with_own_tools_runs_only_them(
    fresh_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_user.mkdir(parents=True)
    (fresh_user / "mine.meta").write_text("{}")
    seen = _start_plain(monkeypatch)
    assert isinstance(seen["env"], dict)
    assert seen["env"].get("OLLIE_TOOLS_PATH", "") == ""
    assert seen["browser"] is False


def test_a_tools_path_of_ones_own_means_no_demo(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "OLLIE_TOOLS_PATH": str(tmp_path / "elsewhere")}
    assert not tray_main.has_no_tools_of_their_own(env)
    assert tray_main.has_no_tools_of_their_own({"HOME": str(tmp_path)})
    tools = tmp_path / ".config" / "ollie" / "tools"
    tools.mkdir(parents=True)
    assert tray_main.has_no_tools_of_their_own({"HOME": str(tmp_path)})
    (tools / "README").write_text("any entry counts, as in `make run`")
    assert not tray_main.has_no_tools_of_their_own({"HOME": str(tmp_path)})
