"""Sandboxed peers cannot starve the agent of the broker (containment II, finding 8).

The real :class:`BrokerServer` and :class:`Broker` (``scripted_broker.live_server``)
on a real socket, with the default caps.  The agent (this process, outside any
sandbox) gets a rule remembered; then ``sandbox_flooder.py`` starts 130 sandboxes
(processes with a session of their own and ``no_new_privs``, which is how the
broker recognises a Landlock-sandboxed tool) holding 64 connections each:
8,320 connections, more than the uid's 8,192.  Before the sandbox budget they
were all admitted and the agent's next call, a remembered allow, was refused
``too_many_connections`` (which its client reported as "not responding").  Now:

* the sandboxed peers together hold at most the sandboxed budget of the uid;
  every other connection of theirs is refused with a typed error naming the cap;
* the agent still connects and its remembered allow is answered, by policy;
* the project's client, in one more sandbox, says which cap it hit, never
  "not responding".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_procs import stop_process
from scripted_broker import FakePrompter, ServerThread, live_server, run_argv

from registry_core.broker.question import Approval, Remember
from registry_core.broker.serve.flood import FloodLimits
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import BrokerClient, BrokerState, probe_broker

pytestmark = [pytest.mark.slow]

HERE = Path(__file__).resolve().parent
LIMITS = FloodLimits()
SANDBOXES = 130  # the finding's numbers: 130 processes x 64 connections
PER_SANDBOX = LIMITS.connections_per_process


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "greet.meta").write_text(json.dumps({"description": "Say hello."}))
    (directory / "greet").write_text("#!/bin/sh\necho hi\n")
    (directory / "greet").chmod(0o755)
    return directory


@pytest.fixture
def server(tmp_path: Path, tools: Path) -> Iterator[ServerThread]:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS)])
    sock = tmp_path / "run" / "ollie" / "elevate.sock"
    with live_server([tools], tmp_path, sock, prompter, limits=LIMITS) as thread:
        yield thread


def remembered_call(path: Path, tools: Path) -> m.DecisionReply | m.ErrorReply:
    """The agent's call: the project's client, as the dispatcher's gate asks."""
    with BrokerClient(path) as client:
        return client.elevate("greet", m.Kind.SANDBOX, run_argv(tools / "greet"), {}, "/")


def flood(path: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    argv = [sys.executable, str(HERE / "sandbox_flooder.py"), str(path)]
    argv += [str(SANDBOXES), str(PER_SANDBOX)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the flooder died"
    return proc, json.loads(line)


def test_sandboxed_peers_holding_every_connection_cannot_starve_the_agent(
    server: ServerThread, tools: Path
) -> None:
    path = server.path
    first = remembered_call(path, tools)
    assert isinstance(first, m.DecisionReply) and first.decision is m.Decision.ALLOW, first
    proc, report = flood(path)
    try:
        # The agent is unaffected: found alive, and its remembered allow answered.
        assert probe_broker(path) is BrokerState.ALIVE
        again = remembered_call(path, tools)
        assert isinstance(again, m.DecisionReply), again
        assert (again.decision, again.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)
        # The sandboxes hold their budget and no more; the rest got the typed refusal.
        budget = LIMITS.sandboxed_connections_per_uid
        assert report["opened"] == SANDBOXES * PER_SANDBOX, report
        assert report["held"] == budget, report
        assert report["codes"] == {"too_many_connections": SANDBOXES * PER_SANDBOX - budget}
        assert any(f"(limit {budget})" in text for text in report["messages"]), report
        # The sandboxed client names the cap it hit.
        probe = report["probe"]
        assert "not responding" not in probe, probe
        assert probe.startswith("BrokerRefusedError: broker refused: "), probe
        assert f"(limit {budget})" in probe, probe
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the flooder ends its sandboxes, then itself
        stop_process(proc)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
