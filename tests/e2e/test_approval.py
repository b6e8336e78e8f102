"""Scenarios 2 and 3: an agent's elevated call, approved, denied, unanswered, abandoned.

The agent is ``ollie-tools call write_protected_note`` (``elevated: true``):
the dispatcher asks the tray's broker, and only an approval lets the tool
run, outside the Landlock sandbox, where it appends to
``$HOME/ollie-demo-note.txt``.  The same script declared *without*
``elevated`` (so the dispatcher runs it sandboxed) cannot write there: that
is the contrast that shows the approved run really left the sandbox.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import desktop_session as ds
import pytest
from e2e_driver import (
    APPROVAL_TITLE,
    click_approve,
    click_button,
    find_window,
    texts_of,
    wait_for,
)
from e2e_harness import E2E, EXAMPLES

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "write_protected_note"
TITLE = APPROVAL_TITLE.format(tool=TOOL)
NOTE = "ollie-demo-note.txt"
DENIED = 77


def sandboxed_twin(directory: Path) -> str:
    """The same script as a tool that does not declare ``elevated`` (runs sandboxed)."""
    directory.mkdir()
    shutil.copy2(EXAMPLES / "tools" / TOOL, directory / "note_sandboxed")
    meta = json.loads((EXAMPLES / "tools" / f"{TOOL}.meta").read_text())
    meta.pop("elevated")
    (directory / "note_sandboxed.meta").write_text(json.dumps(meta))
    return str(directory)


def test_approved_call_runs_outside_the_sandbox(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    home = Path(env["HOME"])
    cwd = e2e.tmp / "project"
    cwd.mkdir()
    shown_before = len(ds.dunst_shown(e2e.desktop.dunst_env))

    # The contrast: sandboxed, the same script may not write into $HOME.
    twin_env = {**env, "OLLIE_TOOLS_PATH": sandboxed_twin(e2e.tmp / "twin")}
    sandboxed = e2e.start_call("note_sandboxed", twin_env, cwd=cwd).result()
    assert sandboxed.returncode == 1, sandboxed
    assert "cannot write" in sandboxed.stderr and "sandbox" in sandboxed.stderr
    assert not (home / NOTE).exists()

    call = e2e.start_call(TOOL, env, args='{"text": "e2e approved"}', cwd=cwd)
    window = e2e.display.wait_window(TITLE)
    # Approve is inert while the dialog arms (700 ms from when it is shown):
    # a click on it right away does nothing.
    seen = time.monotonic()
    state = tray.wait_state(lambda s: find_window(s, "ApprovalDialog"), "the dialog's state")
    click_button(e2e.display, state, "ApprovalDialog", "Approve")
    early = time.monotonic() - seen
    assert early < 0.5, f"the click took {early:.2f} s to send: too late to test the arming"
    dialog = find_window(state, "ApprovalDialog")
    assert dialog is not None and dialog["buttons"].get("Approve") is False, (early, state)
    assert call.still_running_after(0.9), "a click during the arming delay approved the call"
    assert e2e.display.windows(TITLE), "the dialog went away after an early click"
    assert not (home / NOTE).exists()
    e2e.shot("approval-dialog", window)

    # A notification of the request is up in dunst.
    shown = ds.dunst_shown(e2e.desktop.dunst_env)[shown_before:]
    assert any(TOOL in n.get("summary", "") for n in shown), shown
    e2e.shot_notifications("approval-notification")

    click_approve(e2e.display, tray)
    result = call.result()
    assert result.returncode == 0, result
    assert f"wrote to {home / NOTE}:" in result.stdout
    assert (home / NOTE).read_text().rstrip().endswith("e2e approved")
    e2e.display.wait_no_window(TITLE)
    tray.wait_state(lambda s: s["pending"] == 0 and s["tray"] == "idle", "idle again")


def test_denied_call_exits_77_and_nothing_runs(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    call = e2e.start_call(TOOL, env)
    window = e2e.display.wait_window(TITLE)
    e2e.display.key(window, "alt+d")
    result = call.result()
    assert result.returncode == DENIED, result
    assert result.stderr.startswith("elevation denied"), result.stderr
    assert result.stdout == ""
    assert not (Path(env["HOME"]) / NOTE).exists()
    e2e.display.wait_no_window(TITLE)


def test_unanswered_request_is_denied_by_the_countdown(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True, countdown=3)
    env = e2e.agent_env(tray)
    call = e2e.start_call(TOOL, env)
    window = e2e.display.wait_window(TITLE)
    state = tray.wait_state(
        lambda s: any("Denying automatically in" in t for t in texts_of(s, "ApprovalDialog")),
        "the visible countdown",
    )
    assert state["pending"] == 1
    e2e.shot("approval-countdown", window)
    result = call.result(timeout=10)
    elapsed = time.monotonic() - call.started
    assert result.returncode == DENIED, result
    assert 2.5 <= elapsed < 10, elapsed
    assert not (Path(env["HOME"]) / NOTE).exists()
    e2e.display.wait_no_window(TITLE)
    # Nobody decided by hand: the desktop says so, quietly (low urgency, no actions).
    summary = f"Ollie denied {TOOL}"
    wait_for(
        lambda: [e for e in ds.dunst_shown(e2e.desktop.dunst_env) if e["summary"] == summary],
        "the denial notification",
    )
    [shown] = [e for e in ds.dunst_shown(e2e.desktop.dunst_env) if e["summary"] == summary]
    assert shown["urgency"] == "LOW"
    assert shown["body"].startswith(f"{TOOL} — no answer in time")


def test_killed_client_withdraws_its_dialog(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    call = e2e.start_call(TOOL, env)
    e2e.display.wait_window(TITLE)
    call.proc.send_signal(signal.SIGKILL)
    call.proc.wait(5)
    e2e.display.wait_no_window(TITLE)
    tray.wait_state(
        lambda s: s["pending"] == 0 and not find_window(s, "ApprovalDialog"), "no dialog pending"
    )
    e2e.shot("approval-withdrawn")
    assert not (Path(env["HOME"]) / NOTE).exists()
