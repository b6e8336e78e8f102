"""Benchmark: registry load time against a "read and json.loads every file" baseline.

Generates a synthetic tools directory (default 10,000 tools) in a temporary
directory, then measures in the same run, each as the median of several
repetitions after a warm-up (so the page cache is hot for every contender):

1. baseline     list the directory, read and ``json.loads`` every ``.meta``;
2. cold         ``RegistryLoader([dir], cache_dir=...).load()`` with a new loader
                each time, as every ``ollie-tools`` call, broker and tray start
                does: the files are unchanged since an earlier scan, whose scan
                cache is on disk (target: ≤ 1.5x the baseline);
3. first scan   the same without a scan cache: every file read, decoded and
                validated, as after the files change (informational);
4. refresh      touch one file, then ``loader.refresh([that_path])`` -- what the
                tray's file watcher does (target: ≤ 5% of a cold load);
5. rescan       a full ``loader.load()`` with the in-process parse cache warm
                (informational).

Usage::

    .venv/bin/python bench/registry_load.py [--tools 10000] [--repeat 7] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from registry_core.registry import RegistryLoader, Status  # noqa: E402
from registry_core.registry.scan_cache import SETTLE_NS  # noqa: E402

COLD_TARGET = 1.5  # cold load / baseline
REFRESH_TARGET = 0.05  # refresh one file / cold load

_WORDS = (
    "read", "write", "list", "search", "filter", "parse", "file", "log", "unit", "system",
    "network", "host", "user", "process", "memory", "disk", "service", "config", "path", "pattern",
    "line", "output", "result", "query", "index", "cache", "value", "record", "event", "time",
    "window", "session", "desktop",
)  # fmt: skip
_BINARIES = ("journalctl", "sh", "ls", "rg", "nvidia-smi", "kdialog", "zenity", "jq", "git")
_FILES = ("/var/log/syslog", "/etc/os-release", "/proc/cpuinfo", "/sys/class/drm", "/nonexistent")
_ENVS = ("DISPLAY", "WAYLAND_DISPLAY", "HOME", "SSH_CONNECTION", "OLLIE_BENCH_UNSET")
_OSES = ("linux", "darwin", "freebsd")


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _args_schema(rng: random.Random) -> dict[str, Any]:
    names = rng.sample(_WORDS, rng.randint(2, 5))
    props: dict[str, Any] = {}
    for name in names:
        kind = rng.choice(("string", "string", "integer", "boolean"))
        prop: dict[str, Any] = {"type": kind, "description": _sentence(rng, 5)}
        if kind == "integer" and rng.random() < 0.5:
            prop["minimum"] = 0
        props[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if rng.random() < 0.6:
        schema["required"] = names[:1]
    return schema


def _prompt(rng: random.Random, name: str, args: dict[str, Any]) -> str:
    """A Markdown prompt of a few hundred bytes, like the spec's examples."""
    lines = [f"## {name}", "", _sentence(rng, 14), _sentence(rng, 10), ""]
    lines.append("**Args**: " + ", ".join(f"`{a}`" for a in args["properties"]))
    lines += ["", "```", f'{name}({next(iter(args["properties"]))}="{rng.choice(_WORDS)}")', "```"]
    lines += ["", _sentence(rng, 12)]
    return "\n".join(lines)


def _condition(rng: random.Random) -> dict[str, str]:
    key = rng.choice(("binary", "binary", "file", "env", "nenv", "os", "arch"))
    if key == "binary":
        value = rng.choice(_BINARIES)
        if rng.random() < 0.2:
            value = "/usr/bin/" + value
    elif key == "file":
        value = rng.choice(_FILES)
    elif key in ("env", "nenv"):
        value = rng.choice(_ENVS)
    elif key == "os":
        value = rng.choice(_OSES)
    else:
        value = rng.choice(("amd64", "arm64"))
    return {key: value}


def _meta(rng: random.Random, name: str, kind: str) -> str:
    args = _args_schema(rng)
    doc: dict[str, Any] = {
        "description": _sentence(rng, 8),
        "prompt": _prompt(rng, name, args),
        "args": args,
    }
    if rng.random() < 0.5:
        doc["tier"] = rng.choice(("hot", "warm", "cold"))
    if rng.random() < 0.5:
        doc["readOnly"] = rng.random() < 0.7
    if kind == "variants":
        variants = []
        for i in range(rng.randint(2, 3)):
            vargs = _args_schema(rng)
            match: dict[str, str] = {}
            for _ in range(rng.randint(1, 2)):
                match.update(_condition(rng))
            variants.append(
                {
                    "match": match,
                    "description": _sentence(rng, 8),
                    "prompt": _prompt(rng, name, vargs),
                    "args": vargs,
                    "cmd": f"{name}_v{i}",
                }
            )
        doc["variants"] = variants
    elif kind == "system":
        doc["cmd"] = rng.choice(("/bin/sh", "/usr/bin/env", "ls", "sh"))
        if rng.random() < 0.3:
            doc["sudo"] = True
        elif rng.random() < 0.3:
            doc["elevated"] = True
    text = json.dumps(doc, indent=2)
    if kind == "bad_json":
        # Drop a comma somewhere in the middle: a realistic syntax error.
        cut = text.index(",", len(text) // 2)
        text = text[:cut] + text[cut + 1 :]
    elif kind == "bad_tier":
        doc["tier"] = "lukewarm"
        text = json.dumps(doc, indent=2)
    return text


def generate(directory: Path, count: int, seed: int = 1) -> dict[str, int]:
    """Write ``count`` tools into ``directory``; return how many of each kind."""
    rng = random.Random(seed)
    kinds = {"plain": 0, "variants": 0, "system": 0, "bad_json": 0, "bad_tier": 0, "colocated": 0}
    for i in range(count):
        roll = rng.random()
        if roll < 0.60:
            kind = "plain"
        elif roll < 0.90:
            kind = "variants"
        elif roll < 0.95:
            kind = "system"
        elif roll < 0.975:
            kind = "bad_json"
        else:
            kind = "bad_tier"
        kinds[kind] += 1
        name = f"tool_{i:05d}_{rng.choice(_WORDS)}"
        (directory / f"{name}.meta").write_text(_meta(rng, name, kind), encoding="utf-8")
        if kind == "plain" and rng.random() < 0.5:
            exe = directory / name
            exe.write_text('#!/bin/sh\ncat >/dev/null\necho "{}"\n', encoding="utf-8")
            exe.chmod(0o755)
            kinds["colocated"] += 1
    return kinds


def baseline(directory: Path) -> int:
    """The floor: list the directory, read and json.loads every .meta."""
    parsed = 0
    for entry in os.scandir(directory):
        if not entry.name.endswith(".meta"):
            continue
        with open(entry.path, "rb") as fh:
            data = fh.read()
        try:
            json.loads(data)
        except ValueError:
            continue
        parsed += 1
    return parsed


def _check_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The registry through the scan cache is the registry (docs included)."""
    if a.keys() != b.keys():
        raise SystemExit("registry_load: the scan cache changed the set of tools")
    for name, tool in a.items():
        other = b[name]
        if tool.status is Status.BROKEN:  # errors are exceptions: compare their text
            same = [str(e) for e in tool.errors] == [str(e) for e in other.errors]
        else:
            same = tool == other
        if not same:
            raise SystemExit(f"registry_load: the scan cache changed tool {name}")


def _timed(fn: Callable[[], object]) -> float:
    """Wall time of ``fn``; what it returns is freed after the clock stops (a loaded
    registry is kept by its owner: tearing it down is not part of loading it)."""
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def _median(
    fn: Callable[[], object], repeat: int, before: Callable[[], object] | None = None
) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs (``before`` runs untimed each time)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        times.append(_timed(fn))
    return statistics.median(times)


def run(count: int, repeat: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="ollie-bench-registry-"))
    try:
        directory = tmp / "tools"
        directory.mkdir()
        cache = tmp / "cache"
        t0 = time.perf_counter()
        kinds = generate(directory, count)
        generated = time.perf_counter() - t0
        env = dict(os.environ)
        # The scan cache remembers only files that have not changed for a while.
        time.sleep(SETTLE_NS / 1e9 + 0.1)

        # Warm-up: pull every file into the page cache, write the scan cache, and check
        # that a load through the cache agrees with one without it.
        baseline(directory)
        fresh = RegistryLoader([directory], env=env).load()
        RegistryLoader([directory], env=env, cache_dir=cache).load()
        registry = RegistryLoader([directory], env=env, cache_dir=cache).load()
        _check_same(fresh.tools, registry.tools)
        statuses = {s.value: 0 for s in Status}
        for tool in registry.tools.values():
            statuses[tool.status.value] += 1

        def cold_load() -> object:
            return RegistryLoader([directory], env=env, cache_dir=cache).load()

        def first_scan() -> object:
            return RegistryLoader([directory], env=env).load()

        # Interleaved, so a burst of load on the machine hits all alike.
        base_times: list[float] = []
        cold_times: list[float] = []
        first_times: list[float] = []
        for _ in range(repeat):
            base_times.append(_timed(lambda: baseline(directory)))
            cold_times.append(_timed(cold_load))
            first_times.append(_timed(first_scan))
        base = statistics.median(base_times)
        cold = statistics.median(cold_times)
        first = statistics.median(first_times)

        loader = RegistryLoader([directory], env=env, cache_dir=cache)
        loader.load()
        target = sorted(directory.glob("*.meta"))[count // 2]
        stamp = [int(target.stat().st_mtime_ns)]

        def touch() -> None:
            stamp[0] += 1_000_000_000
            os.utime(target, ns=(stamp[0], stamp[0]))

        refresh = _median(lambda: loader.refresh([target]), repeat, before=touch)
        rescan = _median(loader.load, repeat)
        size = sum(p.stat().st_size for p in directory.glob("*.meta"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    cold_ratio = cold / base
    refresh_ratio = refresh / cold
    return {
        "tools": count,
        "repeat": repeat,
        "generated_s": generated,
        "meta_bytes": size,
        "kinds": kinds,
        "statuses": statuses,
        "baseline_s": base,
        "cold_s": cold,
        "cold_ratio": cold_ratio,
        "cold_target": COLD_TARGET,
        "cold_pass": cold_ratio <= COLD_TARGET,
        "first_scan_s": first,
        "first_scan_ratio": first / base,
        "refresh_s": refresh,
        "refresh_ratio": refresh_ratio,
        "refresh_target": REFRESH_TARGET,
        "refresh_pass": refresh_ratio <= REFRESH_TARGET,
        "rescan_s": rescan,
        "rescan_ratio": rescan / cold,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def report(r: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    kinds = ", ".join(f"{k} {v}" for k, v in r["kinds"].items())
    statuses = ", ".join(f"{k} {v}" for k, v in r["statuses"].items())
    rows = [
        ("baseline (list + read + json.loads)", _ms(r["baseline_s"]), "", "", ""),
        (
            "cold load (new loader, scan cache)",
            _ms(r["cold_s"]),
            f"{r['cold_ratio']:.2f}x baseline",
            f"<= {r['cold_target']:.1f}x",
            verdict(r["cold_pass"]),
        ),
        (
            "first scan (no scan cache)",
            _ms(r["first_scan_s"]),
            f"{r['first_scan_ratio']:.2f}x baseline",
            "(info)",
            "",
        ),
        (
            "refresh([touched file])",
            _ms(r["refresh_s"]),
            f"{r['refresh_ratio'] * 100:.2f}% of cold",
            f"<= {r['refresh_target'] * 100:.0f}%",
            verdict(r["refresh_pass"]),
        ),
        (
            "load() rescan, parse cache warm",
            _ms(r["rescan_s"]),
            f"{r['rescan_ratio'] * 100:.1f}% of cold",
            "(info)",
            "",
        ),
    ]
    headers = ("measurement", "median", "ratio", "target", "result")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [
        f"registry_load: {r['tools']} tools, {r['meta_bytes'] / 1e6:.1f} MB of .meta, "
        f"median of {r['repeat']} runs after a warm-up",
        f"  generated: {kinds}",
        f"  registry:  {statuses}",
        "",
    ]
    for row in (headers, *rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000, help="number of tools (10000)")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions per measurement (7)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    result = run(max(args.tools, 2), max(args.repeat, 1))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
