"""Each agent's hook contract, in and out, on inputs in that agent's own documented shape.

Where each input comes from (the shapes, with our paths and values):
- Claude Code: its hooks reference (PreToolUse, PermissionRequest input fields).
- Codex: ``codex-rs/hooks/schema/generated/{pre-tool-use,permission-request}.command.
  {input,output}.schema.json`` and ``codex-rs/hooks/src/engine/output_parser.rs``
  (PreToolUse rejects ``allow`` without ``updatedInput`` and ``ask``).
- Gemini CLI: ``docs/hooks/reference.md`` (base input schema, ``BeforeTool``).
- Cursor: its agent hooks documentation (``beforeShellExecution``,
  ``beforeMCPExecution``, ``beforeReadFile``: ``permission``, ``user_message``,
  ``agent_message``).
- Cline: its hook reference (``PreToolUse`` input, ``cancel``/``errorMessage``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry_core.hook.actions import action_facts
from registry_core.hook.formats import FORMATS, Decision, HookEvent, hook_format
from registry_core.hook.tool_call import HookInputError

CLAUDE_PRE = {
    "session_id": "abc-123",
    "transcript_path": "/home/u/.claude/projects/p/abc.jsonl",
    "cwd": "/home/u/p",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "npm test", "description": "Run the tests"},
    "tool_use_id": "toolu_1",
}
CLAUDE_PERMISSION = {
    "session_id": "abc-123",
    "transcript_path": "/home/u/.claude/projects/p/abc.jsonl",
    "cwd": "/home/u/p",
    "permission_mode": "default",
    "hook_event_name": "PermissionRequest",
    "tool_name": "Write",
    "tool_input": {"file_path": "/home/u/p/notes.md", "content": "hi\n"},
    "permission_suggestions": [],
}
CODEX_PRE = {
    "session_id": "0199a0c4-5b3e-7a51-9b7b-1f0c8f1e2d3a",
    "transcript_path": None,
    "cwd": "/home/u/p",
    "hook_event_name": "PreToolUse",
    "model": "gpt-5-codex",
    "permission_mode": "default",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build"},
    "tool_use_id": "call_1",
}
CODEX_PERMISSION = {
    "session_id": "0199a0c4-5b3e-7a51-9b7b-1f0c8f1e2d3a",
    "turn_id": "turn-7",
    "transcript_path": "/home/u/.codex/sessions/s.jsonl",
    "cwd": "/home/u/p",
    "hook_event_name": "PermissionRequest",
    "model": "gpt-5-codex",
    "permission_mode": "default",
    "tool_name": "Bash",
    "tool_input": {"command": "git push", "description": "Push the branch"},
}
GEMINI = {
    "session_id": "s-42",
    "transcript_path": "/home/u/.gemini/tmp/t.json",
    "cwd": "/home/u/p",
    "hook_event_name": "BeforeTool",
    "timestamp": "2026-12-04T10:00:00.000Z",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "make deploy", "description": "Deploy"},
}
CURSOR_SHELL = {
    "hook_event_name": "beforeShellExecution",
    "conversation_id": "conv-123",
    "generation_id": "gen-456",
    "workspace_roots": ["/home/u/p"],
    "command": "npm install express",
    "cwd": "/home/u/p",
}
CURSOR_MCP = {
    "hook_event_name": "beforeMCPExecution",
    "conversation_id": "conv-123",
    "generation_id": "gen-456",
    "workspace_roots": ["/home/u/p"],
    "tool_name": "database_query",
    "tool_input": '{"query": "SELECT * FROM users"}',
    "command": "npx mcp-server",
}
CURSOR_READ = {
    "hook_event_name": "beforeReadFile",
    "conversation_id": "conv-123",
    "generation_id": "gen-456",
    "workspace_roots": ["/home/u/p"],
    "file_path": "/home/u/p/secrets.env",
    "content": "API_KEY=x",
}
CLINE = {
    "clineVersion": "3.36.0",
    "hookName": "PreToolUse",
    "timestamp": "1733306400000",
    "taskId": "task-9",
    "workspaceRoots": ["/home/u/p"],
    "userId": "u-1",
    "preToolUse": {
        "toolName": "write_to_file",
        "parameters": {"path": "/home/u/p/src/a.ts", "content": "export {}\n"},
    },
}


def _parse(name: str, doc: dict[str, Any], agent: str | None = None) -> HookEvent:
    return hook_format(name).parse(json.dumps(doc), agent)


def _answer(name: str, event: HookEvent | None, decision: Decision | None) -> Any:
    answer = hook_format(name).answer(event, decision, "because")
    return (json.loads(answer.stdout) if answer.stdout else None), answer.exit_code


@pytest.mark.parametrize(
    ("name", "doc", "agent", "tool", "inp"),
    [
        ("claude-code", CLAUDE_PRE, "claude-code", "Bash", CLAUDE_PRE["tool_input"]),
        ("claude-code", CLAUDE_PERMISSION, "claude-code", "Write", CLAUDE_PERMISSION["tool_input"]),
        ("codex", CODEX_PRE, "codex", "Bash", {"command": "rm -rf build"}),
        ("codex", CODEX_PERMISSION, "codex", "Bash", CODEX_PERMISSION["tool_input"]),
        ("gemini", GEMINI, "gemini-cli", "Bash", GEMINI["tool_input"]),
        ("cursor", CURSOR_SHELL, "cursor", "Bash", {"command": "npm install express"}),
        ("cursor", CURSOR_MCP, "cursor", "database_query", {"query": "SELECT * FROM users"}),
        ("cursor", CURSOR_READ, "cursor", "Read", {"file_path": "/home/u/p/secrets.env"}),
        (
            "cline",
            CLINE,
            "cline",
            "Write",
            {"file_path": "/home/u/p/src/a.ts", "content": "export {}\n"},
        ),
    ],
)
def test_each_agents_input_becomes_one_call_in_facts_vocabulary(
    name: str, doc: dict[str, Any], agent: str, tool: str, inp: dict[str, Any]
) -> None:
    event = _parse(name, doc)
    assert (event.call.agent, event.call.tool, event.call.input) == (agent, tool, inp)
    assert event.call.cwd == "/home/u/p"


def test_the_agents_real_name_is_kept_unless_overridden() -> None:
    assert _parse("codex", CODEX_PRE).call.agent == "codex"
    assert _parse("codex", CODEX_PRE, agent="codex-work").call.agent == "codex-work"
    with pytest.raises(HookInputError, match="--agent"):
        _parse("codex", CODEX_PRE, agent="\x1b[31m")


def test_mapped_calls_are_judged_like_claude_codes() -> None:
    write = {"file_path": "/home/u/p/x", "content": "1"}
    gemini = _parse("gemini", {**GEMINI, "tool_name": "write_file", "tool_input": write})
    facts = action_facts(gemini.call.tool, gemini.call.input, gemini.call.cwd)
    assert facts.writes and facts.path == "/home/u/p/x"
    shell = {"toolName": "execute_command", "parameters": {"command": "ls -la"}}
    cline = _parse("cline", {**CLINE, "preToolUse": shell})
    assert action_facts(cline.call.tool, cline.call.input, cline.call.cwd).command == "ls -la"


@pytest.mark.parametrize(
    ("name", "doc", "field"),
    [
        ("claude-code", {**CLAUDE_PRE, "hook_event_name": "PostToolUse"}, "hook_event_name"),
        ("claude-code", {**CLAUDE_PRE, "tool_input": "ls"}, "tool_input"),
        ("claude-code", {**CLAUDE_PRE, "cwd": "relative"}, "cwd"),
        ("codex", {**CODEX_PRE, "tool_name": None}, "tool_name"),
        ("gemini", {**GEMINI, "hook_event_name": "AfterTool"}, "hook_event_name"),
        ("cursor", {**CURSOR_SHELL, "command": 3}, "command"),
        ("cursor", {**CURSOR_MCP, "tool_input": "{not json"}, "tool_input"),
        ("cline", {**CLINE, "preToolUse": []}, "preToolUse"),
        ("cline", {**CLINE, "workspaceRoots": ["relative"]}, "workspaceRoots"),
    ],
)
def test_bad_input_names_the_field(name: str, doc: dict[str, Any], field: str) -> None:
    with pytest.raises(HookInputError, match=field):
        _parse(name, doc)


def test_claude_code_answers_in_the_event_it_was_asked() -> None:
    pre = _parse("claude-code", CLAUDE_PRE)
    assert _answer("claude-code", pre, "allow") == (
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "because",
            }
        },
        0,
    )
    assert _answer("claude-code", pre, None) == (None, 0)
    permission = _parse("claude-code", CLAUDE_PERMISSION)
    assert _answer("claude-code", permission, "allow") == (
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                "decision": {"behavior": "allow"}}},
        0,
    )  # fmt: skip
    denied, _ = _answer("claude-code", permission, "deny")
    assert denied["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "because"}
    # ask / pass: no output, Claude Code shows its own permission dialog
    assert _answer("claude-code", permission, "ask") == (None, 0)


def test_codex_pre_tool_use_only_ever_prints_a_deny() -> None:
    pre = _parse("codex", CODEX_PRE)
    for decision in ("allow", "ask", None):
        assert _answer("codex", pre, decision) == (None, 0)  # type: ignore[arg-type]
    out, _ = _answer("codex", pre, "deny")
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == "because"
    assert "updatedInput" not in out["hookSpecificOutput"]


def test_codex_permission_request_allows_and_denies() -> None:
    permission = _parse("codex", CODEX_PERMISSION)
    allowed, _ = _answer("codex", permission, "allow")
    assert allowed == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }
    denied, _ = _answer("codex", permission, "deny")
    # Codex fails closed on updatedInput, updatedPermissions or interrupt: none is sent.
    assert set(denied["hookSpecificOutput"]["decision"]) == {"behavior", "message"}
    assert _answer("codex", permission, "ask") == (None, 0)


def test_gemini_cli_reads_decision_and_reason() -> None:
    event = _parse("gemini", GEMINI)
    assert _answer("gemini", event, "deny") == ({"decision": "deny", "reason": "because"}, 0)
    assert _answer("gemini", event, "allow") == ({"decision": "allow", "reason": "because"}, 0)
    assert _answer("gemini", event, "ask") == ({}, 0)
    assert _answer("gemini", event, None) == ({}, 0)


def test_cursor_answers_permission_with_messages_for_both_sides() -> None:
    shell = _parse("cursor", CURSOR_SHELL)
    assert _answer("cursor", shell, "deny") == (
        {"permission": "deny", "user_message": "because", "agent_message": "because"},
        0,
    )
    assert _answer("cursor", shell, None)[0]["permission"] == "ask"
    read = _parse("cursor", CURSOR_READ)
    assert _answer("cursor", read, "allow") == ({"permission": "allow"}, 0)


def test_cline_cancels_only_on_deny() -> None:
    event = _parse("cline", CLINE)
    assert _answer("cline", event, "deny") == ({"cancel": True, "errorMessage": "because"}, 0)
    for decision in ("allow", "ask", None):
        assert _answer("cline", event, decision) == ({"cancel": False}, 0)  # type: ignore[arg-type]


def test_the_generic_contract_exits_77_on_deny() -> None:
    event = _parse("json", {"tool": "shell", "input": {"command": "x"}, "cwd": "/a"})
    assert (event.call.agent, event.call.tool, event.call.cwd) == ("agent", "shell", "/a")
    assert _answer("json", event, "deny") == ({"decision": "deny", "reason": "because"}, 77)
    assert _answer("json", event, None) == ({"decision": "ask", "reason": "because"}, 0)
    with pytest.raises(HookInputError, match="'tool'"):
        _parse("json", {"input": {}})


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_unreadable_input_gets_each_agents_safe_answer(name: str) -> None:
    contract = hook_format(name)
    with pytest.raises(HookInputError):
        contract.parse("not json")
    answer = contract.answer(None, "ask", "ollie-approve: unreadable input")
    assert answer.exit_code == 0
    if answer.stdout:
        out = json.loads(answer.stdout)
        assert "allow" not in json.dumps(out)  # never a silent allow


def test_an_unknown_format_is_named() -> None:
    with pytest.raises(HookInputError, match="windsurf"):
        hook_format("windsurf")
