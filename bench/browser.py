"""Benchmark: the Tool Browser with 10,000 tools, next to the registry load it depends on.

Generates a synthetic tools directory with the generator of
``bench/registry_load.py`` and measures, in the same run:

1. registry load   ``RegistryLoader([dir]).load()`` with a new loader each run;
2. window ready    that load, then ``BrowserWindow(loader)`` + ``show()`` + event
                   processing until the view reports every row (target: the
                   window part <= 0.5 s, i.e. ready <= registry load + 0.5 s;
                   each run compares against its own load, so load noise cancels);
3. keystroke       typing 5 characters into the filter one by one, with the
                   events (filtering, selection, repaint) processed after each
                   (target: median <= 50 ms); deleting them again (informational).

Runs offscreen (``QT_QPA_PLATFORM=offscreen`` unless set).  Usage::

    .venv/bin/python bench/browser.py [--tools 10000] [--repeat 3] [--json]

Always exits 0: benchmarks inform, they do not fail the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
for entry in (str(REPO), str(REPO / "bench")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402
from registry_load import generate  # noqa: E402

from ollie_tray.browser import BrowserWindow  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402

WINDOW_SLACK = 0.5  # window ready <= registry load + this many seconds
KEYSTROKE_TARGET = 0.050  # median seconds per filter keystroke
TYPED = "windo"  # a word of the generator's vocabulary, typed one character at a time


def _window_ready(
    app: QApplication, directory: Path, env: dict[str, str]
) -> tuple[float, float, int]:
    """(load, window, rows): one loader's ``load()``, then the window built on it, shown."""
    loader = RegistryLoader([directory], env=env)
    start = time.perf_counter()
    loader.load()
    loaded = time.perf_counter()
    window = BrowserWindow(loader)
    window.show()
    expected = len(loader.current)
    while window.view.model().rowCount() < expected:
        app.processEvents()
    app.processEvents()  # the first paint
    shown = time.perf_counter()
    rows = window.view.model().rowCount()
    window.close()
    window.deleteLater()
    app.processEvents()
    return loaded - start, shown - loaded, rows


def _keystrokes(app: QApplication, window: BrowserWindow, rounds: int) -> dict[str, Any]:
    typed: list[float] = []
    typed_cpu: list[float] = []
    erased: list[float] = []
    shown: list[int] = []
    edit = window.filter_edit
    for _ in range(rounds):
        for char in TYPED:
            start, cpu = time.perf_counter(), time.thread_time()
            QTest.keyClicks(edit, char)
            app.processEvents()
            typed.append(time.perf_counter() - start)
            typed_cpu.append(time.thread_time() - cpu)
            shown.append(window.proxy.rowCount())
        for _char in TYPED:
            start = time.perf_counter()
            QTest.keyClick(edit, Qt.Key.Key_Backspace)
            app.processEvents()
            erased.append(time.perf_counter() - start)
    return {
        "typed_median_s": statistics.median(typed),
        "typed_max_s": max(typed),
        "typed_cpu_median_s": statistics.median(typed_cpu),
        "erased_median_s": statistics.median(erased),
        "rows_after_each_key": shown[: len(TYPED)],
        "samples": len(typed),
    }


def run(count: int, repeat: int) -> dict[str, Any]:
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    tmp = Path(tempfile.mkdtemp(prefix="ollie-bench-browser-"))
    try:
        directory = tmp / "tools"
        directory.mkdir()
        generate(directory, count)
        env = dict(os.environ)
        _window_ready(app, directory, env)  # warm-up: page cache, imports, fonts, icons
        runs = [_window_ready(app, directory, env) for _ in range(repeat)]
        load = statistics.median(r[0] for r in runs)
        build = statistics.median(r[1] for r in runs)
        ready = statistics.median(r[0] + r[1] for r in runs)
        rows = runs[0][2]
        window = BrowserWindow(RegistryLoader([directory], env=env))
        window.show()
        app.processEvents()
        keys = _keystrokes(app, window, repeat)
        window.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "tools": count,
        "rows": rows,
        "repeat": repeat,
        "load_s": load,
        "window_ready_s": ready,
        "window_overhead_s": build,
        "window_target_s": load + WINDOW_SLACK,
        "window_pass": build <= WINDOW_SLACK,
        "keystroke_target_s": KEYSTROKE_TARGET,
        "keystroke_pass": keys["typed_median_s"] <= KEYSTROKE_TARGET,
        **keys,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def report(r: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    rows = [
        ("registry load (RegistryLoader.load)", _ms(r["load_s"]), "", ""),
        (
            "window ready (load, then window)",
            _ms(r["window_ready_s"]),
            f"<= load + {WINDOW_SLACK:.1f} s",
            verdict(r["window_pass"]),
        ),
        (
            "  of which the window (build + show + rows)",
            _ms(r["window_overhead_s"]),
            f"<= {WINDOW_SLACK * 1000:.0f} ms",
            verdict(r["window_pass"]),
        ),
        (
            f"filter keystroke, median of {r['samples']}",
            _ms(r["typed_median_s"]),
            f"<= {r['keystroke_target_s'] * 1000:.0f} ms",
            verdict(r["keystroke_pass"]),
        ),
        ("filter keystroke, slowest", _ms(r["typed_max_s"]), "(info)", ""),
        ("filter keystroke, median CPU time", _ms(r["typed_cpu_median_s"]), "(info)", ""),
        ("backspace (list widens), median", _ms(r["erased_median_s"]), "(info)", ""),
    ]
    headers = ("measurement", "time", "target", "result")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [
        f"browser: {r['tools']} tools ({r['rows']} rows), median of {r['repeat']} runs,"
        f" typing {TYPED!r} → rows {r['rows_after_each_key']}",
        "",
    ]
    for row in (headers, *rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000, help="number of tools (10000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement (3)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    result = run(max(args.tools, 10), max(args.repeat, 1))
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
