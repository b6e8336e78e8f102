"""Choosing the elevation gate and reporting a sudo run back, against real Unix sockets.

A scripted server thread stands in for a broker (it answers each request line
with what the test says, or never); the in-process broker is the real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.wire.client import APPROVAL_WAIT, WAIT_ENV
from registry_core.dispatch import broker_gate as gates
from registry_core.dispatch.broker_gate import BrokerGate, InProcessGate, choose_gate
from registry_core.dispatch.gate import RefusingGate
from registry_core.trusted import find_trusted

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


@contextlib.contextmanager
def scripted_broker(path: Path, answer: Answer) -> Iterator[list[dict[str, Any]]]:
    """Serve ``path``: each request line gets ``answer(request)`` (``None``: no reply)."""
    seen: list[dict[str, Any]] = []
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = server.accept()
                with conn, conn.makefile("rwb") as stream:
                    for line in stream:
                        request = json.loads(line)
                        seen.append(request)
                        reply = answer(request)
                        if reply is None:
                            stop.wait(10)  # a hung broker: holds the connection, says nothing
                            break
                        stream.write(json.dumps({"v": 1, "id": request["id"], **reply}).encode())
                        stream.write(b"\n")
                        stream.flush()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield seen
    finally:
        stop.set()
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        worker.join(10)


def pong_or(reply: dict[str, Any]) -> Answer:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {"op": "pong"} if request["op"] == "ping" else reply

    return answer


def decision(value: str, reason: str) -> dict[str, Any]:
    return {"op": "decision", "decision": value, "reason": reason, "by": "user"}


# --- report_sudo: the broker learns how the sudo run ended --------------------------


def test_report_sudo_sends_the_run_and_returns_a_refusal(tmp_path: Path) -> None:
    path = tmp_path / "run" / "elevate.sock"
    with scripted_broker(path, pong_or(decision("deny", "password entry cancelled"))) as seen:
        assert (
            BrokerGate(path).report_sudo("grant-token-0001", 1, True) == "password entry cancelled"
        )
    [request] = seen
    assert request["op"] == "sudo_result"
    assert (request["grant"], request["exit_code"], request["auth_failed"]) == (
        "grant-token-0001",
        1,
        True,
    )


def test_report_sudo_of_an_accepted_run_returns_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run" / "elevate.sock"
    with scripted_broker(path, pong_or(decision("allow", "recorded"))):
        assert BrokerGate(path).report_sudo("grant-token-0001", 0, False) is None
    with scripted_broker(tmp_path / "e.sock", pong_or({"op": "error", "code": "no_grant"})):
        assert BrokerGate(tmp_path / "e.sock").report_sudo("grant-token-0001", 0, False) is None


def test_report_sudo_without_a_broker_returns_nothing(tmp_path: Path) -> None:
    assert BrokerGate(tmp_path / "nobody.sock").report_sudo("grant-token-0001", 0, False) is None


# --- choose_gate ------------------------------------------------------------------


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(runtime),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "OLLIE_TOOLS_PATH": str(tmp_path / "tools"),
        "PATH": str(tmp_path / "bin"),
        **extra,
    }


def test_a_live_broker_is_asked_with_this_hosts_name_and_wait(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    with scripted_broker(path, pong_or(decision("allow", "ok"))):
        gate = choose_gate(env, host="laptop", timeout=42)
    assert isinstance(gate, BrokerGate)
    assert (gate.path, gate.host, gate.timeout) == (path, "laptop", 42)


def test_a_broker_that_does_not_answer_is_a_refusal_naming_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    with scripted_broker(path, lambda request: None):
        gate = choose_gate(env)
    assert isinstance(gate, RefusingGate)
    assert gate.reason == (
        f"the elevation broker on {path} is not responding (stopped or hung?): "
        "denied; restart it (ollie-tray or ollie-broker)"
    )


def test_a_broker_refusing_at_a_cap_is_a_refusal_naming_the_cap(tmp_path: Path) -> None:
    """Never "not responding", never an in-process broker in its place (finding 8)."""
    env = _env(tmp_path)
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    cap = "too many connections from this sandbox (limit 16)"
    refused = {"id": None, "op": "error", "code": "too_many_connections", "message": cap}
    with scripted_broker(path, lambda request: refused):
        gate = choose_gate(env)
    assert isinstance(gate, RefusingGate)
    assert gate.reason == f"broker refused: {cap} (the elevation broker on {path})"


def test_a_request_refused_at_a_cap_is_denied_naming_the_cap(tmp_path: Path) -> None:
    from registry_core.broker.wire.messages import Kind
    from registry_core.dispatch.gate import ElevationRequest
    from registry_core.errors import ElevationDeniedError

    request = ElevationRequest(tool="t", kind=Kind.SANDBOX, argv=("t",), args={}, cwd="/")
    path = tmp_path / "run" / "elevate.sock"
    cap = "too many requests pending from this sandbox (limit 16)"
    refused = {"op": "error", "code": "too_many_requests", "message": cap}
    with scripted_broker(path, pong_or(refused)), pytest.raises(ElevationDeniedError) as denied:
        BrokerGate(path).authorize(request)
    assert str(denied.value) == f"elevation denied: broker refused: {cap}"


def test_no_broker_and_no_front_end_is_a_refusal_naming_both(tmp_path: Path) -> None:
    env = _env(tmp_path)  # no display, no kdialog/zenity on PATH; tests have no tty
    gate = choose_gate(env)
    assert isinstance(gate, RefusingGate)
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    assert gate.reason == (
        f"no elevation broker on {path} and no front-end (kdialog, zenity, terminal) can ask"
    )


def test_no_broker_but_a_front_end_starts_a_private_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # harden_process makes this whole test process non-dumpable: not here.
    monkeypatch.setattr(gates, "harden_process", lambda: None)
    # The system's trusted dialog can ask on this display (a stand-in first on PATH
    # is never counted); nothing is asked here.
    dialogs = [name for name in ("kdialog", "zenity") if find_trusted(name)]
    if not dialogs:
        pytest.skip("neither kdialog nor zenity is installed in a system directory")
    (tmp_path / "bin").mkdir()
    zenity = tmp_path / "bin" / "zenity"
    zenity.write_text("#!/bin/sh\nexit 1\n")
    zenity.chmod(0o755)
    env = _env(tmp_path, DISPLAY=":99")
    gate = choose_gate(env, timeout=42)
    assert isinstance(gate, InProcessGate)
    try:
        assert gate.timeout == 42
        assert gate.broker.prompter_name == dialogs[0]
        directory = gate.path.parent
        assert gate.path.name == "elevate.sock"
        assert directory.parent == tmp_path / "run" / "ollie"
        assert directory.name.startswith("broker-")
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        probe = choose_gate(_env(tmp_path, OLLIE_ELEVATE_SOCKET=str(gate.path)))
        assert isinstance(probe, BrokerGate)  # it answers on its socket
        # one named daemon thread: a command that forgets close() still exits
        [thread] = [t for t in threading.enumerate() if t.name == "ollie-broker"]
        assert thread.daemon
    finally:
        gate.close()
    assert not directory.exists()
    assert not any(t.name == "ollie-broker" for t in threading.enumerate())
    default = choose_gate(env)
    assert isinstance(default, InProcessGate)
    default.close()
    assert default.timeout == APPROVAL_WAIT


def test_an_allowed_request_tells_the_tool_where_to_ask_and_how_long_to_wait(
    tmp_path: Path,
) -> None:
    from registry_core.broker.wire.messages import Kind
    from registry_core.dispatch.gate import ElevationRequest

    path = tmp_path / "run" / "elevate.sock"
    reply = {**decision("allow", "approved"), "grant": "grant-token-0009"}
    with scripted_broker(path, pong_or(reply)) as seen:
        auth = BrokerGate(path, timeout=42).authorize(
            ElevationRequest(tool="t", kind=Kind.SUDO, argv=("sudo",), args={}, cwd="/")
        )
    assert (auth.grant, auth.reason) == ("grant-token-0009", "approved")
    assert seen[-1]["timeout"] == 42  # the request named none: the gate's own wait
    assert auth.env == {
        "OLLIE_ELEVATE_SOCKET": str(path),
        WAIT_ENV: "42",
        gates.GRANT_ENV: "grant-token-0009",
    }


def test_without_a_timeout_the_person_gets_the_default_wait(tmp_path: Path) -> None:
    from registry_core.broker.wire.messages import Kind
    from registry_core.dispatch.gate import ElevationRequest

    path = tmp_path / "run" / "elevate.sock"
    with scripted_broker(path, pong_or(decision("allow", "approved"))) as seen:
        auth = BrokerGate(path).authorize(
            ElevationRequest(tool="t", kind=Kind.SANDBOX, argv=("t",), args={}, cwd="/")
        )
    assert auth.env == {"OLLIE_ELEVATE_SOCKET": str(path), WAIT_ENV: f"{APPROVAL_WAIT:g}"}
    assert seen[-1]["timeout"] == APPROVAL_WAIT


def test_the_broker_is_told_everything_the_request_says(tmp_path: Path) -> None:
    from registry_core.broker.wire.messages import Kind
    from registry_core.dispatch.gate import ElevationRequest

    path = tmp_path / "run" / "elevate.sock"
    request = ElevationRequest(
        tool="t",
        kind=Kind.SANDBOX,
        argv=("t", "-x"),
        args={"n": 1},
        cwd="/srv",
        code="print(1)",
        client="claude",
        timeout=7,
    )
    with scripted_broker(path, pong_or(decision("allow", "approved"))) as seen:
        BrokerGate(path, host="laptop", timeout=42).authorize(request)
    sent = seen[-1]
    assert (sent["tool"], sent["kind"], sent["argv"], sent["args"], sent["cwd"]) == (
        "t",
        "sandbox",
        ["t", "-x"],
        {"n": 1},
        "/srv",
    )
    assert (sent["code"], sent["host"], sent["client"], sent["timeout"]) == (
        "print(1)",
        "laptop",
        "claude",
        7,
    )


def test_a_denial_or_no_broker_is_an_elevation_denied_error_saying_why(tmp_path: Path) -> None:
    from registry_core.broker.wire.messages import Kind
    from registry_core.dispatch.gate import ElevationRequest
    from registry_core.errors import ElevationDeniedError

    request = ElevationRequest(tool="t", kind=Kind.SUDO, argv=("t",), args={}, cwd="/")
    path = tmp_path / "run" / "elevate.sock"
    with (
        scripted_broker(path, pong_or(decision("deny", "denied by you"))),
        pytest.raises(ElevationDeniedError) as denied,
    ):
        BrokerGate(path).authorize(request)
    assert str(denied.value) == "elevation denied: denied by you"
    with pytest.raises(ElevationDeniedError) as unreachable:
        BrokerGate(tmp_path / "nobody.sock").authorize(request)
    assert str(unreachable.value).startswith("elevation denied: broker unreachable: ")
    assert "nobody.sock" in str(unreachable.value)


def test_a_private_broker_uses_the_named_front_end_and_tolerates_its_directory_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates, "harden_process", lambda: None)
    (tmp_path / "bin").mkdir()
    zenity = tmp_path / "bin" / "zenity"  # the fallback would pick it: "none" is named
    zenity.write_text("#!/bin/sh\nexit 1\n")
    zenity.chmod(0o755)
    broker = gates.InProcessBroker(_env(tmp_path, DISPLAY=":99"), prompter_name="none")
    try:
        assert broker.prompter_name == "none"
    finally:
        shutil.rmtree(broker.path.parent)  # a cleaner of the runtime directory was quicker
        broker.close()
    assert not any(t.name == "ollie-broker" for t in threading.enumerate())
