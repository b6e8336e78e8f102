"""bench/broker.py's flood measurement: a legitimate client's p50 while other
processes hold idle connections and flood requests."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _broker_wire import LineClient, elevate_frame

from registry_core.broker.ask.none import NonePrompter
from registry_core.broker.question import Approval, ApprovalRequest
from registry_core.broker.serve.flood import FloodLimits

FLOOD_TARGET = 2.0  # flooded p50 / quiet p50

FLOODER = r"""
import json, resource, socket, sys, threading
mode, count, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
held, answered = [], 0
if mode == "idle":
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            pass
        held.append(s)
    held[-1].setblocking(True)
    answered = int(bool(held[-1].recv(4096)))  # the broker got through the backlog
else:
    frame, admitted = sys.argv[4].encode(), int(sys.argv[5])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    held.append(s)
    # Sent from a thread while this one reads: the broker stops reading a peer whose
    # replies pile up unread, so sending everything first could wait forever.
    sender = threading.Thread(target=s.sendall, args=(frame * count,), daemon=True)
    sender.start()
    reader = s.makefile("rb")
    while answered < count - admitted:  # the refusals; the admitted ones stay queued
        answered += json.loads(reader.readline()).get("op") == "error"
    sender.join()
print(json.dumps({"answered": answered}), flush=True)
sys.stdin.read()
"""


def legit_p50(path: Path, exe: Path, requests: int) -> float:
    client = LineClient(path)
    samples = []
    try:
        for index in range(requests):
            frame = elevate_frame(f"legit{index}", "allowed", exe)
            start = time.perf_counter()
            reply = json.loads(client.round_trip(frame))
            samples.append(time.perf_counter() - start)
            if reply.get("decision") != "allow":
                raise RuntimeError(f"the legitimate client got {reply}")
    finally:
        client.close()
    return statistics.median(samples) * 1e6


def start_flooder(*args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """A flooding process, once it holds its connections (and its report)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOODER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"flooder {args[0]} did not start")
    return proc, json.loads(line)


def stop_flooder(proc: subprocess.Popen[str]) -> None:
    proc.communicate(timeout=60)


class HeldPrompter(NonePrompter):
    """A person who never answers: what is asked stays queued (until withdrawn)."""

    @property
    def name(self) -> str:
        return "held"

    def available(self) -> bool:
        return True

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def measure_flood(path: Path, tools: Path, requests: int, idle: int, flood: int) -> dict[str, Any]:
    exe = tools / "allowed"
    quiet = legit_p50(path, exe, requests)
    # The flood asks for a tool with no policy, so what the caps admit waits for a
    # person (who does not answer) and the rest is refused with a typed error.
    frame = elevate_frame("f", "flooded", tools / "flooded").decode()
    admitted = str(FloodLimits().requests_per_connection)
    idler, _ = start_flooder("idle", str(idle), str(path))
    flooder, report = start_flooder("requests", str(flood), str(path), frame, admitted)
    try:
        flooded = legit_p50(path, exe, requests)
    finally:
        stop_flooder(idler)
        stop_flooder(flooder)
    ratio = flooded / quiet
    return {
        "idle": idle,
        "flood": flood,
        "refused": report["answered"],
        "quiet_p50_us": quiet,
        "flooded_p50_us": flooded,
        "ratio": ratio,
        "pass": ratio <= FLOOD_TARGET,
    }
