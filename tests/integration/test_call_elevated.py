"""``ollie-tools call`` of elevated tools through a live broker (and with none at all).

The proof that an approved call ran outside the sandbox: the tool writes a
file under ``$HOME``, which the default sandbox profile does not make
writable (``$HOME`` here is outside the call's cwd and ``$TMPDIR``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_broker import FakePrompter, ServerThread, audit_records, live_server

from registry_core.elevation.prompter import Approval, Remember
from registry_core.paths import resources_dir
from registry_core.sandbox import abi_version

TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"
EXAMPLES = resources_dir() / "examples" / "tools"
DENIED = 77
PROOF = "elevated-proof.txt"


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.tools = tmp_path / "tools"
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "cwd"
        for directory in (self.tools, self.home, self.cwd, tmp_path / "tmpdir"):
            directory.mkdir()
        self.socket = tmp_path / "run" / "ollie" / "elevate.sock"
        touch = self.tools / "touch_home"
        touch.write_text(
            '#!/bin/sh\ncat >/dev/null\necho "written by $(id -u)" > "$HOME/' + PROOF + '" '
            "&& echo wrote-home\n"
        )
        touch.chmod(0o755)
        meta = {"description": "Write a file into $HOME.", "args": {"type": "object"}}
        (self.tools / "touch_home.meta").write_text(json.dumps(meta))

    @property
    def tools_path(self) -> list[Path]:
        return [self.tools, EXAMPLES]

    def environ(self, socket_path: Path | None = None) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmpdir"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_STATE_HOME": str(self.root / "state"),
            "OLLIE_ELEVATE_SOCKET": str(socket_path or self.socket),
            "OLLIE_TOOLS_PATH": ":".join(map(str, self.tools_path)),
            "LANG": "C.UTF-8",
        }

    def call(
        self, *args: str, socket_path: Path | None = None, detached: bool = False
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TOOLS_CLI), "call", *args],
            cwd=self.cwd,
            env=self.environ(socket_path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=detached,
            check=False,
        )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def prompter() -> FakePrompter:
    return FakePrompter()


@pytest.fixture
def server(env: Env, prompter: FakePrompter) -> Iterator[ServerThread]:
    with live_server(env.tools_path, env.root, env.socket, prompter) as thread:
        yield thread


def test_without_elevation_the_sandbox_forbids_the_write(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    result = env.call("touch_home")
    assert result.returncode != 0
    assert not (env.home / PROOF).exists()
    assert prompter.events == []  # nobody was asked
    if abi_version() >= 1:
        assert "Directory nonexistent" in result.stderr  # the home is not in its view
    else:
        assert "Landlock" in result.stderr  # refused to run unsandboxed


def test_approved_elevated_call_runs_outside_the_sandbox(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    prompter.approvals.append(Approval(True))
    result = env.call("touch_home", "--elevated")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "wrote-home\n"
    assert (env.home / PROOF).read_text() == f"written by {os.getuid()}\n"
    [asked] = prompter.of_type("approval")
    exe = str(env.tools / "touch_home")
    assert (asked["tool"], asked["kind"], asked["argv"], asked["mismatches"]) == (
        "touch_home",
        "sandbox",
        [exe],
        [],
    )
    assert asked["cwd"] == str(env.cwd)
    assert asked["executable"] == exe
    assert asked["description"] == "Write a file into $HOME."


def test_a_tool_declaring_elevated_goes_through_the_broker(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    prompter.approvals.append(Approval(True, Remember.HOUR))
    args = json.dumps({"text": "approved note"})
    first = env.call("write_protected_note", "--args", args)
    assert first.returncode == 0, first.stderr
    assert "approved note" in (env.home / "ollie-demo-note.txt").read_text()
    second = env.call("write_protected_note", "--args", args)  # the 1 h policy decides
    assert second.returncode == 0, second.stderr
    assert len(prompter.of_type("approval")) == 1
    assert [r["by"] for r in audit_records(env.root)] == ["user", "policy"]
    assert (env.home / "ollie-demo-note.txt").read_text().count("approved note") == 2


def test_denial_exits_77_and_nothing_runs(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    prompter.approvals.append(Approval(False, Remember.ONCE, "looks fishy"))
    result = env.call("touch_home", "--elevated")
    assert result.returncode == DENIED
    assert result.stderr == "elevation denied: looks fishy\n"
    assert result.stdout == ""
    assert not (env.home / PROOF).exists()
    assert [(r["decision"], r["by"]) for r in audit_records(env.root)] == [("deny", "user")]


def test_broker_shutdown_mid_question_is_a_denial(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    prompter.hold_approvals = True
    proc = subprocess.Popen(
        [str(TOOLS_CLI), "call", "touch_home", "--elevated"],
        cwd=env.cwd,
        env=env.environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    prompter.wait_for(lambda e: e["type"] == "approval")
    server.close_server()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == DENIED
    assert err.startswith("elevation denied: the broker is shutting down")
    assert out == ""
    assert not (env.home / PROOF).exists()


def test_no_broker_and_no_front_end_is_a_clear_denial(env: Env) -> None:
    result = env.call(
        "touch_home", "--elevated", socket_path=env.root / "absent" / "e.sock", detached=True
    )
    assert result.returncode == DENIED, result
    assert result.stderr.startswith("elevation denied: ")
    assert "front-end" in result.stderr
    assert not (env.home / PROOF).exists()
