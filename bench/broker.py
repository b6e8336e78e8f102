"""Benchmark: the headless broker's remembered-allow round trip against a bare spawn.

In one run, the real :class:`BrokerServer` + :class:`Broker` in an event loop
of its own thread, on a Unix socket in a fresh temporary directory, with the
registry the headless ``ollie-broker`` holds: loaded once and kept live from
inotify events (``LiveRegistry``), over ``--tools`` (10,000) generated tools
besides the three it is asked about (``--rescan``: a full load per request,
informational).  Three measurements:

1. **Round trip.** An ``elevate`` frame decided by a remembered ``always``
   policy (codec, SO_PEERCRED at connect, registry facts incl. the
   executable's sha256, policy lookup, one audit line, the reply), on one
   connection, one request in flight, ``--requests`` (2,000) of them; and,
   interleaved with them in the same run, a bare spawn of ``/bin/true``
   (``subprocess.run``), one every four round trips.  Target: decision p50 /
   spawn p50 <= 0.25x: asking the broker costs a small part of starting the
   process it allows.
2. **Concurrent clients.** ``--clients`` (5,000) concurrent connections each
   send one ``elevate`` (half for a policy-allowed tool, half for a
   policy-denied one) and check that the reply carries their own id and the
   right decision.  Target: all answered correctly (no latency bound; wall
   time informational).  The clients run in a forked child process, so they
   do not share the interpreter lock with the server; they connect as a
   blocking client does, waiting while the listen backlog is full.
3. **Flood.** A legitimate client's p50 (the same round trip) while another
   process holds ``--idle`` (3,000) idle connections and a third has sent a
   ``--flood`` (1,000) request flood on one connection, against the quiet p50
   measured just before in the same run.  Target: flooded p50 <= 2x quiet p50
   (the broker's caps refuse what is beyond them with a typed ``error``,
   docs/protocol.md §8).

The tools are written just before the run, and the broker hashes an
executable changed in the last two seconds on every request
(:class:`~registry_core.broker.decide.facts.Sha256Cache`); installed tools are
older, so the run waits that long first.

Usage::

    .venv/bin/python bench/broker.py [--requests 2000] [--clients 5000] [--tools 10000]
        [--rescan] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
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

from registry_core.broker.ask.none import NonePrompter  # noqa: E402
from registry_core.broker.decide.core import Broker, BrokerConfig  # noqa: E402
from registry_core.broker.decide.facts import SHA256  # noqa: E402
from registry_core.broker.question import Remember  # noqa: E402
from registry_core.broker.record.audit import AuditLog  # noqa: E402
from registry_core.broker.remember.policies import PolicyStore, file_sha256  # noqa: E402
from registry_core.broker.serve.flood import FloodLimits  # noqa: E402
from registry_core.broker.serve.server import BrokerServer  # noqa: E402
from registry_core.broker.wire.messages import Kind  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402
from registry_core.registry.live import LiveRegistry  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from _broker_flood import FLOOD_TARGET, HeldPrompter, measure_flood  # noqa: E402
from _broker_wire import LineClient, elevate_frame, one_request  # noqa: E402
from registry_load import generate  # noqa: E402

T = TypeVar("T")
TARGET = 0.25  # decision round trip p50 / bare spawn of /bin/true p50
SPAWN_EVERY = 4  # one spawn per this many round trips

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


def in_child(work: Callable[[], T]) -> T:
    """``work()`` run in a forked child process; its JSON-able result comes back by pipe.

    The concurrent clients live there: in this process they would share the
    interpreter lock with the server's loop thread and be measured with it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, leave without running the parent's cleanup
        code = 0
        try:
            os.close(read_end)
            payload = json.dumps({"result": work()}).encode()
        except BaseException as exc:  # reported to the parent, which raises it
            payload = json.dumps({"error": repr(exc)}).encode()
            code = 1
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        report = json.loads(answer.read() or b'{"error": "the child died"}')
    os.waitpid(pid, 0)
    if "error" in report:
        raise RuntimeError(f"bench child failed: {report['error']}")
    result: T = report["result"]
    return result


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spawn_true() -> float:
    """Seconds a bare ``subprocess.run(["/bin/true"])`` takes."""
    start = time.perf_counter()
    subprocess.run(["/bin/true"], check=True)
    return time.perf_counter() - start


def measure_latency(broker_path: Path, exe: Path, requests: int, warmup: int) -> dict[str, Any]:
    broker = LineClient(broker_path)
    decisions: list[float] = []
    spawns: list[float] = []
    wrong = 0
    try:
        for index in range(warmup + requests):
            measured = index >= warmup
            if index % SPAWN_EVERY == 0:
                took = spawn_true()
                if measured:
                    spawns.append(took)
            frame = elevate_frame(index, "allowed", exe)
            start = time.perf_counter()
            reply = broker.round_trip(frame)
            elapsed = time.perf_counter() - start
            if measured:
                decisions.append(elapsed)
            decoded = json.loads(reply)
            ok = decoded.get("decision") == "allow" and decoded.get("by") == "policy"
            wrong += not ok or decoded.get("id") != index
    finally:
        broker.close()
    decision_p50 = statistics.median(decisions)
    spawn_p50 = statistics.median(spawns)
    ratio = decision_p50 / spawn_p50
    return {
        "requests": requests,
        "spawns": len(spawns),
        "wrong_replies": wrong,
        "decision_p50_us": decision_p50 * 1e6,
        "decision_p99_us": percentile(decisions, 0.99) * 1e6,
        "spawn_p50_us": spawn_p50 * 1e6,
        "ratio": ratio,
        "pass": ratio <= TARGET and wrong == 0,
    }


async def _one_client(path: Path, index: int, tools: Path) -> bool:
    tool = "allowed" if index % 2 == 0 else "denied"
    line = await one_request(path, elevate_frame(f"c{index}", tool, tools / tool))
    if not line:
        return False
    reply = json.loads(line)
    expected = "allow" if tool == "allowed" else "deny"
    return bool(
        reply.get("id") == f"c{index}"
        and reply.get("decision") == expected
        and reply.get("by") == "policy"
    )


def measure_concurrency(path: Path, tools: Path, clients: int) -> dict[str, Any]:
    async def everyone() -> list[bool | BaseException]:
        return await asyncio.gather(
            *(_one_client(path, i, tools) for i in range(clients)), return_exceptions=True
        )

    def run() -> tuple[list[bool | str], float]:
        start = time.perf_counter()
        outcomes = asyncio.run(everyone())
        wall = time.perf_counter() - start
        return [r if r is True or r is False else repr(r) for r in outcomes], wall

    results, wall = in_child(run)
    correct = sum(r is True for r in results)
    errors = sorted({r for r in results if isinstance(r, str)})
    return {
        "clients": clients,
        "correct": correct,
        "wall_ms": wall * 1e3,
        "errors": errors[:3],
        "pass": correct == clients,
    }


def build_broker(
    base: Path,
    rescan: bool,
    prompter: Callable[[], NonePrompter] = NonePrompter,
    extra_tools: int = 0,
) -> tuple[Callable[[], Broker], Path]:
    tools = base / "tools"
    tools.mkdir(parents=True)
    if extra_tools:
        generate(tools, extra_tools)
    for name in ("allowed", "denied", "flooded"):
        exe = tools / name
        exe.write_text(TOOL)
        exe.chmod(0o755)
        (tools / f"{name}.meta").write_text(json.dumps({"description": f"The {name} tool."}))
    policies = PolicyStore(base / "config" / "ollie" / "policies.yaml")
    for name, choice in (("allowed", Remember.ALWAYS), ("denied", Remember.DENY_ALWAYS)):
        exe = tools / name
        policies.remember(name, Kind.SANDBOX, HOST, choice, exe, file_sha256(exe))
    loader = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"})
    # What the headless ollie-broker holds (elevation/assembly.py): the registry in
    # memory, refreshed from inotify events; --rescan: a full load per request.
    live = None if rescan else LiveRegistry(loader)

    def make() -> Broker:
        return Broker(
            registry=loader.load if live is None else live.current,
            prompter=prompter(),
            policies=policies,
            audit=AuditLog(base / "state" / "ollie" / "audit.jsonl"),
            config=BrokerConfig(host=HOST),
        )

    return make, tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--clients", type=int, default=5000)
    parser.add_argument("--tools", type=int, default=10000, help="tools installed besides")
    parser.add_argument("--idle", type=int, default=3000, help="idle connections in the flood")
    parser.add_argument("--flood", type=int, default=1000, help="requests per flood round")
    parser.add_argument("--rescan", action="store_true", help="rescan the tools per request")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="ollie-bench-broker-"))
    thread = LoopThread()
    try:
        make, tools = build_broker(base, args.rescan, extra_tools=args.tools)
        make_held, _ = build_broker(base / "held", args.rescan, HeldPrompter)
        time.sleep(SHA256.racy_ns / 1e9 + 0.1)  # let the new executables settle (see above)
        broker_path = base / "run" / "ollie" / "elevate.sock"

        # The concurrent clients of one (child) process stand for many agents' processes:
        # the per-process caps are lifted for them (the per-uid ones stay the defaults:
        # 5,000 agents of one user must be served, docs/decisions.md); the flood runs
        # on default caps.
        many = FloodLimits(
            connections_per_process=args.clients,
            requests_per_process=args.clients,
        )

        async def start() -> BrokerServer:
            server = BrokerServer(make(), broker_path, limits=many)
            await server.start()
            return server

        server = thread.run(start())
        latency = measure_latency(broker_path, tools / "allowed", args.requests, args.warmup)
        concurrency = measure_concurrency(broker_path, tools, args.clients)
        thread.run(server.close())
        flood_path = base / "run" / "ollie" / "flood.sock"

        async def start_default() -> BrokerServer:
            server = BrokerServer(make_held(), flood_path)
            await server.start()
            return server

        flood_server = thread.run(start_default())
        held_tools = base / "held" / "tools"
        flood = measure_flood(flood_path, held_tools, args.requests // 4, args.idle, args.flood)
        thread.run(flood_server.close())
    finally:
        thread.stop()
        shutil.rmtree(base, ignore_errors=True)

    report = {
        "latency": latency,
        "concurrency": concurrency,
        "flood": flood,
        "tools": args.tools,
        "rescan": args.rescan,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    registry = "rescanned per request" if args.rescan else "live (inotify), as ollie-broker"
    registry += f", {args.tools + 3} tools"
    lat = latency
    print(f"remembered-allow round trip, {lat['requests']} requests, one in flight")
    print(f"  (registry {registry}; client and server in one process)")
    print(f"  bare spawn of /bin/true  p50 {lat['spawn_p50_us']:8.1f} us  ({lat['spawns']} spawns)")
    print(
        f"  decision round trip      p50 {lat['decision_p50_us']:8.1f} us"
        f"  p99 {lat['decision_p99_us']:8.1f} us"
    )
    print(
        f"  ratio p50 {lat['ratio']:.3f}x (target <= {TARGET:g}x), "
        f"wrong replies {lat['wrong_replies']}  {'PASS' if lat['pass'] else 'MISS'}"
    )
    c = concurrency
    print(
        f"{c['clients']} concurrent clients (in a child process): "
        f"{c['correct']}/{c['clients']} answered correctly in {c['wall_ms']:.0f} ms "
        f"(target all correct)  {'PASS' if c['pass'] else 'MISS'}"
    )
    for error in c["errors"]:
        print(f"  error: {error}")
    f = flood
    print(
        f"legitimate client under flood ({f['idle']} idle connections and a "
        f"{f['flood']}-request flood open in other processes, {f['refused']} refused):"
    )
    print(
        f"  quiet p50 {f['quiet_p50_us']:8.1f} us   flooded p50 {f['flooded_p50_us']:8.1f} us"
        f"   ratio {f['ratio']:.2f}x (target <= {FLOOD_TARGET:g}x)"
        f"  {'PASS' if f['pass'] else 'MISS'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
