"""Tray startup and idle memory vs a minimal PySide6 tray-icon app, in the same run.

    .venv/bin/python bench/tray.py [--runs 5] [--json]

For each program: time from process start to ready (ours: the broker socket
is listening, "listening on" on stderr — the tray binds it before starting
Qt, and connections wait in the backlog; the minimal app: its icon is shown,
"ready" on stdout), for information the time until our first request is
answered (the whole app is up) and the resident memory (VmRSS) after a short idle. Runs
on its own Xvfb with trayer when they are installed (a real tray), else with
QT_QPA_PLATFORM=offscreen. Targets: startup <= 1.5x the minimal app's, RSS
<= minimal + 40 MiB. Exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from registry_core import paths

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
MINIMAL = """
import sys
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QSystemTrayIcon
app = QApplication(sys.argv[:1])
icon = QSystemTrayIcon(QIcon(sys.argv[1]))
icon.show()
print("ready", flush=True)
app.exec()
"""
IDLE_S = 1.5


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def ping(socket_path: Path) -> None:
    """Block until the broker on ``socket_path`` answers a ping (the app is fully up)."""
    from registry_core.broker.wire.client import BrokerClient

    with BrokerClient(socket_path, timeout=30) as client:
        if not client.ping():
            raise RuntimeError("no pong")


def measure(
    argv: list[str],
    env: dict[str, str],
    marker: str,
    stream: str,
    socket_path: Path | None = None,
) -> tuple[float, int, float]:
    """(seconds to ready, idle RSS KiB, seconds to the first answered ping or 0)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    pipe = proc.stdout if stream == "stdout" else proc.stderr
    assert pipe is not None
    elapsed = None
    try:
        for line in pipe:
            if marker in line:
                elapsed = time.perf_counter() - start
                break
        if elapsed is None:
            raise RuntimeError(f"{argv[0]} exited before {marker!r}")
        answered = 0.0
        if socket_path is not None:
            ping(socket_path)
            answered = time.perf_counter() - start
        time.sleep(IDLE_S)  # idle: what the resident set settles at
        rss = rss_kib(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for p in (proc.stdout, proc.stderr):
            if p is not None:
                p.close()
    return elapsed, rss, answered


def start_desktop(tmp: Path, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    if not (shutil.which("Xvfb") and shutil.which("trayer")):
        env["QT_QPA_PLATFORM"] = "offscreen"
        return []
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp", "-screen", "0", "1280x800x24"],
        pass_fds=(write_fd,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        display = fh.readline().strip()
    env["DISPLAY"] = f":{display}"
    trayer = subprocess.Popen(
        ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return [trayer, xvfb]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ollie-bench-tray-") as tmpdir:
        tmp = Path(tmpdir)
        runtime = tmp / "run"
        runtime.mkdir(mode=0o700)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp / "home"),
            "XDG_RUNTIME_DIR": str(runtime),
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp}/no-bus",
        }
        # Not a first start (which would open the Tool Browser): measure the tray alone.
        welcomed = paths.state_home(env) / "ollie" / "welcome-shown"
        welcomed.parent.mkdir(parents=True, exist_ok=True)
        welcomed.touch()
        helpers = start_desktop(tmp, env)
        try:
            icon = str(REPO / "resources" / "icons" / "io.github.ollie_tray.OllieTray.svg")
            minimal = [sys.executable, "-c", MINIMAL, icon]
            ours = [str(VENV_BIN / "ollie-tray"), "--demo"]
            sock = runtime / "ollie" / "elevate.sock"
            results: dict[str, list[tuple[float, int, float]]] = {"minimal": [], "ollie-tray": []}
            measure(minimal, env, "ready", "stdout")  # warm the page cache for both
            measure(ours, env, "listening on", "stderr", sock)
            for _ in range(args.runs):
                results["minimal"].append(measure(minimal, env, "ready", "stdout"))
                results["ollie-tray"].append(measure(ours, env, "listening on", "stderr", sock))
        finally:
            for proc in helpers:
                proc.terminate()
                proc.wait(10)
    med = {
        name: (
            statistics.median(t for t, _, _ in runs),
            statistics.median(r for _, r, _ in runs) / 1024,
        )
        for name, runs in results.items()
    }
    answered = statistics.median(a for _, _, a in results["ollie-tray"])
    start_ratio = med["ollie-tray"][0] / med["minimal"][0]
    rss_delta = med["ollie-tray"][1] - med["minimal"][1]
    report = {
        "platform": "xvfb+trayer" if helpers else "offscreen",
        "minimal": {"startup_s": med["minimal"][0], "rss_mib": med["minimal"][1]},
        "ollie_tray": {"startup_s": med["ollie-tray"][0], "rss_mib": med["ollie-tray"][1]},
        "first_ping_answered_s": answered,
        "startup_ratio": start_ratio,
        "startup_pass": start_ratio <= 1.5,
        "rss_delta_mib": rss_delta,
        "rss_pass": rss_delta <= 40,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"platform: {report['platform']}, median of {args.runs}")
    print(f"{'program':<12}{'startup':>10}{'idle RSS':>12}")
    for name in ("minimal", "ollie-tray"):
        print(f"{name:<12}{med[name][0] * 1000:>8.0f}ms{med[name][1]:>9.1f}MiB")
    mark = "PASS" if report["startup_pass"] else "MISS"
    print(f"startup ratio {start_ratio:.2f}x (target <= 1.5x) {mark}")
    print(
        f"(info) first request answered {answered * 1000:.0f} ms after start "
        f"({answered / med['minimal'][0]:.2f}x the minimal app's startup): connections made "
        "earlier wait in the socket's backlog"
    )
    mark = "PASS" if report["rss_pass"] else "MISS"
    print(f"RSS over minimal {rss_delta:+.1f} MiB (target <= +40 MiB) {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
