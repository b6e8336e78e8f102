"""Benchmark: one tool call through the dispatcher against a bare ``subprocess.run``.

A trivial tool (``#!/bin/sh`` / ``cat >/dev/null; echo ok``) is called, in the
same run and in interleaved rounds (so drift hits every contender alike):

1. bare         ``subprocess.run([tool], input=b"{}", capture_output=True)``;
2. fork floor   the same with a no-op ``preexec_fn`` (info): any ``preexec_fn``
                makes CPython ``fork()`` instead of ``vfork()``, and the sandbox
                is applied in exactly that hook -- the floor of its design;
3. bwrap alone ``bwrap`` with the same namespaces and the same mount view a
                sandboxed call gets (default profile, private /tmp), running
                the tool directly: no exec step, no Landlock, no dispatcher;
4. sandboxed    ``Dispatcher.call`` with the default profile: argument
                validation, profile, effective rules, mount view, a per-call
                Landlock ruleset and private /tmp, bwrap, the exec step
                (``python3 -I -S``) that applies Landlock, bounded capture
                (targets: <= 4x bwrap alone and <= 10x bare);
5. unsandboxed  ``Dispatcher.call(..., elevated=True)`` through a gate that
                approves at once: the dispatcher without the sandbox (info).

Each figure is the median wall time over ``--calls`` calls after a warm-up.
Everything lives in a temporary directory: ``HOME``, ``XDG_CONFIG_HOME``
(where the default profile is installed on first use), ``TMPDIR``, the tools
directory and the working directory; ``XDG_RUNTIME_DIR`` (where each call's
private ``/tmp`` is made) on a tmpfs when ``/dev/shm`` is one, as a desktop
session's is.  The dispatcher
gets a registry snapshot loaded once, as an agent runtime holds one.

Usage::

    .venv/bin/python bench/dispatch.py [--calls 200] [--warmup 20] [--json]

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from registry_core.dispatch import (  # noqa: E402
    Authorization,
    CallOptions,
    Dispatcher,
    ElevationRequest,
)
from registry_core.errors import SandboxError  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402
from registry_core.sandbox import (  # noqa: E402
    Access,
    PathRule,
    abi_version,
    effective_rules,
    load_profile,
)
from registry_core.sandbox.contain import find_bwrap  # noqa: E402
from registry_core.sandbox.mounts import TMP, plan_view  # noqa: E402

TARGET = 10.0  # sandboxed / bare
TARGET_BWRAP = 4.0  # sandboxed / bwrap alone
TOOL = "#!/bin/sh\ncat >/dev/null; echo ok\n"
STDIN = b"{}"


class InstantGate:
    """An elevation gate that approves everything at once (benchmark only)."""

    def authorize(self, request: ElevationRequest) -> Authorization:
        return Authorization(reason="benchmark")

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> None:
        return None


def _runtime_dir(root: Path) -> Path:
    """``$XDG_RUNTIME_DIR``: on a tmpfs when there is one, as a desktop session's is.

    Each sandboxed call makes (and removes) its private ``/tmp`` there; on a
    disk file system that alone costs milliseconds a real session never pays.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="ollie-bench-runtime-", dir=shm))
    (root / "runtime").mkdir(mode=0o700)
    return root / "runtime"


def _setup(root: Path) -> tuple[dict[str, str], Path, Path]:
    """Isolated XDG dirs, a tools dir with the trivial tool; (env, tool, cwd)."""
    for sub in ("home", "config", "tmp", "tools", "work"):
        (root / sub).mkdir(mode=0o700)
    tools = root / "tools"
    (tools / "trivial.meta").write_text(
        json.dumps({"description": "Read stdin, print ok.", "readOnly": True}), encoding="utf-8"
    )
    tool = tools / "trivial"
    tool.write_text(TOOL, encoding="utf-8")
    tool.chmod(0o755)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_RUNTIME_DIR": str(_runtime_dir(root)),
        "TMPDIR": str(root / "tmp"),
        "OLLIE_TOOLS_PATH": str(tools),
    }
    return env, tool, root / "work"


def _bwrap_alone(env: dict[str, str], tool: Path, cwd: Path, private_tmp: Path) -> list[str] | None:
    """The bwrap command line of a sandboxed call, minus the exec step (None: no bwrap)."""
    bwrap = find_bwrap(env)
    if bwrap is None:
        return None
    profile = load_profile(env)
    rules = effective_rules(profile, {**env, "TMPDIR": TMP}, str(cwd))
    own = PathRule(str(tool), Access.ROX, "tool executable")
    rules = rules._replace(paths=(*rules.paths, own))
    view = plan_view(rules, cwd=str(cwd), private_tmp=str(private_tmp), broker_socket=None)
    namespaces = ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    namespaces += ["--unshare-cgroup-try", "--die-with-parent"]
    return [bwrap, *namespaces, *view.args, "--", str(tool)]


def _nothing() -> None:
    """A no-op ``preexec_fn``."""


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(calls: int, warmup: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ollie-bench-dispatch-"))
    try:
        env, tool, cwd = _setup(root)
        registry = RegistryLoader([tool.parent], env).load()
        dispatcher = Dispatcher(registry=lambda: registry, env=env, gate=InstantGate())
        sandboxed = CallOptions(cwd=str(cwd))
        unsandboxed = CallOptions(cwd=str(cwd), elevated=True)

        def bare() -> None:
            done = subprocess.run(
                [str(tool)], input=STDIN, capture_output=True, cwd=cwd, env=env, check=True
            )
            assert done.stdout == b"ok\n"

        def fork_floor() -> None:
            done = subprocess.run(
                [str(tool)],
                input=STDIN,
                capture_output=True,
                cwd=cwd,
                env=env,
                check=True,
                preexec_fn=_nothing,
            )
            assert done.stdout == b"ok\n"

        def through(options: CallOptions, expect_sandbox: bool) -> Callable[[], None]:
            def call() -> None:
                result = dispatcher.call("trivial", {}, options)
                assert result.ok, result.error
                assert result.stdout == "ok\n"
                assert result.sandboxed is expect_sandbox

            return call

        (root / "bwrap-tmp").mkdir(mode=0o700)
        bwrap_argv = _bwrap_alone(env, tool, cwd, root / "bwrap-tmp")

        def bwrap_alone() -> None:
            assert bwrap_argv is not None
            done = subprocess.run(
                bwrap_argv, input=STDIN, capture_output=True, cwd=cwd, env=env, check=True
            )
            assert done.stdout == b"ok\n", done.stderr

        contenders: dict[str, Callable[[], None]] = {
            "bare": bare,
            "fork_floor": fork_floor,
            "sandboxed": through(sandboxed, True),
            "unsandboxed": through(unsandboxed, False),
        }
        if bwrap_argv is not None:
            contenders["bwrap"] = bwrap_alone
        unavailable = ""
        try:
            contenders["sandboxed"]()
        except SandboxError as exc:
            unavailable = str(exc)
            del contenders["sandboxed"]
        installed = (root / "config" / "ollie" / "sandbox" / "default.yaml").is_file()

        for _ in range(warmup):
            for fn in contenders.values():
                fn()
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(calls):
            for name, fn in contenders.items():
                times[name].append(_timed(fn))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if "env" in locals():
            shutil.rmtree(env["XDG_RUNTIME_DIR"], ignore_errors=True)

    medians = {name: statistics.median(values) for name, values in times.items()}
    result: dict[str, Any] = {
        "calls": calls,
        "warmup": warmup,
        "landlock_abi": abi_version(),
        "default_profile_installed": installed,
        "median_s": medians,
        "p90_s": {
            name: statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
            for name, values in times.items()
        },
        "target": TARGET,
        "target_bwrap": TARGET_BWRAP,
        "sandbox_unavailable": unavailable,
    }
    if "sandboxed" in medians:
        ratio = medians["sandboxed"] / medians["bare"]
        result["sandboxed_ratio"] = ratio
        result["pass_bare"] = ratio <= TARGET
        result["pass"] = result["pass_bare"]
        if "bwrap" in medians:
            result["sandboxed_over_bwrap"] = medians["sandboxed"] / medians["bwrap"]
            result["pass_bwrap"] = result["sandboxed_over_bwrap"] <= TARGET_BWRAP
            result["pass"] = result["pass_bare"] and result["pass_bwrap"]
        result["sandboxed_over_fork_floor"] = medians["sandboxed"] / medians["fork_floor"]
    result["fork_floor_ratio"] = medians["fork_floor"] / medians["bare"]
    result["unsandboxed_ratio"] = medians["unsandboxed"] / medians["bare"]
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def report(r: dict[str, Any]) -> str:
    medians, p90 = r["median_s"], r["p90_s"]
    rows = [
        ("bare subprocess.run", _ms(medians["bare"]), _ms(p90["bare"]), "", "", ""),
        (
            "bare + no-op preexec_fn (fork)",
            _ms(medians["fork_floor"]),
            _ms(p90["fork_floor"]),
            f"{r['fork_floor_ratio']:.2f}x bare",
            "(info)",
            "",
        ),
    ]
    if "bwrap" in medians:
        rows.append(
            (
                "bwrap alone, same mounts",
                _ms(medians["bwrap"]),
                _ms(p90["bwrap"]),
                f"{medians['bwrap'] / medians['bare']:.2f}x bare",
                "(baseline)",
                "",
            )
        )
    if "sandboxed" in medians:
        rows.append(
            (
                "dispatcher, sandboxed",
                _ms(medians["sandboxed"]),
                _ms(p90["sandboxed"]),
                f"{r['sandboxed_ratio']:.2f}x bare",
                f"<= {r['target']:.1f}x",
                "PASS" if r["pass_bare"] else "MISS",
            )
        )
        if "sandboxed_over_bwrap" in r:
            rows.append(
                (
                    "  same, vs bwrap alone",
                    "",
                    "",
                    f"{r['sandboxed_over_bwrap']:.2f}x bwrap",
                    f"<= {r['target_bwrap']:.1f}x",
                    "PASS" if r["pass_bwrap"] else "MISS",
                )
            )
    rows.append(
        (
            "dispatcher, unsandboxed (elevated)",
            _ms(medians["unsandboxed"]),
            _ms(p90["unsandboxed"]),
            f"{r['unsandboxed_ratio']:.2f}x bare",
            "(info)",
            "",
        )
    )
    headers = ("measurement", "median", "p90", "ratio", "target", "result")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [
        f"dispatch: trivial tool, median of {r['calls']} calls per contender after "
        f"{r['warmup']} warm-up rounds, interleaved; Landlock ABI {r['landlock_abi']}",
        "",
    ]
    for row in (headers, *rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    if "sandboxed" in medians:
        lines.append(
            f"\nsandboxed / fork floor: {r['sandboxed_over_fork_floor']:.2f}x "
            "(what the dispatcher adds beyond fork + exec)"
        )
    if r["sandbox_unavailable"]:
        lines += ["", f"sandboxed calls not measured: {r['sandbox_unavailable']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per contender (200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed warm-up rounds (20)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    result = run(max(args.calls, 1), max(args.warmup, 0))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
