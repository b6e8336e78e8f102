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

Then ``--clients`` (5,000) concurrent asyncio connections each send one ``elevate``
(half for a policy-allowed tool, half for a policy-denied one) and check that
the reply carries their own id and the right decision: wall time and
correctness (target: all correct).  Each is a lean protocol client (one process
stands for 5,000 agents' processes, and stream objects made it measure itself);
the same clients against a bare server that answers each frame at once (no
identity, registry, policy or audit) show the bench's own floor in the same
run (informative).  These clients, and those of the
throughput rounds (broker and echo alike), run in a forked child process, so
they do not share the interpreter lock with the servers they measure; they
connect as a blocking client does, waiting while the listen backlog is full.

Last, floods: a legitimate client's p50 (the same ``elevate`` round trip) while
another process holds ``--idle`` (3,000) idle connections and a third keeps a
``--flood`` (1,000) request flood going on one connection (sent, replies read,
sent again), against the quiet p50 measured just before in the same run.
Target: flooded p50 <= 2x quiet p50 (the broker's caps refuse what is beyond
them with a typed ``error``, docs/protocol.md §8).

The broker's registry is what the headless ``ollie-broker`` holds: loaded
once and kept live from inotify events (``LiveRegistry``), over ``--tools``
(10,000) generated tools besides the three it is asked about; ``--rescan``
makes it rescan the tools directory per request (the old headless behaviour;
informational).  Throughput:
``--streams`` (20) connections each keeping one request in flight, broker vs
echo in alternated rounds (target >= 0.5x).  The concurrent clients' target:
all correct, each answered within 1 s (p99).  The tools are written just
before the run, and the broker hashes an executable changed in the last two
seconds on every request (:class:`~registry_core.elevation.facts.Sha256Cache`);
installed tools are older, so the run waits that long first.

Usage::

    .venv/bin/python bench/broker.py [--requests 2000] [--clients 5000] [--tools 10000]
        [--streams 20] [--rescan] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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
from registry_core.elevation.limits import FloodLimits  # noqa: E402
from registry_core.elevation.messages import Kind  # noqa: E402
from registry_core.elevation.policies import PolicyStore, file_sha256  # noqa: E402
from registry_core.elevation.prompter import Remember  # noqa: E402
from registry_core.elevation.prompters.none import NonePrompter  # noqa: E402
from registry_core.elevation.server import BrokerServer  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402
from registry_core.registry.live import LiveRegistry  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from _broker_flood import FLOOD_TARGET, HeldPrompter, measure_flood  # noqa: E402
from _broker_wire import BareDecider, LineClient, elevate_frame, one_request  # noqa: E402
from registry_load import generate  # noqa: E402

T = TypeVar("T")
TARGET = 3.0  # broker p50 / echo p50
THROUGHPUT_TARGET = 0.5  # broker requests/s / echo requests/s
THROUGHPUT_ROUNDS = 5  # alternated broker/echo rounds; the median of each is compared
CONCURRENT_P99 = 1.0  # seconds, each of --clients concurrent clients

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


def in_child(work: Callable[[], T]) -> T:
    """``work()`` run in a forked child process; its JSON-able result comes back by pipe.

    The asyncio clients of the throughput and concurrency runs live there, for
    the broker and the echo server alike: in this process they would share the
    interpreter lock with the servers' loop thread and be measured with them."""
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


async def _one_client(path: Path, index: int, tools: Path, took: list[float]) -> bool:
    tool = "allowed" if index % 2 == 0 else "denied"
    started = time.perf_counter()
    line = await one_request(path, elevate_frame(f"c{index}", tool, tools / tool))
    if not line:
        return False
    reply = json.loads(line)
    took.append(time.perf_counter() - started)
    expected = "allow" if tool == "allowed" else "deny"
    return bool(
        reply.get("id") == f"c{index}"
        and reply.get("decision") == expected
        and reply.get("by") == "policy"
    )


def measure_concurrency(path: Path, tools: Path, clients: int) -> dict[str, Any]:
    took: list[float] = []

    async def everyone() -> list[bool | BaseException]:
        return await asyncio.gather(
            *(_one_client(path, i, tools, took) for i in range(clients)), return_exceptions=True
        )

    def run() -> tuple[list[bool | str], float, list[float]]:
        start = time.perf_counter()
        outcomes = asyncio.run(everyone())
        wall = time.perf_counter() - start
        return [r if r is True or r is False else repr(r) for r in outcomes], wall, took

    results, wall, took = in_child(run)
    correct = sum(r is True for r in results)
    errors = sorted({r for r in results if isinstance(r, str)})
    p99 = percentile(took, 0.99) if took else float("inf")
    return {
        "clients": clients,
        "correct": correct,
        "wall_ms": wall * 1e3,
        "p50_ms": (statistics.median(took) if took else float("inf")) * 1e3,
        "p99_ms": p99 * 1e3,
        "errors": errors[:3],
        "pass": correct == clients and p99 <= CONCURRENT_P99,
    }


async def _stream(path: Path, frames: list[bytes]) -> int:
    """Send ``frames`` one at a time on one connection, each after the last reply."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    answered = 0
    try:
        for frame in frames:
            writer.write(frame)
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    return answered
                if b'"progress"' not in line:
                    break
            answered += 1
    finally:
        writer.close()
        await writer.wait_closed()
    return answered


def measure_throughput(
    broker_path: Path, echo_path: Path, exe: Path, connections: int, per_connection: int
) -> dict[str, Any]:
    """Requests per second with ``connections`` clients each keeping one request in
    flight, for the broker (policy-decided elevates) and the echo server, alternated."""

    def rate(path: Path) -> float:
        async def everyone() -> list[int]:
            return await asyncio.gather(
                *(
                    _stream(
                        path,
                        [elevate_frame(f"t{c}.{i}", "allowed", exe) for i in range(per_connection)],
                    )
                    for c in range(connections)
                )
            )

        def run() -> float:
            start = time.perf_counter()
            answered = sum(asyncio.run(everyone()))
            return answered / (time.perf_counter() - start)

        return in_child(run)

    rates: dict[str, list[float]] = {"broker": [], "echo": []}
    for round_ in range(THROUGHPUT_ROUNDS):
        order = ("broker", "echo") if round_ % 2 == 0 else ("echo", "broker")
        for name in order:
            rates[name].append(rate(broker_path if name == "broker" else echo_path))
    broker, echo = statistics.median(rates["broker"]), statistics.median(rates["echo"])
    return {
        "connections": connections,
        "broker_per_s": broker,
        "echo_per_s": echo,
        "ratio": broker / echo,
        "pass": broker / echo >= THROUGHPUT_TARGET,
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
    parser.add_argument("--streams", type=int, default=20, help="connections for throughput")
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
        echo_path = base / "echo.sock"

        # The concurrent clients of one (child) process stand for many agents' processes:
        # the per-process caps are lifted for them (the per-uid ones stay the defaults:
        # 5,000 agents of one user must be served, docs/decisions.md); the flood runs
        # on default caps.
        many = FloodLimits(
            connections_per_process=args.clients,
            requests_per_process=args.clients,
        )

        async def start() -> tuple[BrokerServer, asyncio.Server]:
            server = BrokerServer(make(), broker_path, limits=many)
            await server.start()
            echo = await asyncio.start_unix_server(_echo, path=str(echo_path))
            return server, echo

        server, echo = thread.run(start())
        latency = measure_latency(
            broker_path, echo_path, tools / "allowed", args.requests, args.warmup
        )
        concurrency = measure_concurrency(broker_path, tools, args.clients)
        floor_path = base / "floor.sock"

        async def start_floor() -> asyncio.AbstractServer:
            loop = asyncio.get_running_loop()
            return await loop.create_unix_server(BareDecider, str(floor_path), backlog=100)

        floor_server = thread.run(start_floor())
        concurrency["floor"] = measure_concurrency(floor_path, tools, args.clients)
        floor_server.close()
        throughput = measure_throughput(
            broker_path, echo_path, tools / "allowed", args.streams, max(1, args.requests // 4)
        )

        async def stop() -> None:
            echo.close()
            await server.close()

        thread.run(stop())
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
        "throughput": throughput,
        "flood": flood,
        "tools": args.tools,
        "rescan": args.rescan,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    b, e = latency["broker"], latency["echo"]
    registry = "rescanned per request" if args.rescan else "live (inotify), as ollie-broker"
    registry += f", {args.tools + 3} tools"
    print(f"broker round trip, policy-decided elevate, {args.requests} requests")
    print(f"  (registry {registry}; client and servers in one process, one request in flight)")
    print("  (throughput and concurrent clients: the clients run in a child process)")
    print(f"  echo    p50 {e['p50_us']:8.1f} us   p99 {e['p99_us']:8.1f} us")
    print(f"  broker  p50 {b['p50_us']:8.1f} us   p99 {b['p99_us']:8.1f} us")
    print(
        f"  ratio   p50 {latency['p50_ratio']:.2f}x (target <= {TARGET:g}x), "
        f"p99 {latency['p99_ratio']:.2f}x, wrong replies {latency['wrong_replies']}"
        f"  {'PASS' if latency['pass'] else 'MISS'}"
    )
    t = throughput
    print(
        f"throughput, {t['connections']} connections one request in flight each: broker "
        f"{t['broker_per_s']:.0f}/s, echo {t['echo_per_s']:.0f}/s, ratio {t['ratio']:.2f}x "
        f"(target >= {THROUGHPUT_TARGET:g}x)  {'PASS' if t['pass'] else 'MISS'}"
    )
    c = concurrency
    print(
        f"{c['clients']} concurrent clients: {c['correct']}/{c['clients']} correct "
        f"in {c['wall_ms']:.0f} ms, per client p50 {c['p50_ms']:.0f} ms "
        f"p99 {c['p99_ms']:.0f} ms (target all correct, p99 <= {CONCURRENT_P99:g} s)"
        f"  {'PASS' if c['pass'] else 'MISS'}"
    )
    for error in c["errors"]:
        print(f"  error: {error}")
    bare = c["floor"]
    print(
        f"  the same clients against a bare server answering each frame at once (no identity, "
        f"registry, policy or audit): {bare['correct']}/{bare['clients']} correct, "
        f"p50 {bare['p50_ms']:.0f} ms p99 {bare['p99_ms']:.0f} ms (informative: the floor)"
    )
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
