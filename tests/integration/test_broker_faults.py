"""The broker and its clients under faults, with real processes.

FIFOs where the broker's files belong (defect 3), a stopped broker and a
bounded client (defect 5), SIGHUP (defect 7), and brokers started at the same
instant (defect 9).  The broker is ``ollie-broker --front-end none``: every
request it cannot decide from a policy is denied at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_procs import stop_process

from registry_core.broker.serve.listen import socket_is_live
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import BrokerClient, BrokerNotRespondingError

BROKER = "from registry_core.cli.broker import main_entry; main_entry()"
TOOLS = "from registry_core.cli.tools import main_entry; main_entry()"
BOUND = 20.0  # seconds: anything that takes longer counts as a hang


def _env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_STATE_HOME=str(base / "state"),
        XDG_CACHE_HOME=str(base / "cache"),
        XDG_RUNTIME_DIR=str(base / "run"),
        OLLIE_TOOLS_PATH=str(base / "tools"),
        OLLIE_ELEVATE_SOCKET=str(base / "run" / "ollie" / "elevate.sock"),
    )
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    (base / "tools").mkdir(parents=True, exist_ok=True)
    (base / "run").mkdir(mode=0o700, exist_ok=True)
    tool = base / "tools" / "greet"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    (base / "tools" / "greet.meta").write_text('{"description": "says hi", "elevated": true}')
    return env


def _sock(env: dict[str, str]) -> Path:
    return Path(env["OLLIE_ELEVATE_SOCKET"])


def _start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", BROKER, "--front-end", "none"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    line = proc.stderr.readline()  # blocks until the broker says it listens (or dies)
    assert "listening on" in line, line + proc.stderr.read()


@contextlib.contextmanager
def broker(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = _start(env)
    try:
        _wait_listening(proc)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)
        assert proc.stderr is not None
        proc.stderr.close()


def _tools(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", TOOLS, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND * 2,
        check=False,
    )


def _elevate(client: BrokerClient) -> m.Reply:
    return client.elevate("greet", m.Kind.SANDBOX, ["/x"], {}, "/", timeout=5)


def test_fifos_at_the_policies_and_audit_paths_hang_nothing(tmp_path: Path) -> None:
    env = _env(tmp_path)
    policies = tmp_path / "config" / "ollie" / "policies.yaml"
    audit = tmp_path / "state" / "ollie" / "audit.jsonl"
    for fifo in (policies, audit):
        fifo.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(fifo)
    with broker(env) as proc:
        started = time.monotonic()
        with BrokerClient(_sock(env), timeout=BOUND) as client:
            assert client.ping()
            reply = _elevate(client)
            assert isinstance(reply, m.DecisionReply)
            assert reply.decision is m.Decision.DENY
            assert client.ping()
        assert time.monotonic() - started < BOUND
        listed = _tools(env, "policy", "list")
        assert "not a regular file (a FIFO)" in listed.stderr
        assert str(policies) in listed.stderr
        read = _tools(env, "audit")
        assert read.returncode != 0
        assert "not a regular file (a FIFO)" in read.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(BOUND) == 0
    assert not _sock(env).exists()


def test_a_stopped_broker_is_not_responding_and_clients_are_bounded(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with broker(env) as proc:
        os.kill(proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        with (
            pytest.raises(BrokerNotRespondingError, match="not responding"),
            BrokerClient(_sock(env), timeout=1.0) as client,
        ):
            client.ping()
        assert time.monotonic() - started < 5
        started = time.monotonic()
        call = _tools(env, "call", "greet", "--elevated", "--timeout", "2")
        assert call.returncode == 77
        assert "not responding" in call.stderr
        assert "no elevation broker" not in call.stderr
        assert "Traceback" not in call.stderr
        assert time.monotonic() - started < BOUND
        os.kill(proc.pid, signal.SIGCONT)
        with BrokerClient(_sock(env), timeout=BOUND) as client:
            assert client.ping()  # and it still serves once it runs again


def test_sighup_takes_the_shutdown_path(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with broker(env) as proc:
        assert socket_is_live(_sock(env))
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(BOUND) == 0  # not killed by the signal (-1)
        assert not os.path.lexists(_sock(env))
        assert proc.stderr is not None
        errors = proc.stderr.read()
        assert "Traceback" not in errors, errors


@pytest.mark.parametrize("stale", [False, True])
def test_simultaneous_starts_one_wins_the_rest_say_already_running(
    tmp_path: Path, stale: bool
) -> None:
    env = _env(tmp_path)
    sock = _sock(env)
    for _round in range(3):
        if stale:  # a socket file left by a crashed broker: the racers all see it stale
            import socket as socket_module

            sock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            dead = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
            dead.bind(str(sock))
            dead.close()
        procs = [_start(env) for _ in range(4)]
        try:
            outputs: dict[int, str] = {}
            deadline = time.monotonic() + BOUND * 3
            while len(outputs) < len(procs) - 1 and time.monotonic() < deadline:
                for proc in procs:
                    if proc.pid not in outputs and proc.poll() is not None:
                        assert proc.stderr is not None
                        outputs[proc.pid] = proc.stderr.read()
                time.sleep(0.05)
            losers = [p for p in procs if p.pid in outputs]
            winners = [p for p in procs if p.pid not in outputs]
            assert len(winners) == 1, outputs
            for proc in losers:
                text = outputs[proc.pid]
                assert proc.returncode == 1, text
                assert "already listening" in text, text
                assert "Traceback" not in text, text
            with BrokerClient(sock, timeout=BOUND) as client:
                assert client.ping()  # the winner's socket was never unlinked
            assert stop_process(winners[0]) == 0
            assert not os.path.lexists(sock)
        finally:
            for proc in procs:
                stop_process(proc)
                assert proc.stderr is not None
                proc.stderr.close()
