"""The real headless ``ollie-broker`` keeps its registry live (issue 19).

It scans the tools once at start and then follows file-system events: a tool
installed while it runs is known to the next request, an edited one is seen
edited, a removed one is unknown again, without a restart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_procs import stop_process
from scripted_broker import RawClient, elevate_message

pytestmark = pytest.mark.realstack

DEADLINE = 20.0


def _decide(sock: Path, tool: str, argv: list[str]) -> dict[str, object]:
    with RawClient(sock, timeout=DEADLINE) as client:
        return client.request(elevate_message(1, tool, argv))


def _until(sock: Path, tool: str, argv: list[str], wanted: str) -> dict[str, object]:
    """The reply once it contains ``wanted`` (events arrive asynchronously), within DEADLINE."""
    end = time.monotonic() + DEADLINE
    while True:
        reply = _decide(sock, tool, argv)
        if wanted in json.dumps(reply) or time.monotonic() > end:
            return reply
        time.sleep(0.02)


def test_ollie_broker_follows_tool_changes(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    sock = tmp_path / "run" / "ollie" / "elevate.sock"
    env = {
        **os.environ,
        "OLLIE_TOOLS_PATH": str(tools),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
    }
    program = Path(sys.executable).parent / "ollie-broker"
    argv = [str(program), "--front-end", "none", "--socket", str(sock)]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "listening on" in line, line
        exe = tools / "late"
        reply = _decide(sock, "late", [str(exe)])
        assert reply["op"] == "error" and reply["code"] == "unknown_tool", reply

        exe.write_text("#!/bin/sh\necho hi\n")
        exe.chmod(0o755)
        (tools / "late.meta").write_text(json.dumps({"description": "installed late"}))
        reply = _until(sock, "late", [str(exe)], '"decision"')
        # Known now: denied only because nobody can be asked (--front-end none).
        assert reply["op"] == "decision" and reply["decision"] == "deny", reply
        assert "front-end" in str(reply["reason"]), reply

        (tools / "late.meta").write_text(json.dumps({"description": "x", "tier": "galactic"}))
        reply = _until(sock, "late", [str(exe)], "tool_unavailable")
        assert reply["op"] == "error" and reply["code"] == "tool_unavailable", reply

        (tools / "late.meta").unlink()
        reply = _until(sock, "late", [str(exe)], "unknown_tool")
        assert reply["op"] == "error" and reply["code"] == "unknown_tool", reply
    finally:
        stop_process(proc)
        proc.stderr and proc.stderr.close()
