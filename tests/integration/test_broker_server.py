"""The broker's Unix socket server, live: permissions, instances, framing, peers, shutdown.

Every test talks to a real :class:`BrokerServer` (in a thread of its own)
over a real socket; the person is a :class:`FakePrompter`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_broker import (
    FakePrompter,
    RawClient,
    ServerThread,
    audit_records,
    elevate_message,
    live_server,
    make_broker,
)

from registry_core.broker.question import Approval, Remember
from registry_core.broker.serve.server import BrokerAlreadyRunningError, SocketSetupError
from registry_core.broker.wire.client import BrokerClient, broker_alive
from registry_core.broker.wire.messages import Kind
from registry_core.dispatch.broker_gate import BrokerGate
from registry_core.dispatch.gate import ElevationRequest
from registry_core.errors import BrokerUnavailableError, ElevationDeniedError

NOBODY = 65534


def write_tool(directory: Path, name: str, meta: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.meta").write_text(json.dumps(meta))
    exe = directory / name
    exe.write_text("#!/bin/sh\necho hi\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    write_tool(directory, "greet", {"description": "Say hello."})
    return directory


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "run" / "ollie" / "elevate.sock"


@pytest.fixture
def prompter() -> FakePrompter:
    return FakePrompter(default=Approval(True, Remember.ONCE))


@pytest.fixture
def server(
    tools: Path, tmp_path: Path, sock_path: Path, prompter: FakePrompter
) -> Iterator[ServerThread]:
    with live_server([tools], tmp_path, sock_path, prompter) as thread:
        yield thread


def greet(request_id: object, tools: Path, **extra: object) -> dict[str, object]:
    return elevate_message(request_id, "greet", [str(tools / "greet")], **extra)


# --- the socket file -------------------------------------------------------------------


def test_socket_dir_is_0700_and_socket_0600(server: ServerThread, sock_path: Path) -> None:
    assert stat.S_IMODE(sock_path.parent.stat().st_mode) == 0o700
    st = sock_path.lstat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.getuid()


def test_an_existing_open_directory_is_made_private(
    tools: Path, tmp_path: Path, sock_path: Path, prompter: FakePrompter
) -> None:
    sock_path.parent.mkdir(parents=True, mode=0o755)
    sock_path.parent.chmod(0o755)
    with live_server([tools], tmp_path, sock_path, prompter):
        assert stat.S_IMODE(sock_path.parent.stat().st_mode) == 0o700


def test_a_stale_socket_is_replaced(
    tools: Path, tmp_path: Path, sock_path: Path, prompter: FakePrompter
) -> None:
    sock_path.parent.mkdir(parents=True, mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))  # bound, never listening: nobody answers
    dead.close()
    with pytest.raises(ConnectionRefusedError):
        RawClient(sock_path)
    with live_server([tools], tmp_path, sock_path, prompter), RawClient(sock_path) as client:
        assert client.request({"v": 1, "id": 1, "op": "ping"})["op"] == "pong"
        assert stat.S_IMODE(sock_path.lstat().st_mode) == 0o600


def test_a_live_instance_is_not_replaced(
    server: ServerThread, tools: Path, tmp_path: Path, sock_path: Path, prompter: FakePrompter
) -> None:
    second = ServerThread(lambda: make_broker([tools], tmp_path, prompter), sock_path)
    with pytest.raises(BrokerAlreadyRunningError):
        second.__enter__()
    second.stop()
    with RawClient(sock_path) as client:  # the first still serves
        assert client.request({"v": 1, "id": 1, "op": "ping"})["op"] == "pong"


def test_a_regular_file_at_the_socket_path_is_refused(
    tools: Path, tmp_path: Path, sock_path: Path, prompter: FakePrompter
) -> None:
    sock_path.parent.mkdir(parents=True, mode=0o700)
    sock_path.write_text("precious")
    thread = ServerThread(lambda: make_broker([tools], tmp_path, prompter), sock_path)
    with pytest.raises(SocketSetupError, match="not a socket"):
        thread.__enter__()
    thread.stop()
    assert sock_path.read_text() == "precious"


def test_a_directory_of_another_user_is_refused(
    tools: Path, tmp_path: Path, prompter: FakePrompter
) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to create a directory owned by another user")
    other = tmp_path / "theirs"
    other.mkdir(mode=0o700)
    os.chown(other, NOBODY, NOBODY)
    thread = ServerThread(lambda: make_broker([tools], tmp_path, prompter), other / "s.sock")
    with pytest.raises(SocketSetupError, match="belongs to uid"):
        thread.__enter__()
    thread.stop()


# --- frames ------------------------------------------------------------------------------


def test_ping_pong(server: ServerThread, sock_path: Path) -> None:
    with RawClient(sock_path) as client:
        assert client.request({"v": 1, "id": "p1", "op": "ping"}) == {
            "v": 1,
            "id": "p1",
            "op": "pong",
        }


def test_malformed_frames_get_typed_errors_and_the_connection_keeps_working(
    server: ServerThread, sock_path: Path
) -> None:
    cases = [
        (b'{"v":1,"id":9,"op":"ping"\n', "bad_json", None),
        (b"\xff\xfe\n", "bad_json", None),
        (b"[1,2]\n", "bad_json", None),
        (b'{"v":2,"id":7,"op":"ping"}\n', "bad_version", 7),
        (b'{"v":1,"id":8,"op":"frobnicate"}\n', "unknown_op", 8),
        (b'{"v":1,"id":6,"op":"elevate","kind":"sandbox"}\n', "bad_request", 6),
        (b'{"v":1,"id":5,"id":5,"op":"ping"}\n', "bad_json", None),
    ]
    with RawClient(sock_path) as client:
        for frame, code, request_id in cases:
            client.send(frame)
            reply = client.reply()
            assert (reply["op"], reply["code"], reply["id"]) == ("error", code, request_id), frame
            assert reply["message"]
            assert client.request({"v": 1, "id": "after", "op": "ping"})["op"] == "pong"


def test_oversize_frame_gets_frame_too_large_then_recovers(
    server: ServerThread, sock_path: Path
) -> None:
    with RawClient(sock_path) as client:
        client.send(b'{"v":1,"id":1,"op":"ping","pad":"' + b"x" * 70_000)
        reply = client.reply()  # answered as soon as the limit is passed, before the newline
        assert (reply["op"], reply["code"], reply["id"]) == ("error", "frame_too_large", None)
        client.send(b"x" * 10_000 + b'"}\n')  # the rest of that frame is skipped
        assert client.request({"v": 1, "id": 2, "op": "ping"}) == {"v": 1, "id": 2, "op": "pong"}


def test_several_requests_in_flight_on_one_connection(
    server: ServerThread, sock_path: Path, tools: Path, prompter: FakePrompter
) -> None:
    prompter.hold_approvals = True
    with RawClient(sock_path) as client:
        client.send(greet("slow", tools))
        prompter.wait_for(lambda e: e["type"] == "approval")
        client.send({"v": 1, "id": "fast", "op": "ping"})
        assert client.reply() == {"v": 1, "id": "fast", "op": "pong"}
        client.send({"v": 1, "id": "st", "op": "status"})
        status = client.reply()
        assert (status["op"], status["pending"], status["paused"]) == ("status", 1, False)
        prompter.release()
        decision = client.reply()
        assert (decision["id"], decision["decision"], decision["by"]) == ("slow", "allow", "user")


def test_progress_notices_precede_the_decision(
    server: ServerThread, sock_path: Path, tools: Path
) -> None:
    with RawClient(sock_path) as client:
        client.send(greet(3, tools))
        messages = []
        while not messages or messages[-1]["op"] == "progress":
            message = client.receive()
            assert message is not None
            messages.append(message)
    assert {"v": 1, "id": 3, "op": "progress", "state": "waiting_for_user"} in messages
    assert messages[-1]["op"] == "decision"
    assert messages[-1]["id"] == 3


def test_unknown_tool_and_unsupported_op(server: ServerThread, sock_path: Path) -> None:
    with RawClient(sock_path) as client:
        unknown = client.request(elevate_message(1, "nope", ["/bin/true"]))
        assert (unknown["code"], unknown["id"]) == ("unknown_tool", 1)
        browser = client.request({"v": 1, "id": 2, "op": "open_browser"})
        assert browser["code"] == "unsupported"
        grant = client.request(
            {"v": 1, "id": 3, "op": "askpass", "grant": "A" * 43, "prompt": "p", "attempt": 1}
        )
        assert grant["code"] == "no_grant"
        assert "A" * 43 not in grant["message"]


# --- peers --------------------------------------------------------------------------------

PEER_CLIENT = textwrap.dedent(
    """
    import json, os, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sys.argv[1])
    try:
        s.sendall(b'{"v":1,"id":1,"op":"ping"}\\n')
    except OSError:
        pass
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    print(json.dumps({"uid": os.getuid(), "received": data.decode()}))
    """
)


def python_for(uid: int) -> str:
    """A Python interpreter ``uid`` can run (the test venv's may live under /root)."""
    candidates = [sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3"]
    for candidate in candidates:
        if not os.path.exists(candidate):
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "pass"],
                user=uid,
                group=uid,
                extra_groups=[],
                capture_output=True,
                cwd="/",
                check=False,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    pytest.fail(f"no Python interpreter that uid {uid} can run among {candidates}")


def test_a_peer_of_another_uid_is_refused(
    tools: Path, tmp_path: Path, prompter: FakePrompter
) -> None:
    if os.getuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run as root to test the refusal of another uid")
        pytest.skip("needs root to run a client as another user")
    # The socket is reachable by file modes here on purpose: this is about SO_PEERCRED.
    open_dir = Path(tempfile.mkdtemp(prefix="ollie-peer-"))
    try:
        path = open_dir / "elevate.sock"
        with live_server([tools], tmp_path, path, prompter):
            open_dir.chmod(0o711)
            path.chmod(0o666)
            result = subprocess.run(
                [python_for(NOBODY), "-c", PEER_CLIENT, str(path)],
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
                cwd="/",
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert result.returncode == 0, result.stderr
            out = json.loads(result.stdout)
            assert out["uid"] == NOBODY
            lines = out["received"].splitlines()
            assert len(lines) == 1, lines  # one error, then the close; the ping is not answered
            error = json.loads(lines[0])
            assert (error["op"], error["code"], error["id"], error["v"]) == (
                "error",
                "peer_uid",
                None,
                1,
            )
            assert str(NOBODY) in error["message"]
            with RawClient(path) as client:  # our own uid is still served
                assert client.request({"v": 1, "id": 1, "op": "ping"})["op"] == "pong"
        assert prompter.events == []
    finally:
        shutil.rmtree(open_dir)


FOREIGN_BROKER = textwrap.dedent(
    """
    import json, os, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sys.argv[1])
    os.chmod(sys.argv[1], 0o666)
    s.listen(8)
    print("ready", flush=True)
    while True:
        conn, _ = s.accept()
        for line in conn.makefile("rb"):
            msg = json.loads(line)
            reply = {"v": 1, "id": msg["id"], "op": "pong"}
            if msg["op"] == "elevate":
                reply.update(op="decision", decision="allow", reason="forged", by="user")
            conn.sendall(json.dumps(reply).encode() + b"\\n")
        conn.close()
    """
)


def test_clients_refuse_a_broker_of_another_uid(tmp_path: Path) -> None:
    if os.getuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run as root to run a broker as another user")
        pytest.skip("needs root to run a fake broker as another user")
    planted = Path(tempfile.mkdtemp(prefix="ollie-planted-"))
    planted.chmod(0o1777)  # like /tmp: anybody may create a socket here
    path = planted / "elevate.sock"
    fake = subprocess.Popen(
        [python_for(NOBODY), "-c", FOREIGN_BROKER, str(path)],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        assert fake.stdout.readline() == "ready\n"
        with RawClient(path) as raw:  # a client that does not check would be fooled
            forged = raw.request(elevate_message(1, "greet", ["/bin/true"]))
            assert (forged["decision"], forged["reason"]) == ("allow", "forged")
        with pytest.raises(BrokerUnavailableError, match=f"served by uid {NOBODY}"):
            BrokerClient(path)
        assert not broker_alive(path)
        request = ElevationRequest("greet", Kind.SANDBOX, ("/bin/true",), {}, "/")
        with pytest.raises(ElevationDeniedError, match="broker unreachable"):
            BrokerGate(path).authorize(request)
    finally:
        fake.kill()
        fake.wait(10)
        assert fake.stdout is not None
        fake.stdout.close()
        shutil.rmtree(planted)


CHILD_CLIENT = textwrap.dedent(
    """
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode() + b"\\n")
    reader = s.makefile("rb")
    while True:
        message = json.loads(reader.readline())
        if message["op"] != "progress":
            print(json.dumps(message))
            break
    """
)


def test_requester_identity_of_a_child_process(
    server: ServerThread, sock_path: Path, tools: Path, tmp_path: Path, prompter: FakePrompter
) -> None:
    workdir = tmp_path / "somewhere"
    workdir.mkdir()
    argv = [sys.executable, "-c", CHILD_CLIENT, str(sock_path), json.dumps(greet("c1", tools))]
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert json.loads(out)["decision"] == "allow"
    event = prompter.wait_for(lambda e: e["type"] == "approval")
    requester = event["requester"]
    assert requester["pid"] == proc.pid
    assert requester["uid"] == os.getuid()
    assert requester["exe"] == os.path.realpath(sys.executable)
    assert requester["cmdline"] == argv
    assert requester["cwd"] == str(workdir)
    assert requester["parents"][0]["pid"] == os.getpid()
    assert requester["parents"][0]["exe"] == os.path.realpath(sys.executable)
    [record] = audit_records(tmp_path)
    assert record["requester"]["pid"] == proc.pid
    assert record["requester"]["cwd"] == str(workdir)


# --- going away -----------------------------------------------------------------------------


def test_client_disconnect_withdraws_the_prompt(
    server: ServerThread, sock_path: Path, tools: Path, tmp_path: Path, prompter: FakePrompter
) -> None:
    prompter.hold_approvals = True
    client = RawClient(sock_path)
    client.send(greet("bye", tools))
    asked = prompter.wait_for(lambda e: e["type"] == "approval")
    client.close()
    prompter.wait_for(lambda e: e["type"] == "cancelled" and e["id"] == asked["id"])
    decided = prompter.wait_for(lambda e: e["type"] == "decided")
    assert (decided["id"], decided["approved"], decided["by"]) == (
        asked["id"],
        False,
        "client_gone",
    )
    [record] = audit_records(tmp_path)
    assert (record["decision"], record["by"], record["request_id"]) == (
        "deny",
        "client_gone",
        asked["id"],
    )
    assert server.call(lambda: len(server.broker.pending)) == 0
    with RawClient(sock_path) as other:
        assert other.request({"v": 1, "id": 1, "op": "status"})["pending"] == 0


def test_shutdown_denies_the_pending_request_before_closing(
    server: ServerThread, sock_path: Path, tools: Path, tmp_path: Path, prompter: FakePrompter
) -> None:
    prompter.hold_approvals = True
    with RawClient(sock_path) as client:
        client.send(greet("pending", tools))
        prompter.wait_for(lambda e: e["type"] == "approval")
        server.close_server()
        decision = client.reply()
        assert (decision["op"], decision["id"], decision["decision"], decision["by"]) == (
            "decision",
            "pending",
            "deny",
            "shutdown",
        )
        assert decision["grant"] is None
        assert client.receive() is None  # then the close
    assert not os.path.lexists(sock_path)
    assert [r["by"] for r in audit_records(tmp_path)] == ["shutdown"]
    with pytest.raises(FileNotFoundError):
        RawClient(sock_path)


def test_shutdown_leaves_a_foreign_socket_file_alone(server: ServerThread, sock_path: Path) -> None:
    sock_path.unlink()  # somebody else took the path over meanwhile
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with other:
        other.bind(str(sock_path))
        server.close_server()
        assert sock_path.exists()
