"""The hook contracts ``ollie-approve`` speaks: Claude Code's ``PreToolUse``, and generic JSON.

Claude Code (its documented hook contract) runs a ``PreToolUse`` command hook
with one JSON object on stdin::

    {"session_id": "...", "transcript_path": "...", "cwd": "/abs/project",
     "permission_mode": "default", "hook_event_name": "PreToolUse",
     "tool_name": "Bash", "tool_input": {"command": "npm test"}, "tool_use_id": "..."}

and reads, on exit status 0, a JSON object from stdout::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                            "permissionDecision": "allow" | "deny" | "ask",
                            "permissionDecisionReason": "..."}}

``allow`` skips Claude Code's own prompt, ``deny`` blocks the call (Claude is
told the reason), ``ask`` shows Claude Code's own prompt (with the reason).
Printing nothing leaves the call to Claude Code's normal permission flow
(what a ``pass`` scope does).

The generic contract (``ollie-approve --json``), for any other agent: stdin
``{"agent": "gemini-cli", "tool": "run_shell_command", "input": {...},
"cwd": "/abs", "session": "..."}`` (``agent`` and ``cwd`` optional), stdout
``{"decision": "allow" | "deny" | "ask", "reason": "..."}``, exit status 0,
or 77 for ``deny``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from registry_core.errors import AgentActionError

CLAUDE_CODE = "claude-code"
EVENT = "PreToolUse"
_LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+ -]{0,127}")


class HookInputError(AgentActionError):
    """The hook's stdin is not what the contract says."""


@dataclass(frozen=True)
class ToolCall:
    agent: str
    tool: str
    input: dict[str, Any]
    cwd: str
    session: str | None = None


def _object(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookInputError(
            f"stdin: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(doc, dict):
        raise HookInputError("stdin: expected a JSON object")
    return doc


def _label(value: Any) -> str | None:
    return value if isinstance(value, str) and _LABEL_RE.fullmatch(value) else None


def _cwd(value: Any, field: str) -> str:
    if value is None:
        return os.getcwd()
    if not isinstance(value, str) or not value.startswith("/") or "\x00" in value:
        raise HookInputError(f"stdin: {field!r} must be an absolute path")
    return value


def _tool(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value):
        raise HookInputError(f"stdin: {field!r} must be a tool name, got {value!r}")
    return value


def parse_claude(text: str, agent: str = CLAUDE_CODE) -> ToolCall:
    doc = _object(text)
    event = doc.get("hook_event_name")
    if event != EVENT:
        raise HookInputError(f"stdin: 'hook_event_name' must be {EVENT!r}, got {event!r}")
    tool_input = doc.get("tool_input", {})
    if not isinstance(tool_input, dict):
        raise HookInputError("stdin: 'tool_input' must be an object")
    return ToolCall(
        agent=agent,
        tool=_tool(doc.get("tool_name"), "tool_name"),
        input=tool_input,
        cwd=_cwd(doc.get("cwd"), "cwd"),
        session=_label(doc.get("session_id")),
    )


def parse_generic(text: str, agent: str | None = None) -> ToolCall:
    doc = _object(text)
    tool_input = doc.get("input", {})
    if not isinstance(tool_input, dict):
        raise HookInputError("stdin: 'input' must be an object")
    name = agent or doc.get("agent") or "agent"
    if _label(name) is None:
        raise HookInputError(f"stdin: 'agent' must be a short printable name, got {name!r}")
    return ToolCall(
        agent=name,
        tool=_tool(doc.get("tool"), "tool"),
        input=tool_input,
        cwd=_cwd(doc.get("cwd"), "cwd"),
        session=_label(doc.get("session")),
    )


def claude_answer(decision: str | None, reason: str) -> str:
    """Claude Code's hook output; ``None`` (no decision) prints nothing."""
    if decision is None:
        return ""
    output = {
        "hookSpecificOutput": {
            "hookEventName": EVENT,
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return json.dumps(output) + "\n"


def generic_answer(decision: str, reason: str) -> str:
    return json.dumps({"decision": decision, "reason": reason}) + "\n"
