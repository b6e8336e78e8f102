"""``ollie-approve`` against the real tray: a Claude Code edit shown as a diff, approved, denied.

The agent side is ``ollie-approve`` fed a documented ``PreToolUse`` hook input
for an ``Edit`` outside the project (which the default rules send to the
desktop); the tray's approval dialog must show the agent, its tool and the
edit as a diff, and its answer must come back as Claude Code's hook output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_driver import APPROVAL_TITLE, click_approve, find_window, texts_of
from e2e_harness import E2E, VENV_BIN

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TITLE = APPROVAL_TITLE.format(tool="Edit")


def hook_call(e2e: E2E, env: dict[str, str], project: Path, target: Path) -> Any:
    payload = {
        "session_id": "e2e-session",
        "transcript_path": str(project / "transcript.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": str(target), "old_string": "two", "new_string": "TWO"},
        "tool_use_id": "toolu_e2e",
    }
    stdin = e2e.tmp / f"hook-{len(e2e.calls)}.json"
    stdin.write_text(json.dumps(payload))
    argv = ["/bin/sh", "-c", 'exec "$0" < "$1"', str(VENV_BIN / "ollie-approve"), str(stdin)]
    return e2e.start(argv, env, cwd=project)


def setup(e2e: E2E) -> tuple[Any, dict[str, str], Path, Path]:
    tray = e2e.start_tray(demo=True)
    env = e2e.agent_env(tray)
    project = e2e.tmp / "project"
    project.mkdir()
    outside = e2e.tmp / "elsewhere"
    outside.mkdir()
    target = outside / "notes.txt"
    target.write_text("one\ntwo\nthree\n")
    return tray, env, project, target


def decision(result: Any) -> dict[str, Any]:
    assert result.returncode == 0, result
    output: dict[str, Any] = json.loads(result.stdout)["hookSpecificOutput"]
    return output


def test_the_dialog_shows_the_edit_as_a_diff_and_approves(e2e: E2E) -> None:
    tray, env, project, target = setup(e2e)
    call = hook_call(e2e, env, project, target)
    window = e2e.display.wait_window(TITLE)
    state = tray.wait_state(lambda s: find_window(s, "ApprovalDialog"), "the dialog's state")
    texts = texts_of(state, "ApprovalDialog")
    assert "claude-code wants to use its tool Edit" in texts
    assert "AGENT ACTION" in texts
    dialog = find_window(state, "ApprovalDialog")
    assert dialog is not None
    diffs = [box for box in dialog["boxes"] if box.startswith("---")]
    assert len(diffs) == 1, dialog["boxes"]
    lines = diffs[0].splitlines()
    assert "-two" in lines and "+TWO" in lines and " one" in lines
    assert str(target) in diffs[0]
    e2e.shot("action-edit-diff", window)
    click_approve(e2e.display, tray)
    out = decision(call.result())
    assert out["permissionDecision"] == "allow"
    assert target.read_text() == "one\ntwo\nthree\n"  # the hook decides; the agent edits
    e2e.display.wait_no_window(TITLE)


def test_deny_in_the_dialog_is_deny_for_the_agent(e2e: E2E) -> None:
    _tray, env, project, target = setup(e2e)
    call = hook_call(e2e, env, project, target)
    window = e2e.display.wait_window(TITLE)
    e2e.display.key(window, "alt+d")
    out = decision(call.result())
    assert out["permissionDecision"] == "deny"
    assert "denied" in out["permissionDecisionReason"]
    e2e.display.wait_no_window(TITLE)
