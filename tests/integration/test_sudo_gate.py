"""The sudo credential gate for real: a test user, real ``sudo -A``, the real CLIs.

As the user ``ollie-sudo-test`` (see ``sudo_user.py``): the scripted broker
(the real Broker + BrokerServer, the person a FakePrompter fed over a pipe)
and ``ollie-tools call whoami_root``, which passes the elevation gate, then
runs ``sudo -A`` with ``ollie-askpass``, which fetches the password from the
broker with its grant.  The marker password must never show up anywhere but
in the answer to askpass.

Needs root (to create the user) and sudo: skipped locally otherwise, a
failure under CI=true.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sudo_user
from sudo_user import SudoUser, UserDirs

from registry_core.trusted import trusted_program

pytestmark = pytest.mark.realstack

APPROVE = {"approved": True, "remember": "once"}
DENY = {"approved": False, "remember": "once"}
DENIED = 77


@pytest.fixture(scope="session")
def user() -> Iterator[SudoUser]:
    with sudo_user.throwaway() as created:
        yield created


@pytest.fixture
def dirs(user: SudoUser, request: pytest.FixtureRequest) -> UserDirs:
    return UserDirs(user, f"t-{request.node.name[:40]}")


@pytest.fixture
def start_broker(dirs: UserDirs, tmp_path: Path) -> Iterator[Any]:
    with sudo_user.broker_starter(dirs, tmp_path) as start:
        yield start


def uid_of(result: subprocess.CompletedProcess[str]) -> int:
    return int(json.loads(result.stdout)["uid"])


def test_correct_password_runs_the_tool_as_root(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": [user.password]})
    result = dirs.call("whoami_root")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"uid": 0, "user": "root"}
    [asked] = broker.of_type("approval")
    exe = str(user.tools / "whoami_root")
    assert (asked["tool"], asked["kind"], asked["argv"], asked["mismatches"]) == (
        "whoami_root",
        "sudo",
        [trusted_program("sudo"), "-A", "--", exe],
        [],
    )
    assert asked["requester"]["uid"] == user.uid
    [password] = broker.of_type("password")
    assert (password["attempt"], password["retry"], password["user"]) == (1, False, user.name)
    assert user.name in password["prompt"]  # sudo's own prompt, passed by askpass
    broker.stop()
    [record] = [json.loads(line) for line in dirs.audit.read_text().splitlines()]
    assert (record["decision"], record["by"], record["kind"]) == ("allow", "user", "sudo")


def test_a_sudo_planted_first_on_path_never_sees_the_password(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    # A sandboxed tool wrote <project>/.venv/bin/sudo: it would run the genuine
    # ollie-askpass (with the grant it was handed) and keep the password.
    planted = dirs.root / "project" / ".venv" / "bin"
    planted.mkdir(parents=True)
    stolen = dirs.root / "tmp" / "stolen"
    (planted / "sudo").write_text(
        f'#!/bin/sh\n"$SUDO_ASKPASS" "[sudo] password: " >{stolen}\n'
        'echo \'{"uid": 0, "user": "root"}\'\n'
    )
    (planted / "sudo").chmod(0o755)
    broker = start_broker({"approvals": [APPROVE], "passwords": [user.password]})
    env = dirs.env(PATH=f"{planted}:{user.bin}:/usr/bin:/bin")
    argv = [str(user.bin / "ollie-tools"), "call", "whoami_root"]
    result = user.run(argv, env, dirs.home, stdin=subprocess.DEVNULL)
    assert not stolen.exists(), "the planted sudo ran and asked for the password"
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"uid": 0, "user": "root"}
    [asked] = broker.of_type("approval")
    assert (asked["argv"][0], asked["mismatches"]) == (trusted_program("sudo"), [])
    assert len(broker.of_type("password")) == 1  # asked by the genuine sudo's askpass


def test_wrong_then_right_password_shows_the_retry(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker(
        {"approvals": [APPROVE], "passwords": ["not-the-password", user.password]}
    )
    result = dirs.call("whoami_root")
    assert result.returncode == 0, result.stderr
    assert uid_of(result) == 0
    asks = broker.of_type("password")
    assert [(a["attempt"], a["retry"]) for a in asks] == [(1, False), (2, True)]
    assert asks[1]["retry_text"] == "Wrong password, try again (2/3)"
    assert len({a["approval_id"] for a in asks}) == 1  # one approval, one grant


def test_cancelled_password_is_a_denial(user: SudoUser, dirs: UserDirs, start_broker: Any) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": [None]})
    result = dirs.call("whoami_root")
    # A refusal, not a failure: 77 and one line saying which (sudo's own chatter is not shown).
    assert result.returncode == DENIED
    assert result.stdout == ""  # the tool never ran
    assert result.stderr == "elevation denied: password entry cancelled\n"
    assert len(broker.of_type("password")) == 1  # the grant died with the cancel


def test_three_wrong_passwords_are_a_refusal(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": ["wrong-1", "wrong-2", "wrong-3"]})
    result = dirs.call("whoami_root")
    assert result.returncode == DENIED
    assert result.stdout == ""
    assert result.stderr == "elevation denied: wrong password, no attempts left\n"
    assert len(broker.of_type("password")) == 3


def test_denied_at_the_elevation_gate_never_reaches_the_credential_gate(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [DENY], "passwords": [user.password]})
    result = dirs.call("whoami_root")
    assert result.returncode == DENIED
    assert result.stderr.startswith("elevation denied: ")
    assert broker.of_type("password") == []


def test_nopasswd_rule_never_calls_askpass(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": ["must-not-be-asked"]})
    result = dirs.call(sudo_user.NOPASSWD_TOOL)
    assert result.returncode == 0, result.stderr
    assert uid_of(result) == 0
    assert [e["tool"] for e in broker.of_type("approval")] == [sudo_user.NOPASSWD_TOOL]
    assert broker.of_type("password") == []


REQUESTER = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from pathlib import Path
    from registry_core.broker.wire import messages as m
    from registry_core.broker.wire.client import BrokerClient
    from registry_core.trusted import trusted_program

    mode, exe, askpass = sys.argv[1:4]

    def say(**fields):
        print(json.dumps(fields), flush=True)

    with BrokerClient(Path(os.environ["OLLIE_ELEVATE_SOCKET"])) as client:
        argv = [trusted_program("sudo"), "-A", "--", exe]
        reply = client.elevate("whoami_root", m.Kind.SUDO, argv, {}, os.getcwd())
        assert reply.decision is m.Decision.ALLOW and reply.grant, reply
        grant = reply.grant
        if mode == "used":
            client.sudo_result(grant, 0, False)
        elif mode == "expired":
            say(state="waiting")
            sys.stdin.readline()
        elif mode == "foreign":
            say(state="grant", grant=grant)  # the test plays a process outside our tree
            sys.stdin.readline()
        done = subprocess.run(
            [askpass, "[sudo] password for someone: "],
            env={**os.environ, "OLLIE_GRANT": grant},
            capture_output=True,
            text=True,
        )
        say(state="done", rc=done.returncode, stdout=done.stdout, stderr=done.stderr)
    """
)


class Requester:
    """A process of the user that gets a sudo grant, then runs ollie-askpass as its child."""

    def __init__(self, user: SudoUser, dirs: UserDirs, mode: str) -> None:
        argv = [
            str(user.python),
            "-c",
            REQUESTER,
            mode,
            str(user.tools / "whoami_root"),
            str(user.bin / "ollie-askpass"),
        ]
        self.proc = user.popen(
            argv,
            dirs.env(),
            dirs.home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        assert text, self.proc.stderr.read() if self.proc.stderr else "no output"
        return dict(json.loads(text))

    def go_on(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self) -> dict[str, Any]:
        result = self.line()
        self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0
        return result


def test_a_used_grant_replayed_is_refused(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": ["never-sent"]})
    result = Requester(user, dirs, "used").finish()
    assert result["rc"] != 0
    assert result["stdout"] == ""
    assert result["stderr"] == "ollie-askpass: no_grant: grant already used\n"
    assert broker.of_type("password") == []


def test_an_expired_grant_is_refused(user: SudoUser, dirs: UserDirs, start_broker: Any) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": ["never-sent"]})
    requester = Requester(user, dirs, "expired")
    assert requester.line() == {"state": "waiting"}
    broker.advance(3600)  # the broker's clock moves an hour on; grants live minutes
    requester.go_on()
    result = requester.finish()
    assert result["rc"] != 0
    assert result["stdout"] == ""
    assert result["stderr"] == "ollie-askpass: no_grant: grant expired\n"
    assert broker.of_type("password") == []


def test_askpass_outside_the_requesters_tree_is_refused(
    user: SudoUser, dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE], "passwords": ["descendant-only"]})
    requester = Requester(user, dirs, "foreign")
    grant = requester.line()["grant"]
    stranger = user.run(
        [str(user.bin / "ollie-askpass"), "[sudo] password: "],
        dirs.env(OLLIE_GRANT=grant),
        dirs.home,
        stdin=subprocess.DEVNULL,
    )
    assert stranger.returncode != 0
    assert stranger.stdout == ""
    assert (
        stranger.stderr
        == "ollie-askpass: no_grant: askpass does not descend from the approved requester\n"
    )
    assert broker.of_type("password") == []
    requester.go_on()  # the refusal did not burn the grant: the real descendant is answered
    result = requester.finish()
    assert (result["rc"], result["stdout"]) == (0, "descendant-only\n")
    assert len(broker.of_type("password")) == 1


def test_the_marker_password_is_found_nowhere(
    user: SudoUser, dirs: UserDirs, start_broker: Any, tmp_path: Path
) -> None:
    marker = user.password.encode()
    broker = start_broker(
        {"approvals": [APPROVE], "passwords": [user.password], "hold_passwords": True}
    )
    call = user.popen(
        [str(user.bin / "ollie-tools"), "call", "whoami_root"],
        dirs.env(),
        dirs.home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    broker.wait_for(lambda e: e["type"] == "password")
    # sudo is waiting for ollie-askpass, which waits for the (thinking) person.
    assert sudo_user.processes_exposing(marker) == []
    broker.release()
    scans = 0
    while call.poll() is None:  # askpass -> sudo -> the tool, scanned all along
        assert sudo_user.processes_exposing(marker) == []
        scans += 1
    out, err = call.communicate(timeout=60)
    assert call.returncode == 0, err
    assert json.loads(out)["uid"] == 0
    assert scans > 0
    broker_out, broker_err = broker.stop()
    assert dirs.audit.exists()  # the audit log was written, and is scanned below
    leaks = sudo_user.files_containing(
        marker, [dirs.root, user.home, user.base, tmp_path, dirs.audit, dirs.policies]
    )
    assert leaks == []
    for stream in (out, err, broker_out, broker_err):
        assert marker not in stream
    assert marker not in json.dumps(broker.events).encode()
    tmp_files = [p for p in Path("/tmp").iterdir() if p.is_file() and p.stat().st_uid == user.uid]
    assert sudo_user.files_containing(marker, tmp_files) == []
