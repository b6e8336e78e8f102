"""The broker survives floods: thousands of connections and requests from one process.

The real broker (``scripted_broker.py`` as a program: the real
:class:`BrokerServer` and :class:`Broker` with a person who is "thinking",
so requests stay queued) runs as its own process with the soft descriptor
limit a desktop session gives (1,024, via ``prlimit``), its log in a file.
From this test process, one "flooder" opens 3,000 idle connections and then
queues 3,000 requests on one connection; meanwhile a legitimate client must
still be answered, every refusal must be a typed ``error``, and the log must
stay small.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness_procs import stop_process
from scripted_broker import RawClient

from registry_core.broker.serve.flood import FloodLimits

pytestmark = [pytest.mark.realstack, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
IDLE = 3000
FLOOD = 3000
SOFT_LIMIT = 1024
LOG_BUDGET = 64 * 1024
DEADLINE = 20.0
LIMITS = FloodLimits()


@dataclass
class Broker:
    proc: subprocess.Popen[bytes]
    socket: Path
    log: Path
    events: Any


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    if shutil.which("prlimit") is None:
        pytest.fail("prlimit (util-linux) is missing")
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE + 200:
        pytest.fail(f"the hard descriptor limit {hard} is below {IDLE + 200}: raise it")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "greet.meta").write_text(json.dumps({"description": "Say hello."}))
    (tools / "greet").write_text("#!/bin/sh\necho hi\n")
    (tools / "greet").chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    sock = tmp_path / "run" / "ollie" / "elevate.sock"
    log = tmp_path / "broker.log"
    read_end, write_end = os.pipe()
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    argv = ["prlimit", f"--nofile={SOFT_LIMIT}:{hard_text}", "--", sys.executable]
    argv += [str(HERE / "scripted_broker.py"), "--socket", str(sock), "--tools", str(tools)]
    argv += ["--state", str(state), "--events-fd", str(write_end), "--timeout", "300"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])},
        )
    os.close(write_end)
    events = os.fdopen(read_end, "r")
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"hold_approvals": True}).encode() + b"\n")
        proc.stdin.flush()
        ready = json.loads(events.readline() or "{}")
        assert ready.get("type") == "ready", log.read_text()
        yield Broker(proc, sock, log, events)
    finally:
        stop_process(proc)
        if proc.stdin is not None:
            proc.stdin.close()
        events.close()


def ping_within(path: Path, seconds: float) -> float:
    """A legitimate client's ping; how long the answer took (fails after ``seconds``)."""
    started = time.monotonic()
    with RawClient(path, timeout=seconds) as client:
        reply = client.request({"v": 1, "id": "legit", "op": "ping"})
    assert reply["op"] == "pong", reply
    return time.monotonic() - started


@contextmanager
def flooding(broker: Broker, *args: str) -> Iterator[dict[str, Any]]:
    """``flood_client.py`` in its own process; yields its report while it holds everything."""
    argv = [sys.executable, str(HERE / "flood_client.py"), *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"the flooder died: {broker.log.read_text()[-2000:]}"
        yield json.loads(line)
    finally:
        stop_process(proc)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_idle_connections_do_not_lock_out_a_legitimate_client(broker: Broker) -> None:
    with flooding(broker, "idle", str(IDLE), str(broker.socket)) as report:
        assert report["last_50"] == {"too_many_connections": 50}, report
        ping_within(broker.socket, 5.0)
    assert broker.log.stat().st_size < LOG_BUDGET, broker.log.read_text()[-2000:]


def test_a_request_flood_on_one_connection_is_capped(broker: Broker) -> None:
    cap = LIMITS.requests_per_connection
    with flooding(broker, "requests", str(FLOOD), str(broker.socket), str(cap)) as report:
        assert report["replies"] == {"too_many_requests": FLOOD - cap}, report
        took = ping_within(broker.socket, 5.0)
        with RawClient(broker.socket, timeout=DEADLINE) as other:
            status = other.request({"v": 1, "id": "s", "op": "status"})
        assert status["pending"] <= cap, status
    assert took < 5.0
    assert broker.log.stat().st_size < LOG_BUDGET, broker.log.read_text()[-2000:]


def test_ollie_broker_raises_its_descriptor_limit(tmp_path: Path) -> None:
    """Started with a 256 soft limit, the real ``ollie-broker`` runs with the hard one."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    sock = tmp_path / "run" / "ollie" / "elevate.sock"
    program = Path(sys.executable).parent / "ollie-broker"
    argv = ["prlimit", f"--nofile=256:{hard_text}", "--", str(program)]
    argv += ["--front-end", "none", "--socket", str(sock)]
    env = {**os.environ, "OLLIE_TOOLS_PATH": str(tmp_path / "tools")}
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "listening on" in line, line
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        row = next(r for r in limits.splitlines() if r.startswith("Max open files"))
        soft_now = row.split()[3]
        expected = str(1 << 20) if hard == resource.RLIM_INFINITY else str(hard)
        assert soft_now == expected, row
    finally:
        stop_process(proc)
        if proc.stderr is not None:
            proc.stderr.close()
