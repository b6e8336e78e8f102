"""``LazyGate``: a gate is chosen only when a call needs elevation, once, with the
host and wait given; sudo results go only to a gate that exists; ``close`` stops a
private broker.  Real Unix sockets (the scripted broker of ``test_gates_choice``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from test_gates_choice import _env, decision, scripted_broker

from registry_core.broker.wire.client import APPROVAL_WAIT
from registry_core.broker.wire.messages import Kind
from registry_core.dispatch import broker_gate as gates
from registry_core.dispatch.gate import ElevationRequest
from registry_core.dispatch.lazy_gate import LazyGate
from registry_core.errors import ElevationDeniedError

REQUEST = ElevationRequest(tool="t", kind=Kind.SUDO, argv=("sudo", "t"), args={}, cwd="/")


def answer(request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "ping":
        return {"op": "pong"}
    if request["op"] == "sudo_result":
        return decision("deny", "password entry cancelled")
    return {**decision("allow", "approved"), "grant": "grant-token-0009"}


def test_nothing_is_chosen_until_a_call_needs_elevation(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    gate = LazyGate(env, host="laptop", timeout=42)
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "elsewhere")  # the gate kept its own copy
    with scripted_broker(path, answer) as seen:
        assert gate.report_sudo("grant-token-0001", 1, True) is None  # no gate: not sent
        gate.close()  # nothing to close
        assert seen == []
        auth = gate.authorize(REQUEST)
        assert (auth.grant, auth.reason) == ("grant-token-0009", "approved")
        gate.authorize(REQUEST)
        assert [r["op"] for r in seen].count("ping") == 1  # chosen once
        assert [(r["host"], r["timeout"]) for r in seen if r["op"] == "elevate"] == [
            ("laptop", 42),
            ("laptop", 42),
        ]
        assert gate.report_sudo("grant-token-0009", 1, True) == "password entry cancelled"
        assert seen[-1]["op"] == "sudo_result"
        count = len(seen)
        gate.close()
        assert gate.report_sudo("grant-token-0009", 1, True) is None  # forgotten on close
        assert len(seen) == count


def test_without_host_or_wait_the_defaults_are_sent(tmp_path: Path) -> None:
    path = tmp_path / "run" / "ollie" / "elevate.sock"
    with scripted_broker(path, answer) as seen:
        LazyGate(_env(tmp_path)).authorize(REQUEST)
    [sent] = [r for r in seen if r["op"] == "elevate"]
    assert sent["timeout"] == APPROVAL_WAIT
    assert "host" not in sent or sent["host"] is None


def test_close_stops_a_private_broker_and_a_later_call_chooses_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # harden_process makes this whole test process non-dumpable: not here.
    monkeypatch.setattr(gates, "harden_process", lambda: None)
    (tmp_path / "bin").mkdir()
    zenity = tmp_path / "bin" / "zenity"  # never started: nothing is asked here
    zenity.write_text("#!/bin/sh\nexit 1\n")
    zenity.chmod(0o755)
    gate = LazyGate(_env(tmp_path, DISPLAY=":99"), timeout=5)
    with pytest.raises(ElevationDeniedError):  # zenity says no (exit 1)
        gate.authorize(REQUEST)
    [thread] = [t for t in threading.enumerate() if t.name == "ollie-broker"]
    [directory] = (tmp_path / "run" / "ollie").glob("broker-*")
    with pytest.raises(ElevationDeniedError):
        gate.authorize(REQUEST)
    assert [t for t in threading.enumerate() if t.name == "ollie-broker"] == [thread]  # the same
    gate.close()
    assert not directory.exists()
    assert not any(t.name == "ollie-broker" for t in threading.enumerate())
    try:
        with pytest.raises(ElevationDeniedError):
            gate.authorize(REQUEST)
        [again] = (tmp_path / "run" / "ollie").glob("broker-*")  # chosen again: a new one
        assert again != directory
    finally:
        gate.close()
