"""Benchmark: the elevation broker's round trip against a bare asyncio echo server.

In the same run, each server in an event loop of its own thread, both on a
Unix socket in a fresh temporary directory:

1. echo     ``asyncio.start_unix_server`` answering each line with itself;
2. broker   the real :class:`BrokerServer` + :class:`Broker`: the same
            ``elevate`` frame, decided by a remembered ``always`` policy
            (codec, SO_PEERCRED at connect, registry facts incl. the
            executable's sha256, policy lookup, one audit line, the reply).

Round trips are measured on one connection (blocking client, one request in
flight), in interleaved rounds so drift hits both alike: p50 and p99 over
``--requests`` requests each.  Target: broker p50 <= 3x echo p50.

Then ``--clients`` concurrent asyncio connections each send one ``elevate``
(half for a policy-allowed tool, half for a policy-denied one) and check that
the reply carries their own id and the right decision: wall time and
correctness (target: all correct).

The broker's registry is a snapshot loaded once, as the tray keeps a live one
(``--rescan`` makes it rescan the tools directory per request, as the
headless ``ollie-broker`` does; informational).  The tools are written just
before the run, and the broker hashes an executable changed in the last two
seconds on every request (:class:`~registry_core.elevation.facts.Sha256Cache`);
installed tools are older, so the run waits that long first.

Usage::

    .venv/bin/python bench/broker.py [--requests 2000] [--clients 1000] [--rescan] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from registry_core.elevation.audit import AuditLog  # noqa: E402
from registry_core.elevation.core import Broker, BrokerConfig  # noqa: E402
from registry_core.elevation.facts import SHA256  # noqa: E402
from registry_core.elevation.messages import Kind  # noqa: E402
from registry_core.elevation.policies import PolicyStore, file_sha256  # noqa: E402
from registry_core.elevation.prompter import Remember  # noqa: E402
from registry_core.elevation.prompters.none import NonePrompter  # noqa: E402
from registry_core.elevation.server import BrokerServer  # noqa: E402
from registry_core.registry import Registry, RegistryLoader  # noqa: E402

T = TypeVar("T")
TARGET = 3.0  # broker p50 / echo p50
HOST = "benchhost"
TOOL = "#!/bin/sh\ncat >/dev/null; echo ok\n"


class LoopThread:
    """An asyncio loop in a daemon thread; coroutines are submitted from outside."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


def elevate_frame(request_id: int | str, tool: str, exe: Path) -> bytes:
    message = {
        "v": 1,
        "id": request_id,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": [str(exe)],
        "args": {"path": "/home/someone/notes.txt", "text": "hello"},
        "cwd": "/home/someone/project",
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class LineClient:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        return self.reader.readline()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure_latency(
    broker_path: Path, echo_path: Path, exe: Path, requests: int, warmup: int
) -> dict[str, Any]:
    broker, echo = LineClient(broker_path), LineClient(echo_path)
    times: dict[str, list[float]] = {"broker": [], "echo": []}
    wrong = 0
    try:
        rounds = 20
        per_round = max(1, requests // rounds)
        for index in range(warmup + requests):
            frame = elevate_frame(index, "allowed", exe)
            measured = index >= warmup
            # Interleave: rounds alternate which server goes first.
            order = (("broker", broker), ("echo", echo))
            if (index // per_round) % 2:
                order = order[::-1]
            for name, client in order:
                start = time.perf_counter()
                reply = client.round_trip(frame)
                elapsed = time.perf_counter() - start
                if measured:
                    times[name].append(elapsed)
                if name == "broker":
                    decoded = json.loads(reply)
                    ok = decoded.get("decision") == "allow" and decoded.get("by") == "policy"
                    wrong += not ok or decoded.get("id") != index
                elif reply != frame:
                    wrong += 1
    finally:
        broker.close()
        echo.close()
    result: dict[str, Any] = {"requests": requests, "wrong_replies": wrong}
    for name, samples in times.items():
        result[name] = {
            "p50_us": statistics.median(samples) * 1e6,
            "p99_us": percentile(samples, 0.99) * 1e6,
            "mean_us": statistics.fmean(samples) * 1e6,
        }
    result["p50_ratio"] = result["broker"]["p50_us"] / result["echo"]["p50_us"]
    result["p99_ratio"] = result["broker"]["p99_us"] / result["echo"]["p99_us"]
    result["pass"] = result["p50_ratio"] <= TARGET and wrong == 0
    return result


async def _one_client(path: Path, index: int, tools: Path) -> bool:
    tool = "allowed" if index % 2 == 0 else "denied"
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(elevate_frame(f"c{index}", tool, tools / tool))
        await writer.drain()
        while True:
            line = await reader.readline()
            if not line:
                return False
            reply = json.loads(line)
            if reply.get("op") == "progress":
                continue
            expected = "allow" if tool == "allowed" else "deny"
            return bool(
                reply.get("id") == f"c{index}"
                and reply.get("decision") == expected
                and reply.get("by") == "policy"
            )
    finally:
        writer.close()
        await writer.wait_closed()


def measure_concurrency(path: Path, tools: Path, clients: int) -> dict[str, Any]:
    async def everyone() -> list[bool | BaseException]:
        return await asyncio.gather(
            *(_one_client(path, i, tools) for i in range(clients)), return_exceptions=True
        )

    start = time.perf_counter()
    results = asyncio.run(everyone())
    wall = time.perf_counter() - start
    correct = sum(r is True for r in results)
    errors = sorted({repr(r) for r in results if isinstance(r, BaseException)})
    return {
        "clients": clients,
        "correct": correct,
        "wall_ms": wall * 1e3,
        "errors": errors[:3],
        "pass": correct == clients,
    }


def build_broker(base: Path, rescan: bool) -> tuple[Callable[[], Broker], Path]:
    tools = base / "tools"
    tools.mkdir()
    for name in ("allowed", "denied"):
        exe = tools / name
        exe.write_text(TOOL)
        exe.chmod(0o755)
        (tools / f"{name}.meta").write_text(json.dumps({"description": f"The {name} tool."}))
    policies = PolicyStore(base / "config" / "ollie" / "policies.yaml")
    for name, choice in (("allowed", Remember.ALWAYS), ("denied", Remember.DENY_ALWAYS)):
        exe = tools / name
        policies.remember(name, Kind.SANDBOX, HOST, choice, exe, file_sha256(exe))
    loader = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"})
    snapshot = loader.load()

    def cached() -> Registry:
        return snapshot

    def make() -> Broker:
        return Broker(
            registry=loader.load if rescan else cached,
            prompter=NonePrompter(),
            policies=policies,
            audit=AuditLog(base / "state" / "ollie" / "audit.jsonl"),
            config=BrokerConfig(host=HOST),
        )

    return make, tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rescan", action="store_true", help="rescan the tools per request")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="ollie-bench-broker-"))
    thread = LoopThread()
    try:
        make, tools = build_broker(base, args.rescan)
        time.sleep(SHA256.racy_ns / 1e9 + 0.1)  # let the new executables settle (see above)
        broker_path = base / "run" / "ollie" / "elevate.sock"
        echo_path = base / "echo.sock"

        async def start() -> tuple[BrokerServer, asyncio.Server]:
            server = BrokerServer(make(), broker_path)
            await server.start()
            echo = await asyncio.start_unix_server(_echo, path=str(echo_path))
            return server, echo

        server, echo = thread.run(start())
        latency = measure_latency(
            broker_path, echo_path, tools / "allowed", args.requests, args.warmup
        )
        concurrency = measure_concurrency(broker_path, tools, args.clients)

        async def stop() -> None:
            echo.close()
            await server.close()

        thread.run(stop())
    finally:
        thread.stop()
        shutil.rmtree(base, ignore_errors=True)

    report = {"latency": latency, "concurrency": concurrency, "rescan": args.rescan}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    b, e = latency["broker"], latency["echo"]
    registry = "rescanned per request" if args.rescan else "snapshot"
    print(f"broker round trip, policy-decided elevate, {args.requests} requests")
    print(f"  (registry {registry}; client and servers in one process, one request in flight)")
    print(f"  echo    p50 {e['p50_us']:8.1f} us   p99 {e['p99_us']:8.1f} us")
    print(f"  broker  p50 {b['p50_us']:8.1f} us   p99 {b['p99_us']:8.1f} us")
    print(
        f"  ratio   p50 {latency['p50_ratio']:.2f}x (target <= {TARGET:g}x), "
        f"p99 {latency['p99_ratio']:.2f}x, wrong replies {latency['wrong_replies']}"
        f"  {'PASS' if latency['pass'] else 'MISS'}"
    )
    c = concurrency
    print(
        f"{c['clients']} concurrent clients: {c['correct']}/{c['clients']} correct "
        f"in {c['wall_ms']:.0f} ms  {'PASS' if c['pass'] else 'MISS'}"
    )
    for error in c["errors"]:
        print(f"  error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
