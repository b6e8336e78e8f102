"""``ollie-elevate -- <code>`` (ollie-core's x/elevate plugin) against a live broker.

The real entry point runs as a subprocess from a chosen working directory;
the broker is real (a thread of this process) and the person is a
:class:`FakePrompter`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_broker import (
    FakePrompter,
    ServerThread,
    audit_records,
    live_server,
    server_without_tools,
)

from registry_core.broker.question import Approval, Remember
from registry_core.trusted import find_trusted

ELEVATE = Path(sys.executable).parent / "ollie-elevate"
DENIED = 77


@pytest.fixture
def prompter() -> FakePrompter:
    return FakePrompter()


@pytest.fixture
def server(tmp_path: Path, prompter: FakePrompter) -> Iterator[ServerThread]:
    with server_without_tools(tmp_path, prompter) as thread:
        yield thread


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "session cwd"
    path.mkdir()
    return path


def env_for(socket_path: Path, tmp_path: Path, path: str = "/usr/bin:/bin") -> dict[str, str]:
    return {
        "PATH": path,
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "OLLIE_ELEVATE_SOCKET": str(socket_path),
        "LANG": "C.UTF-8",
    }


def elevate(
    code: str, socket_path: Path, tmp_path: Path, cwd: Path, path: str = "/usr/bin:/bin"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ELEVATE), "--", code],
        cwd=cwd,
        env=env_for(socket_path, tmp_path, path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_approved_code_runs_in_the_cwd_and_the_person_saw_all_of_it(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    prompter.approvals.append(Approval(True, Remember.ALWAYS))
    code = "id -u; pwd"
    result = elevate(code, server.path, tmp_path, workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{os.getuid()}\n{workdir}\n"
    [asked] = prompter.of_type("approval")
    assert (asked["tool"], asked["kind"], asked["code"]) == ("execute_code", "sandbox", code)
    bash = shutil.which("bash", path="/usr/bin:/bin")
    assert asked["argv"] == [bash, "-c", code]
    assert asked["cwd"] == str(workdir)
    assert asked["mismatches"] == []
    assert asked["executable"] == os.path.realpath(str(bash))
    assert asked["requester"]["cwd"] == str(workdir)
    assert asked["requester"]["cmdline"][-2:] == ["--", code]
    [record] = audit_records(tmp_path)
    assert (record["tool"], record["code"], record["remember"]) == ("execute_code", code, "once")


def test_a_bash_planted_first_on_path_never_runs_the_code(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    # A sandboxed tool wrote <cwd>/.venv/bin/bash; the agent's PATH starts there.
    planted = workdir / ".venv" / "bin"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    (planted / "bash").write_text(f'#!/bin/sh\ntouch {marker}\nexec /bin/sh "$@"\n')
    (planted / "bash").chmod(0o755)
    prompter.approvals.append(Approval(True))
    result = elevate("echo genuine", server.path, tmp_path, workdir, f"{planted}:/usr/bin:/bin")
    assert not marker.exists(), "the planted bash ran the approved code"
    assert (result.returncode, result.stdout) == (0, "genuine\n"), result.stderr
    [asked] = prompter.of_type("approval")
    assert asked["argv"] == [find_trusted("bash"), "-c", "echo genuine"]
    assert asked["mismatches"] == []


def test_the_full_code_is_shown_however_long(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    prompter.approvals.append(Approval(True))
    code = "set -e\n" + "".join(f"echo 'line {i}: \"quoted\" $HOME'\n" for i in range(300))
    result = elevate(code, server.path, tmp_path, workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 300
    assert prompter.of_type("approval")[0]["code"] == code


def test_the_exit_status_and_streams_are_passed_through(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    prompter.approvals.append(Approval(True))
    result = elevate("echo out; echo err >&2; exit 3", server.path, tmp_path, workdir)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_code_is_asked_again_every_time(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    prompter.approvals.extend([Approval(True, Remember.ALWAYS), Approval(False)])
    assert elevate("true", server.path, tmp_path, workdir).returncode == 0
    assert elevate("true", server.path, tmp_path, workdir).returncode == DENIED
    assert len(prompter.of_type("approval")) == 2


def test_denial_exits_77_with_the_reason_and_nothing_runs(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, workdir: Path
) -> None:
    prompter.approvals.append(Approval(False, Remember.ONCE, "not today"))
    result = elevate("touch ran", server.path, tmp_path, workdir)
    assert result.returncode == DENIED
    assert result.stderr == "elevation denied: not today\n"
    assert result.stdout == ""
    assert not (workdir / "ran").exists()
    assert [r["by"] for r in audit_records(tmp_path)] == ["user"]


def test_a_timeout_is_a_denial(tmp_path: Path, workdir: Path) -> None:
    prompter = FakePrompter(hold_approvals=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    path = tmp_path / "run" / "elevate.sock"
    with live_server([tools], tmp_path, path, prompter, prompt_timeout=0.2):
        result = elevate("touch ran", path, tmp_path, workdir)
    assert result.returncode == DENIED
    assert result.stderr.startswith("elevation denied: no answer within 0.2 s")
    assert not (workdir / "ran").exists()


def test_no_broker_and_no_front_end_denies(tmp_path: Path, workdir: Path) -> None:
    env = env_for(tmp_path / "nobody-listens" / "elevate.sock", tmp_path)
    result = subprocess.run(
        [str(ELEVATE), "--", "touch ran"],
        cwd=workdir,
        env=env,  # no DISPLAY, no WAYLAND_DISPLAY
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal to ask on
        check=False,
    )
    assert result.returncode == DENIED, result
    assert result.stderr.startswith("elevation denied: ")
    assert "front-end" in result.stderr
    assert not (workdir / "ran").exists()


def test_usage_errors(tmp_path: Path, workdir: Path) -> None:
    for args in ([], ["--"], ["--", "  "], ["--", "a", "b"]):
        result = subprocess.run(
            [str(ELEVATE), *args],
            cwd=workdir,
            env=env_for(tmp_path / "none.sock", tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, args
        assert "usage: ollie-elevate" in result.stderr
