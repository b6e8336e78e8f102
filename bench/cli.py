"""Benchmark: the agent's whole-process path through ``ollie-tools``.

In one run, in interleaved rounds (drift hits every contender alike), each a
whole process started with ``subprocess.run``:

1. ``python -I -c pass``: the interpreter's own start-up;
2. ``bwrap`` alone with the namespaces and mount view a sandboxed call gets,
   running the trivial tool directly (``bench/dispatch.py``'s): the sandbox's
   own cost;
3. ``ollie-tools call trivial`` with 10 tools installed, and
4. the same with 10,010 tools installed (generator of ``bench/registry_load.py``):
   one name is looked up, so the number of tools must not matter;
5. ``ollie-tools list --json`` over 10,000 tools (into a pipe: compact JSON,
   the scan cache warm and settled), vs
6. a process that only lists the directory, reads and ``json.loads`` every
   file (the floor of any listing).

Targets: call (10 tools) <= 3x python + bwrap; call (10,010) within 10% of
call (10); list <= 2x the bare loop.  Medians of ``--runs`` rounds.

Usage::

    .venv/bin/python bench/cli.py [--runs 15] [--tools 10000] [--json]

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
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
if str(BENCH.parent) not in sys.path:
    sys.path.insert(0, str(BENCH.parent))

from dispatch import _bwrap_alone, _setup  # noqa: E402
from registry_load import generate  # noqa: E402

TARGET_CALL = 3.0  # call / (python + bwrap)
TARGET_SCALE = 1.10  # call with many tools / call with few
TARGET_LIST = 2.0  # list --json / bare loop

BARE_LOOP = """
import json, os, sys
n = 0
for e in os.scandir(sys.argv[1]):
    if e.name.endswith(".meta"):
        with open(e.path, "rb") as fh:
            data = fh.read()
        try:
            json.loads(data)
        except ValueError:
            continue
        n += 1
print(n)
"""


def _program(name: str) -> str:
    sibling = Path(sys.executable).parent / name
    found = str(sibling) if sibling.is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: run `make .venv/.installed-stamp` first")
    return found


def _timed(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"") -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {done.returncode}: {done.stderr[-500:]!r}")
    return elapsed


def run(runs: int, tools: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ollie-bench-cli-"))
    try:
        env, tool, cwd = _setup(root)
        env["XDG_CACHE_HOME"] = str(root / "cache")
        few, many = Path(env["OLLIE_TOOLS_PATH"]), root / "many"
        many.mkdir()
        generate(few, 9)
        generate(many, tools)
        shutil.copy(few / "trivial.meta", many / "trivial.meta")
        shutil.copy(tool, many / "trivial")
        listing = root / "listing"
        listing.mkdir()
        generate(listing, tools)
        (root / "bwrap-tmp").mkdir(mode=0o700)
        bwrap = _bwrap_alone(env, tool, cwd, root / "bwrap-tmp")
        ollie = _program("ollie-tools")
        env_many = {**env, "OLLIE_TOOLS_PATH": str(many)}
        env_list = {**env, "OLLIE_TOOLS_PATH": str(listing)}
        call = [ollie, "call", "trivial"]
        contenders: dict[str, tuple[list[str], dict[str, str]]] = {
            "python": ([sys.executable, "-I", "-c", "pass"], env),
            "call_few": (call, env),
            "call_many": (call, env_many),
            "list": ([ollie, "list", "--json"], env_list),
            "bare_loop": ([sys.executable, "-I", "-c", BARE_LOOP, str(listing)], env),
        }
        if bwrap is not None:
            contenders["bwrap"] = (bwrap, env)
        # Warm-up: the default profile installed and its parse remembered, the page
        # cache warm, the scan cache written and (after 2 s) settled, then rewritten.
        for argv, e in contenders.values():
            _timed(argv, e, cwd)
        time.sleep(2.1)
        for argv, e in contenders.values():
            _timed(argv, e, cwd)
        samples: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(runs):
            for key, (argv, e) in contenders.items():
                samples[key].append(_timed(argv, e, cwd))
        med = {k: statistics.median(v) for k, v in samples.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    floor = med["python"] + med.get("bwrap", 0.0)
    result: dict[str, Any] = {
        "runs": runs,
        "tools": tools,
        "load": os.getloadavg()[0],
        "medians_s": med,
        "call_over_floor": med["call_few"] / floor,
        "many_over_few": med["call_many"] / med["call_few"],
        "list_over_bare": med["list"] / med["bare_loop"],
        "bwrap_measured": "bwrap" in med,
    }
    result["pass_call"] = result["call_over_floor"] <= TARGET_CALL and "bwrap" in med
    result["pass_scale"] = result["many_over_few"] <= TARGET_SCALE
    result["pass_list"] = result["list_over_bare"] <= TARGET_LIST
    return result


def report(r: dict[str, Any]) -> str:
    m = r["medians_s"]

    def ms(key: str) -> str:
        return f"{m[key] * 1000:8.1f} ms" if key in m else "     n/a   "

    def mark(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    n = r["tools"]
    lines = [
        f"whole processes, median of {r['runs']} interleaved rounds (load {r['load']:.1f})",
        f"python -I -c pass                      {ms('python')}",
        f"bwrap alone, same namespaces + mounts  {ms('bwrap')}",
        f"ollie-tools call trivial (10 tools)    {ms('call_few')}   "
        f"{r['call_over_floor']:.2f}x (python + bwrap)   <= {TARGET_CALL:.1f}x   "
        f"{mark(r['pass_call'])}",
        f"ollie-tools call trivial ({n + 10} tools) {ms('call_many')}   "
        f"{r['many_over_few']:.3f}x the 10-tool call     <= {TARGET_SCALE:.2f}x  "
        f"{mark(r['pass_scale'])}",
        f"bare list + read + json.loads ({n})  {ms('bare_loop')}",
        f"ollie-tools list --json ({n})        {ms('list')}   "
        f"{r['list_over_bare']:.2f}x bare loop             <= {TARGET_LIST:.1f}x   "
        f"{mark(r['pass_list'])}",
    ]
    if not r["bwrap_measured"]:
        lines.append("bwrap is not installed: the call target cannot be judged (MISS)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.runs, args.tools)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
