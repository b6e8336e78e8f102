"""Benchmark: ``ollie-tools mcp`` seen from the official MCP SDK client over stdio.

Measures in one run, each against a baseline taken in the same run:

1. call        a ``tools/call`` round trip of a trivial sandboxed tool
               (``cat >/dev/null; echo ok``) from a connected ``ClientSession``
               (server resident: no interpreter start per call) vs. a bare
               ``subprocess.run`` of the same executable with the same stdin;
               interleaved, median after warm-up (target ≤ 10x);
2. list        the first ``tools/list`` of a new server over 10,000 generated
               tools (the generator of ``bench/registry_load.py``), as a client
               sees it that writes the JSON-RPC request and reads the response
               line off the pipe (the server builds the listing, reading every
               schema the cold load left unread, serializes it, writes 4 MB),
               vs. the cold registry load of ``bench/registry_load.py`` -- a new
               ``RegistryLoader(..., cache_dir=...).load()`` with the scan cache
               on disk, what every new process pays -- interleaved round by
               round in the same run (target: first ≤ 1.5x).

Informational rows: ``Dispatcher.call`` in this process on a registry
snapshot loaded once (what the server runs per call); a repeated listing on
the same server; CPU time (user + system) of the cold load and of the
server process for its first listing (``/proc/PID/stat``, every thread), the
same comparison unaffected by other work on a busy machine; and the official
Python SDK's ``ClientSession.list_tools()`` round trip (first and repeated),
with its own decoding of the same response line
(``JSONRPCMessage.model_validate_json`` then ``ListToolsResult``) timed
apart: that is the client's cost, paid in the agent's process, and clients
in other languages pay their own (docs/decisions.md).
``$XDG_RUNTIME_DIR`` (each call's private ``/tmp``) is on a tmpfs when
``/dev/shm`` is one, as in a desktop session and as in ``bench/dispatch.py``.

Usage::

    .venv/bin/python bench/mcp.py [--calls 200] [--tools 10000] [--rounds 5] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# This file is named like the SDK's package: keep its directory off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402
from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from bench.registry_load import baseline, generate  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402
from registry_core.registry.scan_cache import SETTLE_NS  # noqa: E402

CALL_TARGET = 10.0
LIST_TARGET = 1.5
TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"


def _runtime_dir(root: Path) -> Path:
    """On a tmpfs when there is one (each sandboxed call makes its ``/tmp`` there)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        made = Path(tempfile.mkdtemp(prefix="ollie-bench-mcp-run-", dir=shm))
        (root / "run").symlink_to(made)  # removed with the bench's own directory
        return made
    (root / "run").mkdir(mode=0o700)
    return root / "run"


def _environ(root: Path, tools: Path) -> dict[str, str]:
    for name in ("home", "tmp", "config", "state", "cache", "cwd"):
        (root / name).mkdir(exist_ok=True)
    run = (root / "run").resolve() if (root / "run").exists() else _runtime_dir(root)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "XDG_RUNTIME_DIR": str(run),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "OLLIE_TOOLS_PATH": str(tools),
        "LANG": "C.UTF-8",
    }


async def _with_session(
    env: dict[str, str], cwd: Path, body: Callable[[ClientSession], Awaitable[None]]
) -> None:
    params = StdioServerParameters(
        command=str(TOOLS_CLI), args=["mcp", "--cwd", str(cwd)], env=env, cwd=str(cwd)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await body(session)


def bench_call(root: Path, calls: int) -> dict[str, Any]:
    tools = root / "tools"
    tools.mkdir()
    exe = tools / "trivial"
    exe.write_text("#!/bin/sh\ncat >/dev/null\necho ok\n")
    exe.chmod(0o755)
    (tools / "trivial.meta").write_text(json.dumps({"description": "Says ok.", "readOnly": True}))
    env = _environ(root, tools)
    cwd = root / "cwd"
    stdin = b"{}"
    mcp_times: list[float] = []
    bare_times: list[float] = []

    def bare() -> None:
        t0 = time.perf_counter()
        done = subprocess.run(
            [str(exe)], input=stdin, capture_output=True, env=env, cwd=cwd, check=True
        )
        bare_times.append(time.perf_counter() - t0)
        assert done.stdout == b"ok\n"

    async def body(session: ClientSession) -> None:
        for _ in range(10):  # warm-up: sandbox ruleset cache, page cache
            await session.call_tool("trivial", {})
            bare()
        bare_times.clear()
        for _ in range(calls):
            t0 = time.perf_counter()
            result = await session.call_tool("trivial", {})
            mcp_times.append(time.perf_counter() - t0)
            assert not result.isError, result
            await anyio.to_thread.run_sync(bare)

    anyio.run(_with_session, env, cwd, body)
    mcp = statistics.median(mcp_times)
    base = statistics.median(bare_times)
    # Informational: the dispatcher alone in this process (sandbox set-up + the run),
    # so the MCP layer's own share is visible.
    from registry_core.dispatch import CallOptions, Dispatcher

    snapshot = RegistryLoader([tools], env=env).load()  # loaded once, as the server holds one
    dispatcher = Dispatcher(registry=lambda: snapshot, env=env)
    options = CallOptions(cwd=str(cwd))
    direct: list[float] = []
    for _ in range(min(calls, 50)):
        t0 = time.perf_counter()
        dispatcher.call("trivial", {}, options)
        direct.append(time.perf_counter() - t0)
    return {
        "calls": calls,
        "mcp": mcp,
        "bare": base,
        "ratio": mcp / base,
        "dispatcher": statistics.median(direct),
    }


def bench_list(root: Path, count: int, rounds: int) -> dict[str, Any]:
    tools = root / "many"
    tools.mkdir()
    generate(tools, count)
    time.sleep(SETTLE_NS / 1e9 + 0.1)  # the scan cache keeps settled files only
    env = _environ(root, tools)
    cwd = root / "cwd"
    cache = Path(env["XDG_CACHE_HOME"]) / "ollie"  # the server's own scan cache directory

    def cold_load() -> object:
        # bench/registry_load.py's "cold load": a new loader, as a new process has,
        # the scan cache on disk.
        return RegistryLoader([tools], env=env, cache_dir=cache).load()

    baseline(tools)  # page cache warm for every contender
    cold_load()  # writes the scan cache
    loads: list[float] = []
    load_cpus: list[float] = []
    firsts: list[float] = []
    repeats: list[float] = []
    first_cpus: list[float] = []
    line = b""
    for _ in range(rounds):  # interleaved: a burst of load on the machine hits both alike
        wall, cpu = _timed(cold_load)
        loads.append(wall)
        load_cpus.append(cpu)
        first_raw, repeat_raw, first_cpu, line = _raw_list(env, cwd)
        firsts.append(first_raw)
        repeats.append(repeat_raw)
        first_cpus.append(first_cpu)
    sdk_firsts: list[float] = []
    sdk_repeats: list[float] = []
    listed: list[int] = []

    async def body(session: ClientSession) -> None:
        t0 = time.perf_counter()
        result = await session.list_tools()
        sdk_firsts.append(time.perf_counter() - t0)
        listed.append(len(result.tools))
        for _ in range(2):
            t0 = time.perf_counter()
            await session.list_tools()
            sdk_repeats.append(time.perf_counter() - t0)

    for _ in range(max(1, rounds // 2)):  # a new server each time: its first listing
        anyio.run(_with_session, env, cwd, body)
    decodes: list[float] = []
    for _ in range(3):
        t0 = time.perf_counter()
        message = types.JSONRPCMessage.model_validate_json(line)
        assert isinstance(message.root, types.JSONRPCResponse)
        types.ListToolsResult.model_validate(message.root.result)
        decodes.append(time.perf_counter() - t0)
    load = statistics.median(loads)
    first = statistics.median(firsts)
    return {
        "tools": count,
        "rounds": rounds,
        "listed": listed[0],
        "bytes": len(line),
        "load": load,
        "first_list": first,
        "repeat_list": statistics.median(repeats),
        "ratio": first / load,
        "load_cpu": statistics.median(load_cpus),
        "first_cpu": statistics.median(first_cpus),
        "sdk_first": statistics.median(sdk_firsts),
        "sdk_repeat": statistics.median(sdk_repeats),
        "sdk_decode": statistics.median(decodes),
    }


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) time of ``fn``, stopped before what it returns is freed: as
    ``_timed()`` of bench/registry_load.py (tearing a registry down is not loading it)."""
    c0, t0 = time.process_time(), time.perf_counter()
    result = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    del result
    return wall, cpu


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _raw_list(env: dict[str, str], cwd: Path) -> tuple[float, float, float, bytes]:
    """``tools/list`` as a client sees it that writes the JSON-RPC lines and reads the
    response line's bytes, decoding nothing: (first, repeated, the server's CPU time
    for the first, the response line)."""
    proc = subprocess.Popen(
        [str(TOOLS_CLI), "mcp", "--cwd", str(cwd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        proc.stdin.flush()

    try:
        client = {"name": "bench", "version": "0"}
        init = {"protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {}}
        send({"id": 0, "method": "initialize", "params": {**init, "clientInfo": client}})
        proc.stdout.readline()
        send({"method": "notifications/initialized"})
        times: list[float] = []
        cpu: list[float] = []
        line = b""
        for request in (1, 2):
            c0 = _cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            send({"id": request, "method": "tools/list"})
            line = proc.stdout.readline()
            times.append(time.perf_counter() - t0)
            cpu.append(_cpu_seconds(proc.pid) - c0)
            assert b'"tools"' in line[:64], line[:200]
        return times[0], times[1], cpu[0], line
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def report(call: dict[str, Any], listing: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.2f} ms"

    rows = [
        ("measurement", "median", "ratio", "target", "result"),
        ("bare subprocess.run", ms(call["bare"]), "", "", ""),
        (
            "MCP tools/call round trip",
            ms(call["mcp"]),
            f"{call['ratio']:.2f}x bare",
            f"<= {CALL_TARGET:g}x",
            verdict(call["ratio"] <= CALL_TARGET),
        ),
        ("Dispatcher.call in-process", ms(call["dispatcher"]), "", "(info)", ""),
        (f"registry load ({listing['tools']} tools, cold)", ms(listing["load"]), "", "", ""),
        (
            f"tools/list, first ({listing['listed']} listed)",
            ms(listing["first_list"]),
            f"{listing['ratio']:.2f}x load",
            f"<= {LIST_TARGET:g}x",
            verdict(listing["ratio"] <= LIST_TARGET),
        ),
        ("tools/list, repeated", ms(listing["repeat_list"]), "", "(info)", ""),
        ("  CPU: registry load (this process)", ms(listing["load_cpu"]), "", "(info)", ""),
        (
            "  CPU: server, first tools/list",
            ms(listing["first_cpu"]),
            f"{listing['first_cpu'] / listing['load_cpu']:.2f}x load",
            "(info)",
            "",
        ),
        ("Python SDK client, first list", ms(listing["sdk_first"]), "", "(info)", ""),
        ("Python SDK client, repeated", ms(listing["sdk_repeat"]), "", "(info)", ""),
        (
            f"  of which its decoding ({listing['bytes'] / 1e6:.1f} MB)",
            ms(listing["sdk_decode"]),
            "",
            "(info)",
            "",
        ),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5, help="new servers listed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ollie-bench-mcp-"))
    try:
        call = bench_call(root / "call", args.calls) if (root / "call").mkdir() is None else {}
        listing = (
            bench_list(root / "list", args.tools, args.rounds)
            if (root / "list").mkdir() is None
            else {}
        )
    finally:
        for run in root.glob("*/run"):
            if run.is_symlink():
                shutil.rmtree(run.resolve(), ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"call": call, "list": listing}, indent=2))
    else:
        print(report(call, listing))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
