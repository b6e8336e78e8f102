"""Scenario 8: the Tool Browser, opened from the tray menu with the mouse, live.

The tray runs on copies of the demo tool directories (``tools``, ``broken``,
``shadowed``: what ``--demo`` uses) so the test may drop a new ``.meta`` in.
What the browser lists is compared with ``ollie-tools list --all --json`` on
the same directories and environment: the CLI is the independent oracle of
each tool's status.  The rows and the selected tool's condition results come
from the tray's test state file (``ollie_tray/state_report.py``); the
screenshots show the same.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_driver import BROWSER_TITLE, open_tray_menu
from e2e_harness import E2E, VENV_BIN

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]


def cli_statuses(env: dict[str, str]) -> dict[str, str]:
    listing = subprocess.run(
        [str(VENV_BIN / "ollie-tools"), "list", "--all", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {tool["name"]: tool["status"] for tool in json.loads(listing.stdout)}


def rows(state: dict[str, Any]) -> dict[str, str]:
    browser = state.get("browser") or {}
    return {r["name"]: r["status"] for r in browser.get("rows", []) if r["rank"] == 0}


def drop_tool(tools: Path, staging: Path, name: str) -> None:
    """A new tool appears the way an installer would put it: renamed into place."""
    staging.mkdir(exist_ok=True)
    script = staging / name
    script.write_text("#!/bin/sh\ncat >/dev/null\necho '{\"dropped\": true}'\n")
    script.chmod(0o755)
    meta = {"description": "Dropped in while the browser was open.", "tier": "hot"}
    (staging / f"{name}.meta").write_text(json.dumps(meta))
    os.rename(script, tools / name)
    os.rename(staging / f"{name}.meta", tools / f"{name}.meta")


def test_browser_from_the_tray_menu_lists_explains_and_updates(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=False, wait_icon=True)
    tools = Path(tray.env["OLLIE_TOOLS_PATH"].split(":")[0])
    expected = cli_statuses(tray.env)
    assert expected["gpu_status"] == "hidden" and expected["broken_example"] == "broken"

    open_tray_menu(tray)
    e2e.display.key(None, "b")  # Tool &Browser…
    window = e2e.display.wait_window(BROWSER_TITLE)
    state = tray.wait_state(lambda s: rows(s) == expected, "the browser listing every tool")
    shadowed = [r for r in state["browser"]["rows"] if r["rank"] > 0]
    assert [(r["name"], r["status"]) for r in shadowed] == [("greet", "shadowed")]
    e2e.shot("browser", window)

    # The hidden tool, found with the filter (Ctrl+F), says which condition failed.
    e2e.display.key(window, "ctrl+f")
    e2e.display.type_text("gpu_status")
    state = tray.wait_state(
        lambda s: (s.get("browser") or {}).get("selected") == "gpu_status",
        "gpu_status selected",
    )
    conditions = state["browser"]["conditions"]
    assert any("nvidia-smi" in c and "not found" in c for c in conditions), conditions
    assert any("darwin" in c for c in conditions), conditions
    e2e.shot("browser-hidden-tool", window)

    # Live: a .meta dropped into the tools directory shows up without a reload.
    drop_tool(tools, e2e.tmp / "staging", "e2e_dropped")
    tray.wait_state(lambda s: rows(s).get("e2e_dropped") == "available", "the dropped tool")
    assert cli_statuses(tray.env)["e2e_dropped"] == "available"
    e2e.display.key(window, "ctrl+f", "ctrl+a")
    e2e.display.type_text("e2e_dropped")
    tray.wait_state(
        lambda s: (s.get("browser") or {}).get("selected") == "e2e_dropped",
        "e2e_dropped selected",
    )
    e2e.shot("browser-live-update", window)
