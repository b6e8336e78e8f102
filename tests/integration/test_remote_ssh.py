"""ollie-remote for real: OpenSSH on loopback, a second local user as the "remote" account.

The local side is this test process (root in CI): the real :class:`BrokerServer`
with ollie-remote's ``identify`` hook and a scripted person
(:class:`FakePrompter`), and ``ollie-remote`` run as a program.  The remote side
is ``ollie-remote-test`` reached through a real ``sshd`` (see ``ssh_harness.py``),
running the real ``ollie-tools`` / ``ollie-askpass``.

Needs root, sshd, ssh, rsync and sudo: skipped locally otherwise, a failure
under CI=true.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ssh_harness
from scripted_broker import FakePrompter, RawClient, audit_records, make_broker
from ssh_harness import World, state_of, wait_connected

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, ApprovalRequest, PasswordRequest, Remember
from registry_core.broker.serve.server import BrokerServer
from registry_core.paths import resources_dir
from registry_core.remote.identify import make_identifier

pytestmark = [pytest.mark.realstack, pytest.mark.slow]

DENIED = 77
EXAMPLES = resources_dir() / "examples" / "tools"
MARKER_META = {
    "description": "Shows which variant this host resolved.",
    "variants": [
        {"match": {"file": "~/.ollie-remote-marker"}, "description": "remote-only variant"},
        {"match": {"env": "OLLIE_REMOTE_TEST_NEVER_SET"}, "description": "never"},
    ],
}
WHOAMI = """#!/bin/sh
cat >/dev/null
printf '{"uid": %s, "host": "%s"}\\n' "$(id -u)" "$(hostname)"
"""
ELEVATED_META = {"description": "Report who runs it (outside the sandbox).", "elevated": True}
PING = """
import os
from registry_core import paths
from registry_core.broker.wire.client import BrokerClient
with BrokerClient(paths.elevate_socket(os.environ), timeout=10) as client:
    print("pong" if client.ping() else "no pong")
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    ssh_harness.require_real_ssh()
    created = ssh_harness.create_world(tmp_path_factory.mktemp("remote-local"))
    try:
        yield created
    finally:
        ssh_harness.remove_world(created)


def _write_tools(tools: Path) -> None:
    for entry in tools.iterdir():
        entry.unlink()
    for entry in EXAMPLES.iterdir():
        shutil.copy2(entry, tools / entry.name)
    (tools / "marker_probe.meta").write_text(json.dumps(MARKER_META))
    (tools / "remote_whoami.meta").write_text(json.dumps(ELEVATED_META))
    (tools / "remote_whoami").write_text(WHOAMI)
    os.chmod(tools / "remote_whoami", 0o750)  # an unusual mode deploy must keep


@pytest.fixture
def tools(world: World) -> Path:
    directory = world.local / "tools"
    _write_tools(directory)
    return directory


@pytest.fixture
def deployed(world: World, tools: Path) -> Path:
    result = world.ollie_remote("deploy", "remote-a")
    assert result.returncode == 0, result.stderr
    return tools


class LocalBroker:
    """The local broker (real server + identify hook) in a thread of its own."""

    def __init__(self, world: World, prompter: FakePrompter) -> None:
        self.world = world
        self.prompter = prompter
        self.state = world.local / "broker-state"
        self.path = Path(world.local_env()["OLLIE_ELEVATE_SOCKET"])
        self.requesters: list[Requester] = []
        identify = make_identifier(world.local / "run" / "ollie" / "remote")

        def recording(pid: int, uid: int, gid: int, host: str) -> Requester:
            requester = identify(pid, uid, gid, host)
            self.requesters.append(requester)
            return requester

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        shutil.rmtree(self.state, ignore_errors=True)

        async def start() -> BrokerServer:
            broker = make_broker([world.local / "tools"], self.state, prompter)
            server = BrokerServer(broker, self.path, identify=recording)
            await server.start()
            return server

        self.server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(20)

    def audit(self) -> list[dict[str, Any]]:
        return audit_records(self.state)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(20)
        self.loop.close()


@pytest.fixture
def start_broker(world: World) -> Iterator[Any]:
    brokers: list[LocalBroker] = []

    def start(**script: Any) -> LocalBroker:
        broker = LocalBroker(world, FakePrompter(**script))
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.stop()


@pytest.fixture
def connect(world: World) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(host: str, *args: str) -> dict[str, Any]:
        proc = world.start_connect(host, *args)
        procs.append(proc)
        return wait_connected(world, host)

    yield start
    for proc in procs:
        ssh_harness.stop_process(proc)
        assert proc.returncode == 0, world.connect_log()


def remote_call(world: World, tool: str, host: str = "remote-a", socket_path: str = "") -> Any:
    env = f"OLLIE_ELEVATE_SOCKET={socket_path} " if socket_path else ""
    return world.remote(f"{env}~/.local/bin/ollie-tools call {tool}", host=host)


def approvals(prompter: FakePrompter) -> list[ApprovalRequest]:
    return [r for r in prompter.requests if isinstance(r, ApprovalRequest)]


# --- deploy ---------------------------------------------------------------------------


def test_deploy_copies_tools_with_modes_and_the_remote_resolves_its_own_variants(
    world: World, tools: Path
) -> None:
    result = world.ollie_remote("deploy", "remote-a", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["method"] == "rsync"
    remote_dir = world.user.home / ".config" / "ollie" / "tools"
    for name in ("marker_probe.meta", "remote_whoami", "whoami_root", "gpu_status_nvidia"):
        assert name in report["copied"]
        local_mode = stat.S_IMODE((tools / name).stat().st_mode)
        assert stat.S_IMODE((remote_dir / name).stat().st_mode) == local_mode, name
        assert (remote_dir / name).read_bytes() == (tools / name).read_bytes()
        assert (remote_dir / name).stat().st_uid == world.user.uid
    assert (remote_dir / ".ollie-deployed").read_text().splitlines() == sorted(report["copied"])
    # Host-specific resolution: only the remote user has the marker file.
    remote_view = {t["name"]: t for t in report["tools"]}
    assert remote_view["marker_probe"]["status"] == "available"
    assert remote_view["marker_probe"]["variant"] == 0
    assert remote_view["remote_whoami"]["executable"] == str(remote_dir / "remote_whoami")
    local = subprocess.run(
        [str(Path(sys.executable).parent / "ollie-tools"), "list", "--all", "--json"],
        env=world.local_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    local_view = {t["name"]: t for t in json.loads(local.stdout)}
    assert local_view["marker_probe"]["status"] == "hidden"
    # The human report and the deployed-hosts record.
    text = world.ollie_remote("deploy", "remote-a")
    assert "The registry on remote-a resolved:" in text.stdout
    hosts = json.loads((world.local / "state" / "ollie" / "remote-hosts.json").read_text())
    assert hosts["hosts"]["remote-a"]["ollie_tools"].endswith("/.local/bin/ollie-tools")
    # The Tool Browser's source: the whole remote registry, as the remote resolved it.
    dump = world.ollie_remote("dump", "remote-a")
    assert dump.returncode == 0, dump.stderr
    dumped = {t["name"]: t for t in json.loads(dump.stdout)["tools"]}
    assert dumped["marker_probe"]["variants"][0]["conditions"][0]["passed"] is True


def test_deleted_tools_are_removed_remotely_and_user_files_are_kept(
    world: World, deployed: Path
) -> None:
    remote_dir = world.user.home / ".config" / "ollie" / "tools"
    mine = world.remote(
        "printf '#!/bin/sh\\necho mine\\n' > ~/.config/ollie/tools/my_own_tool"
        " && chmod 700 ~/.config/ollie/tools/my_own_tool"
    )
    assert mine.returncode == 0, mine.stderr
    (deployed / "greet").unlink()
    (deployed / "greet.meta").unlink()
    result = world.ollie_remote("deploy", "remote-a", "--method", "tar", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["method"] == "tar"
    assert report["removed"] == ["greet", "greet.meta"]
    assert not (remote_dir / "greet").exists()
    assert not (remote_dir / "greet.meta").exists()
    assert (remote_dir / "my_own_tool").read_text() == "#!/bin/sh\necho mine\n"
    assert stat.S_IMODE((remote_dir / "remote_whoami").stat().st_mode) == 0o750
    assert "my_own_tool" not in (remote_dir / ".ollie-deployed").read_text()


def test_an_unknown_host_key_is_a_clear_error_never_accepted(world: World, tools: Path) -> None:
    result = world.ollie_remote("deploy", "remote-unknown")
    assert result.returncode == 1
    assert "host key of remote-unknown is not known" in result.stderr
    assert "plain `ssh remote-unknown`" in result.stderr
    known = world.local / "ssh" / "empty_known_hosts"
    assert known.read_text() == ""  # nothing was added
    connect = world.ollie_remote("connect", "remote-unknown", timeout=60)
    assert connect.returncode == 1  # fatal at once: no retry loop for a host key problem
    assert "host key of remote-unknown is not known" in connect.stderr
    assert state_of(world, "remote-unknown") is None


# --- connect ------------------------------------------------------------------------------


def test_a_remote_request_fails_closed_without_a_forward(world: World, deployed: Path) -> None:
    result = remote_call(world, "remote_whoami")
    assert result.returncode == DENIED, (result.stdout, result.stderr)


def test_connect_forwards_the_local_broker_and_labels_its_connections_remote(
    world: World, deployed: Path, start_broker: Any, connect: Any
) -> None:
    broker = start_broker()
    state = connect("remote-a")
    assert state["remote_user"] == world.user.name
    # No XDG_RUNTIME_DIR in a bare ssh session: the private directory in the cache.
    runtime = f"{world.user.home}/.cache/ollie/runtime-{os.uname().nodename}"
    assert state["remote_socket"] == f"{runtime}/ollie/elevate.sock"
    ping = world.remote_python(PING)
    assert ping.stdout.strip() == "pong", ping.stderr
    [requester] = broker.requesters
    assert (requester.remote, requester.host, requester.pid) == (True, "remote-a", state["ssh_pid"])
    status = world.ollie_remote("status", "--json")
    [live] = json.loads(status.stdout)
    assert (live["host"], live["connected"]) == ("remote-a", True)
    # The remote socket is private to the remote user.
    socket_dir = Path(state["remote_socket"]).parent
    assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700
    assert socket_dir.stat().st_uid == world.user.uid


def test_remote_requests_are_labelled_and_policies_stay_per_host(
    world: World, deployed: Path, start_broker: Any, connect: Any
) -> None:
    always = Approval(True, Remember.ALWAYS)
    broker = start_broker(approvals=[always], default=Approval(False, Remember.ONCE, "no"))
    state_a = connect("remote-a")
    b_socket = f"{world.user.home}/.cache/ollie/b/elevate.sock"
    connect("remote-b", "--remote-socket", b_socket)

    first = remote_call(world, "remote_whoami")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["uid"] == world.user.uid
    [asked] = approvals(broker.prompter)
    assert (asked.remote, asked.host) == (True, "remote-a")
    assert asked.claimed_host == socket.gethostname()  # what the remote said, shown as a claim
    assert asked.requester.pid == state_a["ssh_pid"]
    assert asked.executable == str(deployed / "remote_whoami")  # the deployed local copy
    assert asked.mismatches == ()  # argv names the deployed file in the remote tools dir
    record = broker.audit()[-1]
    assert (record["remote"], record["host"], record["decision"]) == (True, "remote-a", "allow")
    assert record["claimed_host"] == socket.gethostname()

    again = remote_call(world, "remote_whoami")  # the remembered allow for remote-a decides
    assert again.returncode == 0, again.stderr
    assert len(approvals(broker.prompter)) == 1
    assert broker.audit()[-1]["by"] == "policy"

    other = remote_call(world, "remote_whoami", host="remote-b", socket_path=b_socket)
    assert other.returncode == DENIED, other.stderr  # remote-b is asked, and says no
    assert [(a.host, a.remote) for a in approvals(broker.prompter)][1] == ("remote-b", True)

    with RawClient(broker.path) as client:  # a local request is not covered either
        reply = client.request(
            {
                "v": 1,
                "id": 1,
                "op": "elevate",
                "tool": "remote_whoami",
                "kind": "sandbox",
                "argv": [str(deployed / "remote_whoami")],
                "args": {},
                "cwd": "/",
            }
        )
    assert reply["decision"] == "deny"
    local = approvals(broker.prompter)[2]
    assert (local.host, local.remote, local.claimed_host) == ("testhost", False, None)


def test_the_forward_is_re_established_after_the_connection_is_killed(
    world: World, deployed: Path, start_broker: Any, connect: Any
) -> None:
    start_broker()
    first = connect("remote-a")
    os.kill(first["ssh_pid"], signal.SIGKILL)  # the local ssh client dies
    second = wait_connected(world, "remote-a", old_ssh_pid=first["ssh_pid"])
    assert second["pid"] == first["pid"]  # the same supervisor reconnected
    assert world.remote_python(PING).stdout.strip() == "pong"
    assert world.sshd is not None
    # now the server side of it; sshd's children also include sessions that are just
    # ending (the PING above), which may be gone by the time they are signalled
    signalled = 0
    for pid in ssh_harness.children_of(world.sshd.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            signalled += 1
    assert signalled, "no live sshd session to cut"
    third = wait_connected(world, "remote-a", old_ssh_pid=second["ssh_pid"])
    assert world.remote_python(PING).stdout.strip() == "pong"
    assert third["pid"] == first["pid"]


def test_remote_sudo_gets_the_password_typed_locally(
    world: World, deployed: Path, start_broker: Any, connect: Any
) -> None:
    broker = start_broker(
        approvals=[Approval(True, Remember.ONCE)], passwords=[world.user.password]
    )
    connect("remote-a")
    result = remote_call(world, "whoami_root")
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout) == {"uid": 0, "user": "root"}
    [question] = [r for r in broker.prompter.requests if isinstance(r, PasswordRequest)]
    assert question.user == world.user.name  # the remote account, from ollie-remote's record
    assert (question.approval.host, question.approval.remote) == ("remote-a", True)
    assert world.user.name in question.prompt
    record = broker.audit()[-1]
    assert (record["kind"], record["remote"], record["host"]) == ("sudo", True, "remote-a")
    assert world.user.password not in json.dumps(broker.audit())


def test_disconnect_stops_the_forward_and_requests_fail_closed_again(
    world: World, deployed: Path, start_broker: Any
) -> None:
    start_broker(default=Approval(True, Remember.ONCE))
    proc = world.start_connect("remote-a")
    wait_connected(world, "remote-a")
    result = world.ollie_remote("disconnect", "remote-a")
    assert result.returncode == 0, result.stderr
    assert proc.wait(20) == 0
    assert state_of(world, "remote-a") is None
    assert json.loads(world.ollie_remote("status", "--json").stdout) == []
    assert remote_call(world, "remote_whoami").returncode == DENIED
    assert world.ollie_remote("disconnect", "remote-a").returncode == 3
