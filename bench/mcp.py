"""Benchmark: ``ollie-tools mcp`` seen from the official MCP SDK client over stdio.

Measures in one run, each against a baseline taken in the same run:

1. call        a ``tools/call`` round trip of a trivial sandboxed tool
               (``cat >/dev/null; echo ok``) from a connected ``ClientSession``
               (server resident: no interpreter start per call) vs. a bare
               ``subprocess.run`` of the same executable with the same stdin;
               interleaved, median after warm-up (target ≤ 10x);
2. list        a ``tools/list`` round trip over 10,000 generated tools (the
               generator of ``bench/registry_load.py``): the first one after the
               server started (it builds the listing, reading every schema) and a
               repeated one (cached), vs. a cold registry load in this process,
               ``RegistryLoader(..., cache_dir=...).load()`` (target: first ≤ 1.5x).

Usage::

    .venv/bin/python bench/mcp.py [--calls 200] [--tools 10000] [--json]

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
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from bench.registry_load import generate  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402
from registry_core.registry.scan_cache import SETTLE_NS  # noqa: E402

CALL_TARGET = 10.0
LIST_TARGET = 1.5
TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"


def _environ(root: Path, tools: Path) -> dict[str, str]:
    for name in ("home", "tmp", "run", "config", "state", "cache", "cwd"):
        (root / name).mkdir(exist_ok=True)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "XDG_RUNTIME_DIR": str(root / "run"),
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

    loader = RegistryLoader([tools], env=env)
    dispatcher = Dispatcher(registry=loader.load, env=env)
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


def bench_list(root: Path, count: int) -> dict[str, Any]:
    tools = root / "many"
    tools.mkdir()
    generate(tools, count)
    time.sleep(SETTLE_NS / 1e9 + 0.1)  # the scan cache keeps settled files only
    env = _environ(root, tools)
    cwd = root / "cwd"
    cache = Path(env["XDG_CACHE_HOME"]) / "ollie"
    loads: list[float] = []
    RegistryLoader([tools], env=env, cache_dir=cache).load()  # writes the scan cache
    for _ in range(3):
        t0 = time.perf_counter()
        RegistryLoader([tools], env=env, cache_dir=cache).load()
        loads.append(time.perf_counter() - t0)
    firsts: list[float] = []
    repeats: list[float] = []
    listed: list[int] = []

    async def body(session: ClientSession) -> None:
        t0 = time.perf_counter()
        result = await session.list_tools()
        firsts.append(time.perf_counter() - t0)
        listed.append(len(result.tools))
        for _ in range(3):
            t0 = time.perf_counter()
            await session.list_tools()
            repeats.append(time.perf_counter() - t0)

    for _ in range(3):  # a new server each time: the first listing is built afresh
        anyio.run(_with_session, env, cwd, body)
    load = statistics.median(loads)
    first = statistics.median(firsts)
    return {
        "tools": count,
        "listed": listed[0],
        "load": load,
        "first_list": first,
        "repeat_list": statistics.median(repeats),
        "ratio": first / load,
    }


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
        (f"registry load ({listing['tools']} tools)", ms(listing["load"]), "", "", ""),
        (
            f"tools/list, first ({listing['listed']} listed)",
            ms(listing["first_list"]),
            f"{listing['ratio']:.2f}x load",
            f"<= {LIST_TARGET:g}x",
            verdict(listing["ratio"] <= LIST_TARGET),
        ),
        ("tools/list, repeated", ms(listing["repeat_list"]), "", "(info)", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ollie-bench-mcp-"))
    try:
        call = bench_call(root / "call", args.calls) if (root / "call").mkdir() is None else {}
        listing = bench_list(root / "list", args.tools) if (root / "list").mkdir() is None else {}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"call": call, "list": listing}, indent=2))
    else:
        print(report(call, listing))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
