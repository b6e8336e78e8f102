"""Scenario 7: ``ollie-elevate -- <code>`` as the ollie-core runtime calls its x/elevate plugin.

ollie-core runs ``$OLLIE_PLUGINS_PATH/elevate -- <code>`` from the session's
working directory and reads stdout, stderr and the exit status.  The dialog
must show the code itself; after approval bash runs it there and the
plugin exits with the code's status; a denial exits 77 with the reason on
stderr and runs nothing.
"""

from __future__ import annotations

import os

import pytest
from e2e_driver import APPROVAL_TITLE, approve_armed, click_approve, click_button, find_window
from e2e_harness import E2E, VENV_BIN

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TITLE = APPROVAL_TITLE.format(tool="execute_code")
ELEVATE = str(VENV_BIN / "ollie-elevate")


def test_elevate_shows_the_code_and_keeps_the_contract(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    cwd = e2e.tmp / "session-cwd"
    cwd.mkdir()

    code = "id -u; pwd"
    call = e2e.start([ELEVATE, "--", code], env, cwd=cwd)
    window = e2e.display.wait_window(TITLE)
    state = tray.wait_state(approve_armed, "Approve armed")
    dialog = find_window(state, "ApprovalDialog")
    assert dialog is not None
    assert code in dialog["boxes"], dialog["boxes"]  # the "Code to run" box, in full
    assert any(str(cwd) in box for box in dialog["boxes"]), dialog["boxes"]
    assert dialog["combos"] == ["Only this time"]
    e2e.shot("elevate-code", window)
    click_button(e2e.display, state, "ApprovalDialog", "Approve")
    result = call.result()
    assert (result.returncode, result.stdout) == (0, f"{os.getuid()}\n{cwd}\n"), result

    # The code's own exit status and streams come back unchanged.
    call = e2e.start([ELEVATE, "--", "echo out; echo err >&2; exit 3"], env, cwd=cwd)
    e2e.display.wait_window(TITLE)
    click_approve(e2e.display, tray)
    result = call.result()
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n"), result

    # Denied: 77, the reason on stderr, nothing ran.
    marker = cwd / "ran"
    call = e2e.start([ELEVATE, "--", f"touch {marker}"], env, cwd=cwd)
    window = e2e.display.wait_window(TITLE)
    e2e.display.key(window, "Escape")
    result = call.result()
    assert result.returncode == 77, result
    assert result.stdout == "" and "denied" in result.stderr, result
    assert not marker.exists()
