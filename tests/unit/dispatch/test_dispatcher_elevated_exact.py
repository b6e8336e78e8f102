"""Elevated and sudo calls through the real dispatcher, pinned exactly.

An approved elevated call runs outside the sandbox; a sudo call runs
``sudo -A`` through a ``sudo`` stand-in injected by its absolute path
(``Dispatcher(sudo=...)``, which production leaves to the trusted sudo of a
system directory; the stand-in's directory is on ``PATH`` too, and ignored):
a real child process that records what it was given and then runs the tool,
or answers as sudo does when the password is wrong or missing.  See
dispatch_helpers.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from dispatch_helpers import ECHO, FakeGate, Stack, pinned

from registry_core.dispatch import Authorization, Dispatcher, ElevationRequest, Kind
from registry_core.errors import ElevationDeniedError, UntrustedProgramError
from registry_core.trusted import SYSTEM_PATH, find_trusted

# --- elevated: outside the sandbox after approval ------------------------------------------


def test_an_approved_elevated_call_exactly(stack: Stack) -> None:
    script = (
        "#!/usr/bin/python3\nimport json, os, sys\n"
        "print(json.dumps({'stdin': sys.stdin.read(), 'env': dict(os.environ),"
        " 'cwd': os.getcwd()}))\n"
    )
    exe = stack.tool("lift", script, elevated=True)
    gate = FakeGate(approve=True)
    started: list[int] = []
    result = stack.dispatcher(gate=gate).call(
        "lift", {"n": 1}, stack.options(client="agent-x", on_start=started.append)
    )
    assert result.ok, result.error
    assert gate.requests == [
        ElevationRequest(
            "lift", Kind.SANDBOX, pinned(exe), {"n": 1}, str(stack.cwd), client="agent-x"
        )
    ]
    seen = json.loads(result.stdout)
    assert seen["stdin"] == '{"n": 1}'
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(stack.cwd)
    env = seen["env"]
    for name, value in stack.env.items():
        if name != "PATH":
            assert env[name] == value  # the caller's environment, cleaned (registry_core.pinned)
    assert env["PATH"] == SYSTEM_PATH  # never the caller's: a project's bin may be on it
    assert env["PYTHONSAFEPATH"] == "1"
    assert env["OLLIE_TOOLS_PATH"] == str(stack.tools)
    assert env["PWD"] == str(stack.cwd)
    assert env["OLLIE_ELEVATE_SOCKET"] == str(stack.root / "runtime" / "ollie" / "elevate.sock")
    assert result.tool == "lift"
    assert result.sandboxed is False
    assert result.elevated is True
    assert result.sudo is False
    assert result.argv == pinned(exe)
    assert result.unenforced == ()
    assert len(started) == 1


def test_an_elevated_call_times_out_like_any_other(stack: Stack) -> None:
    stack.tool("lift", "#!/bin/sh\nexec sleep 60\n", elevated=True)
    result = stack.dispatcher(gate=FakeGate(approve=True)).call(
        "lift", {}, stack.options(timeout=0.5)
    )
    assert result.stderr == "timed out after 0.5 s"
    assert result.exit_code == 124


# --- sudo after approval: a sudo stand-in, injected ----------------------------------------

FAKE_SUDO = """#!/usr/bin/python3
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "sudo.seen"), "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}, fh)
with open(os.path.join(here, "sudo.plan")) as fh:
    plan = json.load(fh)
if plan["mode"] == "run":
    os.execv(sys.argv[3], sys.argv[3:])
sys.stdin.read()
sys.stderr.write(plan["stderr"])
sys.exit(plan["exit"])
"""


class FakeSudoGate:
    """Approves with a grant and the given variables; answers report_sudo with ``refusal``."""

    def __init__(
        self, grant: str | None = "grant-7", refusal: str | None = None, **env: str
    ) -> None:
        self.grant = grant
        self.refusal = refusal
        self.env = env
        self.requests: list[ElevationRequest] = []
        self.reports: list[tuple[str, int, bool]] = []

    def authorize(self, request: ElevationRequest) -> Authorization:
        self.requests.append(request)
        return Authorization(reason="approved", grant=self.grant, env=self.env)

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        self.reports.append((grant, exit_code, auth_failed))
        return self.refusal


def _sudo_stack(stack: Stack, mode: str = "run", stderr: str = "", code: int = 0) -> Path:
    sudo = stack.root / "bin" / "sudo"
    sudo.write_text(FAKE_SUDO)
    sudo.chmod(0o755)
    (stack.root / "bin" / "sudo.plan").write_text(
        json.dumps({"mode": mode, "stderr": stderr, "exit": code})
    )
    script = (
        "#!/usr/bin/python3\nimport json, os, sys\n"
        "print(json.dumps({'stdin': sys.stdin.read(), 'cwd': os.getcwd()}))\n"
        "sys.stderr.write('as root\\n')\nsys.exit(int(os.environ.get('TOOL_EXIT', '0')))\n"
    )
    return stack.tool("rooty", script, sudo=True)


def _sudo_seen(stack: Stack) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads((stack.root / "bin" / "sudo.seen").read_text())
    return seen


ASKPASS = "/usr/lib/ollie/askpass"


def _sudo_dispatcher(stack: Stack, gate: Any, askpass: str | None = ASKPASS) -> Dispatcher:
    registry = stack.registry()
    sudo = str(stack.root / "bin" / "sudo")
    return Dispatcher(
        registry=lambda: registry, env=stack.env, gate=gate, askpass=askpass, sudo=sudo
    )


def test_an_approved_sudo_call_runs_the_tool_through_sudo(stack: Stack) -> None:
    exe = _sudo_stack(stack)
    gate = FakeSudoGate(OLLIE_GRANT="grant-7", PWD="/from/the/grant")
    started: list[int] = []
    result = _sudo_dispatcher(stack, gate).call(
        "rooty", {"k": "v"}, stack.options(client="agent-y", on_start=started.append)
    )
    assert result.ok, result.error
    argv = (str(stack.root / "bin" / "sudo"), "-A", "--", *pinned(exe))
    assert gate.requests == [
        ElevationRequest("rooty", Kind.SUDO, argv, {"k": "v"}, str(stack.cwd), client="agent-y")
    ]
    assert gate.reports == [("grant-7", 0, False)]
    seen = _sudo_seen(stack)
    assert seen["argv"] == ["-A", "--", *pinned(exe)]
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(stack.cwd)
    env = seen["env"]
    assert env["SUDO_ASKPASS"] == ASKPASS
    assert env["OLLIE_GRANT"] == "grant-7"
    assert env["PWD"] == "/from/the/grant"  # the grant's variables come last
    assert env["OLLIE_TOOLS_PATH"] == str(stack.tools)
    assert env["DISPLAY"] == ":42"
    tool_saw = json.loads(result.stdout)
    assert tool_saw["stdin"] == '{"k": "v"}'
    assert result.stderr == "as root\n"
    assert (result.sandboxed, result.elevated, result.sudo) == (False, True, True)
    assert result.sandboxed is False and result.elevated is True and result.sudo is True
    assert result.argv == argv
    assert result.unenforced == ()
    assert len(started) == 1


def test_sudo_without_ollies_askpass_is_refused_before_anyone_is_asked(stack: Stack) -> None:
    # The caller's SUDO_ASKPASS is not Ollie's: sudo would hand it the grant.
    _sudo_stack(stack)
    stack.env["SUDO_ASKPASS"] = "/callers/askpass"
    gate = FakeSudoGate()
    dispatcher = _sudo_dispatcher(stack, gate, askpass=None)
    with pytest.raises(UntrustedProgramError) as raised:
        dispatcher.call("rooty", {}, stack.options())
    assert (raised.value.program, raised.value.package) == ("ollie-askpass", "ollie-tray")
    assert gate.requests == []
    assert not (stack.root / "bin" / "sudo.seen").exists()


def test_without_an_injected_sudo_the_trusted_one_runs_never_paths(stack: Stack) -> None:
    # The stand-in is first on the dispatcher's PATH: it is not what runs.
    exe = _sudo_stack(stack)
    gate = FakeGate(approve=False)
    registry = stack.registry()
    dispatcher = Dispatcher(registry=lambda: registry, env=stack.env, gate=gate, askpass=ASKPASS)
    trusted = find_trusted("sudo")
    if trusted is None:
        with pytest.raises(UntrustedProgramError):
            dispatcher.call("rooty", {}, stack.options())
        assert gate.requests == []
        return
    with pytest.raises(ElevationDeniedError):
        dispatcher.call("rooty", {}, stack.options())
    assert [r.argv for r in gate.requests] == [(trusted, "-A", "--", *pinned(exe))]
    assert not (stack.root / "bin" / "sudo.seen").exists()


def test_sudo_without_a_grant_reports_nothing(stack: Stack) -> None:
    _sudo_stack(stack)
    gate = FakeSudoGate(grant=None, refusal="would have refused")
    result = _sudo_dispatcher(stack, gate).call("rooty", {}, stack.options())
    assert result.ok, result.error
    assert gate.reports == []


def test_the_tools_own_failure_under_sudo_is_not_an_authentication_failure(
    stack: Stack,
) -> None:
    _sudo_stack(stack)
    stack.env["TOOL_EXIT"] = "1"
    gate = FakeSudoGate()
    result = _sudo_dispatcher(stack, gate).call("rooty", {}, stack.options())
    assert result.exit_code == 1
    assert gate.reports == [("grant-7", 1, False)]


@pytest.mark.parametrize(
    ("stderr", "code", "auth_failed"),
    [
        ("Sorry, try again.\nsudo: 3 incorrect password attempts\n", 1, True),
        ("Sorry, try again.\nsudo: 1 incorrect password attempt\n", 1, True),
        ("sudo: a password is required\n", 1, True),
        ("sudo: a password is required\n", 2, False),
        ("sudo: A PASSWORD IS REQUIRED\n", 1, False),
        ("sudo: unable to resolve host\n", 1, False),
    ],
)
def test_sudo_reports_whether_authentication_failed(
    stack: Stack, stderr: str, code: int, auth_failed: bool
) -> None:
    _sudo_stack(stack, mode="answer", stderr=stderr, code=code)
    gate = FakeSudoGate()
    result = _sudo_dispatcher(stack, gate).call("rooty", {}, stack.options())
    assert gate.reports == [("grant-7", code, auth_failed)]
    assert result.exit_code == code
    assert result.stderr == stderr


def test_a_grant_the_credential_gate_refused_is_a_denial(stack: Stack) -> None:
    _sudo_stack(stack, mode="answer", stderr="sudo: a password is required\n", code=1)
    gate = FakeSudoGate(refusal="password dialog cancelled")
    with pytest.raises(ElevationDeniedError) as caught:
        _sudo_dispatcher(stack, gate).call("rooty", {}, stack.options())
    assert caught.value.reason == "password dialog cancelled"
    assert str(caught.value) == "elevation denied: password dialog cancelled"


def test_echo_tool_is_still_sandboxed_beside_sudo_tools(stack: Stack) -> None:
    _sudo_stack(stack)
    stack.tool("echo", ECHO)
    result = _sudo_dispatcher(stack, FakeSudoGate()).call("echo", {"a": 1}, stack.options())
    assert (result.sandboxed, result.sudo) == (True, False)
    assert not (stack.root / "bin" / "sudo.seen").exists()
