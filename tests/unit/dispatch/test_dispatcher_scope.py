"""The dispatcher runs bwrap in a cgroup scope when a user manager is found (fake systemd-run).

The fake records what it was given, then either does what ``systemd-run
--scope`` does once the scope exists (exec the command in place) or fails as
it does without a manager.  The real scope is in
tests/integration/test_call_scope.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dispatch_helpers import ENV_DUMP, Stack, assert_no_process, pid_gone

from registry_core.dispatch import Dispatcher
from registry_core.errors import SandboxError
from registry_core.sandbox.scope import Scope

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

RECORDING = """#!/bin/sh
printf '%s\\n' "$@" > {log}
echo "XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR" >> {log}
echo "pid=$$" >> {log}
"""
SCOPED = RECORDING + 'while [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
NO_MANAGER = RECORDING + "echo 'Failed to connect to bus: Connection refused' >&2\nexit 1\n"
# Each run of the tool adds a line: a tool must never run twice.
COUNTED = "#!/bin/sh\ncat >/dev/null\necho run >> runs\n"


def _dispatcher(stack: Stack, fake: str) -> tuple[Dispatcher, Path]:
    log = stack.root / "systemd-run.log"
    program = stack.root / "bin" / "systemd-run"
    program.write_text(fake.format(log=log))
    program.chmod(0o755)
    registry = stack.registry()
    scope = Scope(str(program), str(stack.root / "manager"))
    dispatcher = Dispatcher(registry=lambda: registry, env=stack.env, find_scope=lambda env: scope)
    return dispatcher, log


def test_bwrap_is_started_in_a_scope_with_the_calls_bounds(stack: Stack) -> None:
    stack.write_profile(
        "default", stack.default_profile_with(limits={"tasks": 40, "memory": "300M"})
    )
    stack.tool("envdump", ENV_DUMP)
    dispatcher, log = _dispatcher(stack, SCOPED)
    result = dispatcher.call("envdump", {}, stack.options())
    assert result.ok, result.error
    given = log.read_text().splitlines()
    assert given[:4] == ["--user", "--scope", "--quiet", "--collect"]
    assert given[4].startswith("--unit=ollie-call-")
    assert given[5:13] == [
        "--description=ollie-tools sandboxed call",
        "-p",
        "TasksMax=40",
        "-p",
        f"MemoryMax={300 << 20}",
        "-p",
        "MemorySwapMax=0",
        "--",
    ]
    assert given[13].endswith("bwrap")
    # systemd-run finds the manager; the tool's environment is as without a scope.
    assert f"XDG_RUNTIME_DIR={stack.root / 'manager'}" in given
    assert "XDG_RUNTIME_DIR" not in json.loads(result.stdout)["env"]
    assert result.unenforced and not any("cgroup" in gap for gap in result.unenforced)


def test_without_a_manager_the_call_runs_once_under_rlimits_and_says_so(stack: Stack) -> None:
    stack.tool("counted", COUNTED)
    dispatcher, log = _dispatcher(stack, NO_MANAGER)
    result = dispatcher.call("counted", {}, stack.options())
    assert result.ok, result.error
    assert (stack.cwd / "runs").read_text() == "run\n"
    assert log.exists()  # systemd-run was tried first
    assert result.unenforced[-1] == (
        "cgroup limits: systemd-run could not create the call's scope"
        " (Failed to connect to bus: Connection refused); rlimits only"
    )
    assert result.stderr == ""


def test_a_tool_that_fails_in_systemd_runs_words_is_not_run_again(stack: Stack) -> None:
    stack.tool(
        "liar", COUNTED + "echo 'Failed to connect to bus: Connection refused' >&2\nexit 1\n"
    )
    dispatcher, _log = _dispatcher(stack, SCOPED)
    result = dispatcher.call("liar", {}, stack.options())
    assert result.exit_code == 1
    assert (stack.cwd / "runs").read_text() == "run\n"
    assert not any("cgroup" in gap for gap in result.unenforced)


def test_a_bwrap_failure_in_a_scope_is_still_a_sandbox_error(stack: Stack) -> None:
    fake = stack.root / "bin" / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    stack.tool("counted", COUNTED)
    dispatcher, log = _dispatcher(stack, SCOPED)
    dispatcher.find_bwrap = lambda env: str(fake)
    with pytest.raises(SandboxError) as caught:
        dispatcher.call("counted", {}, stack.options())
    assert str(caught.value).endswith("bwrap: setting up uid map: Permission denied")
    assert not (stack.cwd / "runs").exists()
    assert log.exists()


def test_the_timeout_still_ends_the_whole_call_in_a_scope(stack: Stack) -> None:
    stack.tool("slow", "#!/bin/sh\ncat >/dev/null\nsleep 6007 &\nexec sleep 6008\n")
    dispatcher, log = _dispatcher(stack, SCOPED)
    started: list[int] = []
    result = dispatcher.call("slow", {}, stack.options(timeout=1, on_start=started.append))
    assert (result.timed_out, result.exit_code) == (True, 124)
    # systemd-run execs bwrap in place: the process the dispatcher started and killed.
    (pid_line,) = [line for line in log.read_text().splitlines() if line.startswith("pid=")]
    assert started == [int(pid_line.removeprefix("pid="))]
    assert pid_gone(started[0])
    assert_no_process("sleep 600", "the tool's processes after the timeout")
