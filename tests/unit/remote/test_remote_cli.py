"""``ollie-remote`` argument handling, status and disconnect (no network needed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry_core.cli import remote as cli
from registry_core.remote.state import Connection, state_dir, state_file, write_connection


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path / "home"),
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli.main(list(argv), out=out), out.getvalue()


def test_status_lists_live_connections_and_forgets_stale_ones(env: dict[str, str]) -> None:
    assert run("status") == (0, "No remote hosts connected.\n")
    directory = state_dir(env)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    base = {"remote_socket": "/run/user/5/ollie/elevate.sock", "local_socket": "/l", "since": 1.0}
    write_connection(directory, Connection(host="gone", pid=dead.pid, **base))  # type: ignore[arg-type]
    write_connection(
        directory,
        Connection(host="laptop", pid=os.getpid(), ssh_pid=os.getpid(), connected=True, **base),  # type: ignore[arg-type]
    )
    code, text = run("status")
    assert code == 0
    assert "laptop" in text and "connected" in text and "gone" not in text
    code, text = run("status", "--json")
    assert [c["host"] for c in json.loads(text)] == ["laptop"]
    assert not state_file(directory, "gone").exists()


def test_disconnect_of_an_unknown_host(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("disconnect", "nowhere")[0] == cli.EXIT_STATE
    assert "not connected to nowhere" in capsys.readouterr().err


def test_disconnect_refuses_a_pid_that_is_not_a_supervisor(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base = {"remote_socket": "/r", "local_socket": "/l", "since": 1.0}
    write_connection(state_dir(env), Connection(host="laptop", pid=os.getpid(), **base))  # type: ignore[arg-type]
    assert run("disconnect", "laptop")[0] == cli.EXIT_FAILED
    assert "not an ollie-remote supervisor" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["-oProxyCommand=touch /tmp/x", "a/b", "a b"])
def test_hosts_that_could_be_options_are_refused(
    env: dict[str, str], host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("deploy", host)[0] == cli.EXIT_FAILED
    assert "not a usable host name" in capsys.readouterr().err


def test_deploy_reports_a_missing_tools_dir(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("deploy", "box", "--tools", str(tmp_path / "none"))[0] == cli.EXIT_FAILED
    assert "is not a directory" in capsys.readouterr().err


def test_the_entry_point_is_installed() -> None:
    script = Path(sys.executable).parent / "ollie-remote"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    for command in ("deploy", "connect", "status", "disconnect", "dump"):
        assert command in result.stdout
