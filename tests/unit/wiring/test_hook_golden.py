"""Each agent's documented hook input through `ollie-approve --format X`, the command the
installed hooks run, with no broker to ask: every agent gets its own safe answer (its
own prompt, never a silent allow).

Where each input comes from (the agent's documented example, our paths and values):
- Claude Code: its hooks reference, "PreToolUse input".
- Codex: ``codex-rs/hooks/schema/generated/permission-request.command.input.schema.json``.
- Gemini CLI: ``docs/hooks/reference.md`` (base input, ``BeforeTool``).
- Cursor: its agent hooks documentation, ``beforeShellExecution``.
- Cline: ``.clinerules/hooks/README.md`` (``PreToolUse`` input).
- OpenCode: what ``resources/agents/opencode/ollie-approve.js`` sends (``--json``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.cli import approve

CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "claude-code",
        {
            "session_id": "abc123",
            "transcript_path": "/home/u/.claude/projects/p/00893aaf.jsonl",
            "cwd": "/home/u/p",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build", "description": "Clean"},
            "tool_use_id": "toolu_01",
        },
        '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", ',
    ),
    (
        "codex",
        {
            "session_id": "0199a0c4-5b3e-7a51-9b7b-1f0c8f1e2d3a",
            "turn_id": "turn-1",
            "transcript_path": None,
            "cwd": "/home/u/p",
            "hook_event_name": "PermissionRequest",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "tool_name": "Bash",
            "tool_input": {"command": "git push --force"},
        },
        "",
    ),
    (
        "gemini",
        {
            "session_id": "s-1",
            "transcript_path": "/home/u/.gemini/tmp/chats/s-1.json",
            "cwd": "/home/u/p",
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-12-04T10:00:00.000Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": "make deploy"},
        },
        "{}\n",
    ),
    (
        "cursor",
        {
            "hook_event_name": "beforeShellExecution",
            "conversation_id": "668320d2-2fd8-4888-b33c-2a466fec86e7",
            "generation_id": "490b90b7-a2ce-4c2c-bb76-cb77b125df2f",
            "workspace_roots": ["/home/u/p"],
            "command": "npm publish",
            "cwd": "/home/u/p",
        },
        '{"permission": "ask", ',
    ),
    (
        "cline",
        {
            "clineVersion": "3.36.0",
            "hookName": "PreToolUse",
            "timestamp": "1736380800000",
            "taskId": "1736380800000",
            "workspaceRoots": ["/home/u/p"],
            "userId": "u",
            "preToolUse": {"toolName": "execute_command", "parameters": {"command": "make"}},
        },
        '{"cancel": false}\n',
    ),
    (
        "json",
        {
            "agent": "opencode",
            "tool": "Bash",
            "input": {"command": "rm -rf dist"},
            "cwd": "/home/u/p",
            "session": "ses_1",
        },
        '{"decision": "ask", ',
    ),
]


@pytest.mark.parametrize(("fmt", "doc", "answer"), CASES, ids=[c[0] for c in CASES])
def test_no_broker_means_each_agents_own_prompt(
    tmp_path: Path, fmt: str, doc: dict[str, Any], answer: str
) -> None:
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "OLLIE_ELEVATE_SOCKET": str(tmp_path / "no-broker.sock"),
    }
    out = io.StringIO()
    code = approve.run(["--format", fmt], io.StringIO(json.dumps(doc)), out, env)
    assert code == 0
    assert out.getvalue().startswith(answer)
    if answer:
        json.loads(out.getvalue())
    if answer == "":
        assert out.getvalue() == ""
