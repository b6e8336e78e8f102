"""Screenshots of the Tool Browser on the bundled demo tools, for the README.

Opens the browser on ``resources/examples/{tools,broken,shadowed}`` (in that
search order, so ``greet`` shows a shadowed definition), with a real
dispatcher so "Run…" is live, and saves:

* ``docs/images/tool-browser.png``         ``system_logs`` selected (variants, conditions);
* ``docs/images/tool-browser-hidden.png``  the hidden ``gpu_status`` (why it is hidden).

Runs offscreen unless ``DISPLAY`` is set (e.g. under ``xvfb-run``); the
picture is the window's own rendering either way.  Usage::

    .venv/bin/python scripts/screenshot_browser.py [--out docs/images] [--size 1200x760]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication  # noqa: E402

from ollie_tray.browser import BrowserWindow  # noqa: E402
from registry_core.dispatch import Dispatcher  # noqa: E402
from registry_core.registry import RegistryLoader  # noqa: E402

SHOTS = (("system_logs", "tool-browser.png"), ("gpu_status", "tool-browser-hidden.png"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--size", default="1200x760", help="window size, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    app = QApplication.instance() or QApplication(["ollie-tool-browser"])
    assert isinstance(app, QApplication)
    app.setStyle("Fusion")
    examples = REPO / "resources" / "examples"
    loader = RegistryLoader([examples / "tools", examples / "broken", examples / "shadowed"])
    window = BrowserWindow(loader, dispatcher=Dispatcher(registry=loader.load), live=False)
    window.resize(width, height)
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, filename in SHOTS:
        if not window.select_tool(name):
            print(f"no tool {name} in {examples}", file=sys.stderr)
            return 1
        window.view.setFocus()
        for _ in range(3):  # layout, then paint
            app.processEvents()
        target = args.out / filename
        if not window.grab().save(str(target)):
            print(f"could not write {target}", file=sys.stderr)
            return 1
        print(target)
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
