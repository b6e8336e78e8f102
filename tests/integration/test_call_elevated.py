"""``ollie-tools call`` of elevated tools through a live broker (and with none at all).

The proof that an approved call ran outside the sandbox: the tool writes a
file under ``$HOME``, which the default sandbox profile does not make
writable (``$HOME`` here is outside the call's cwd and ``$TMPDIR``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_broker import FakePrompter, ServerThread, audit_records, live_server

from registry_core.broker.question import Approval, Remember
from registry_core.paths import resources_dir
from registry_core.pinned import pinned_argv
from registry_core.sandbox import abi_version
from registry_core.trusted import trusted_program

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

    def environ(self, socket_path: Path | None = None, **extra: str) -> dict[str, str]:
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
            **extra,
        }

    def call(
        self,
        *args: str,
        socket_path: Path | None = None,
        detached: bool = False,
        extra: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TOOLS_CLI), "call", *args],
            cwd=self.cwd,
            env=self.environ(socket_path, **(extra or {})),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=detached,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``ollie-tools call`` left running (the test waits for it)."""
        return subprocess.Popen(
            [str(TOOLS_CLI), "call", *args],
            cwd=self.cwd,
            env=self.environ(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
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
    sha = hashlib.sha256((env.tools / "touch_home").read_bytes()).hexdigest()
    assert (asked["tool"], asked["kind"], asked["argv"], asked["mismatches"]) == (
        "touch_home",
        "sandbox",
        pinned_argv(trusted_program("python3"), sha, exe),
        [],
    )
    assert asked["sha256"] == sha
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
    proc = env.start("touch_home", "--elevated")
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


# --- what runs is what was approved -------------------
#
# A sandboxed tool can write its working directory, and an agent's environment often
# points into it (an activated .venv/bin, direnv).  None of that decides what an
# approved run executes; the file swapped after its sha256 was approved never runs.

PLANTED = "planted-ran.txt"
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"


def plant_python(directory: Path, proof: Path) -> None:
    """A ``json`` module (and the same as ``.venv/bin/python3``) that leaves ``proof``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "json.py").write_text(
        f"open({str(proof)!r}, 'a').write('json.py imported\\n')\nraise SystemExit(3)\n"
    )


def project_tool(env: Env, body: str, name: str = "py_note") -> Path:
    """An elevated Python tool in ``<cwd>/tools`` (a project's own tools directory)."""
    tools = env.cwd / "tools"
    tools.mkdir(exist_ok=True)
    exe = tools / name
    exe.write_text(body)
    exe.chmod(0o755)
    meta = {"description": "A project tool.", "args": {"type": "object"}, "elevated": True}
    (tools / f"{name}.meta").write_text(json.dumps(meta))
    return exe


PY_TOOL = "#!/usr/bin/env python3\nimport json, sys\njson.load(sys.stdin)\nprint('genuine')\n"


def test_a_planted_json_module_is_not_imported_by_a_remembered_elevated_tool(
    tmp_path: Path, prompter: FakePrompter
) -> None:
    env = Env(tmp_path)
    project_tool(env, PY_TOOL)
    proof = env.root / PLANTED
    tools = [env.cwd / "tools", *env.tools_path]
    extra = {"OLLIE_TOOLS_PATH": ":".join(map(str, tools))}
    prompter.approvals.append(Approval(True, Remember.HOUR))
    with live_server(tools, env.root, env.socket, prompter):
        first = env.call("py_note", extra=extra)
        assert (first.returncode, first.stdout) == (0, "genuine\n"), first.stderr
        # The sandboxed tool's doing: json.py beside the tool (the script's directory
        # comes first on sys.path) and in its cwd.
        plant_python(env.cwd, proof)
        plant_python(env.cwd / "tools", proof)
        second = env.call("py_note", extra=extra)
    assert not proof.exists(), "the planted json.py ran outside the sandbox"
    assert (second.returncode, second.stdout) == (0, "genuine\n"), second.stderr
    assert len(prompter.of_type("approval")) == 1  # the remembered rule allowed it


def test_a_planted_venv_python_first_on_path_is_not_what_env_python3_runs(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    venv_bin = env.cwd / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    proof = env.root / PLANTED
    fake = venv_bin / "python3"
    fake.write_text(f"#!/bin/sh\necho planted python ran >> {proof}\necho planted\n")
    fake.chmod(0o755)
    prompter.approvals.append(Approval(True))
    args = json.dumps({"text": "from the genuine python"})
    result = env.call(
        "write_protected_note", "--args", args, extra={"PATH": f"{venv_bin}:/usr/bin:/bin"}
    )
    assert not proof.exists(), "#!/usr/bin/env python3 ran the project's planted python3"
    assert result.returncode == 0, result.stderr
    assert "from the genuine python" in (env.home / "ollie-demo-note.txt").read_text()


def test_the_callers_loader_and_interpreter_variables_have_no_effect(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    proof = env.root / PLANTED
    rc = env.cwd / "rc.sh"
    rc.write_text(f"echo BASH_ENV ran >> {proof}\n")
    startup = env.cwd / "startup.py"
    startup.write_text(f"open({str(proof)!r}, 'a').write('PYTHONSTARTUP ran\\n')\n")
    plant_python(env.cwd, proof)  # `python3 -c` puts the cwd first on sys.path
    exe = env.tools / "show_env"
    exe.write_text(
        "#!/bin/bash\ncat >/dev/null\n"
        "/usr/bin/python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'\n"
    )
    exe.chmod(0o755)
    (env.tools / "show_env.meta").write_text(
        json.dumps({"description": "Show the environment.", "args": {"type": "object"}})
    )
    hostile = {
        "LD_PRELOAD": str(env.cwd / "libplanted.so"),
        "LD_LIBRARY_PATH": str(env.cwd),
        "PYTHONSTARTUP": str(startup),
        "PYTHONUSERBASE": str(env.cwd),
        "BASH_ENV": str(rc),
        "ENV": str(rc),
        "PERL5OPT": "-Mplanted",
        "NODE_OPTIONS": "--require ./planted.js",
        "GIT_SSH_COMMAND": "planted",
        "IFS": "x",
        "PATH": f"{env.cwd}/.venv/bin:/usr/bin:/bin",
        "DISPLAY": ":42",
        "TERM": "xterm",
    }
    prompter.approvals.append(Approval(True))
    result = env.call("show_env", "--elevated", extra=hostile)
    assert not proof.exists(), proof.read_text()
    assert result.returncode == 0, result.stderr
    # The loader complains once: for ollie-tools itself, which the agent started with
    # that environment; the tool's bash and its python never saw LD_PRELOAD.
    assert result.stderr.count("from LD_PRELOAD cannot be preloaded") == 1, result.stderr
    seen = json.loads(result.stdout)
    assert not {"LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONSTARTUP", "PYTHONUSERBASE"} & set(seen)
    assert not {"BASH_ENV", "ENV", "PERL5OPT", "NODE_OPTIONS", "GIT_SSH_COMMAND", "IFS"} & set(seen)
    assert seen["PATH"] == SYSTEM_PATH
    assert seen["PYTHONSAFEPATH"] == "1"
    # What the tool legitimately needs stays.
    assert (seen["HOME"], seen["LANG"], seen["DISPLAY"], seen["TERM"]) == (
        str(env.home),
        "C.UTF-8",
        ":42",
        "xterm",
    )
    assert seen["PWD"] == str(env.cwd)


def test_a_file_swapped_after_approval_never_runs(
    server: ServerThread, env: Env, prompter: FakePrompter
) -> None:
    proof = env.root / PLANTED
    prompter.hold_approvals = True
    proc = env.start("touch_home", "--elevated")
    asked = prompter.wait_for(lambda e: e["type"] == "approval")
    # The person looks at these bytes; meanwhile the file is replaced (a new inode, as
    # a rename would, and the same inode rewritten: both).
    swapped = env.tools / "touch_home.new"
    swapped.write_text(f"#!/bin/sh\ncat >/dev/null\necho swapped > {proof}\necho swapped\n")
    swapped.chmod(0o755)
    swapped.replace(env.tools / "touch_home")
    prompter.approvals.append(Approval(True))
    prompter.release()
    out, err = proc.communicate(timeout=60)
    assert not proof.exists(), "the bytes swapped in after the approval ran"
    assert "swapped" not in out
    assert proc.returncode != 0
    assert not (env.home / PROOF).exists()  # nor did the approved bytes: refused
    assert "changed" in err and asked["sha256"][:16] in err, err
