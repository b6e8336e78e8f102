"""The hook contracts in and out (Claude Code's PreToolUse, generic JSON)."""

from __future__ import annotations

import json

import pytest

from registry_core.agents.hook import (
    HookInputError,
    claude_answer,
    generic_answer,
    parse_claude,
    parse_generic,
)

CLAUDE = {
    "session_id": "abc-123",
    "transcript_path": "/home/u/.claude/projects/p/abc.jsonl",
    "cwd": "/home/u/p",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
    "tool_use_id": "toolu_1",
}


def test_claude_input_is_read_by_its_documented_field_names() -> None:
    call = parse_claude(json.dumps(CLAUDE))
    assert (call.agent, call.tool, call.input, call.cwd, call.session) == (
        "claude-code",
        "Bash",
        {"command": "ls"},
        "/home/u/p",
        "abc-123",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hook_event_name": "PostToolUse"}, "hook_event_name"),
        ({"tool_name": None}, "tool_name"),
        ({"tool_input": "ls"}, "tool_input"),
        ({"cwd": "relative"}, "cwd"),
    ],
)
def test_bad_claude_input_names_the_field(change: dict[str, object], message: str) -> None:
    with pytest.raises(HookInputError, match=message):
        parse_claude(json.dumps({**CLAUDE, **change}))


def test_answers_follow_the_contracts() -> None:
    assert json.loads(claude_answer("deny", "no")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }
    assert claude_answer(None, "pass") == ""
    assert json.loads(generic_answer("ask", "why")) == {"decision": "ask", "reason": "why"}


def test_generic_input_defaults() -> None:
    call = parse_generic(json.dumps({"tool": "shell", "input": {"command": "x"}, "cwd": "/a"}))
    assert (call.agent, call.tool, call.cwd) == ("agent", "shell", "/a")
    with pytest.raises(HookInputError, match="'tool'"):
        parse_generic(json.dumps({"input": {}}))
