"""Scenario 4: "For 15 minutes" spares the next dialog, until the tool's executable changes.

The tray runs without ``--demo`` (which would force the bundled tools path)
on copies of the demo tools, so the test may change an executable: a
remembered allow is bound to the executable's path and SHA-256.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from e2e_driver import (
    APPROVAL_TITLE,
    POLL,
    AgentCall,
    Display,
    E2EError,
    approve_armed,
    click_button,
    find_window,
)
from e2e_harness import E2E

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "write_protected_note"
TITLE = APPROVAL_TITLE.format(tool=TOOL)


def finishes_without_window(call: AgentCall, display: Display, title: str) -> None:
    """Wait for ``call`` to end, failing if a window titled ``title`` shows up meanwhile."""
    deadline = time.monotonic() + 15
    while call.running():
        if display.windows(title):
            raise E2EError(f"a {title!r} window appeared")
        if time.monotonic() > deadline:
            raise E2EError(f"{call.argv} did not finish")
        time.sleep(POLL)


def test_remember_15_minutes_until_the_executable_changes(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=False)
    env = e2e.agent_env(tray)
    tools = Path(env["OLLIE_TOOLS_PATH"])
    assert (tools / TOOL).is_file() and tools.is_relative_to(e2e.tmp)  # a copy

    first = e2e.start_call(TOOL, env)
    window = e2e.display.wait_window(TITLE)
    e2e.display.key(window, "alt+r", "Down", "Down")  # Only this time → session → 15 minutes
    tray.wait_state(
        lambda s: (find_window(s, "ApprovalDialog") or {}).get("combos") == ["For 15 minutes"],
        "For 15 minutes selected",
    )
    state = tray.wait_state(approve_armed, "Approve armed")
    e2e.shot("remember-15-minutes", window)
    click_button(e2e.display, state, "ApprovalDialog", "Approve")
    result = first.result()
    assert result.returncode == 0, result
    policies = yaml.safe_load(
        Path(tray.env["XDG_CONFIG_HOME"], "ollie", "policies.yaml").read_text()
    )
    assert TOOL in str(policies), policies

    # Remembered: the second call runs and no dialog ever appears.
    second = e2e.start_call(TOOL, env)
    finishes_without_window(second, e2e.display, TITLE)
    result = second.result()
    assert result.returncode == 0, result
    assert len((Path(env["HOME"]) / "ollie-demo-note.txt").read_text().splitlines()) == 2

    # The executable changes: the remembered allow no longer covers it.
    with open(tools / TOOL, "a", encoding="utf-8") as script:
        script.write("# changed by the end-to-end test\n")
    third = e2e.start_call(TOOL, env)
    window = e2e.display.wait_window(TITLE)
    e2e.shot("remember-executable-changed", window)
    e2e.display.key(window, "alt+d")
    result = third.result()
    assert result.returncode == 77, result
    assert len((Path(env["HOME"]) / "ollie-demo-note.txt").read_text().splitlines()) == 2
