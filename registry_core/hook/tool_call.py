"""The call a hook hands ``ollie-approve``, and Ollie's own generic JSON contract.

Every agent's contract (:mod:`registry_core.hook.formats`) reads its input
into a :class:`ToolCall`; the helpers here check the fields they share.  The
generic contract (``ollie-approve --format json``), for any other agent: stdin
``{"agent": "my-agent", "tool": "run_shell_command", "input": {...},
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


def json_object(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookInputError(
            f"stdin: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(doc, dict):
        raise HookInputError("stdin: expected a JSON object")
    return doc


def short_label(value: Any) -> str | None:
    return value if isinstance(value, str) and _LABEL_RE.fullmatch(value) else None


def absolute_cwd(value: Any, field: str) -> str:
    if value is None:
        return os.getcwd()
    if not isinstance(value, str) or not value.startswith("/") or "\x00" in value:
        raise HookInputError(f"stdin: {field!r} must be an absolute path")
    return value


def tool_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value):
        raise HookInputError(f"stdin: {field!r} must be a tool name, got {value!r}")
    return value


def parse_generic(text: str, agent: str | None = None) -> ToolCall:
    doc = json_object(text)
    tool_input = doc.get("input", {})
    if not isinstance(tool_input, dict):
        raise HookInputError("stdin: 'input' must be an object")
    name = agent or doc.get("agent") or "agent"
    if short_label(name) is None:
        raise HookInputError(f"stdin: 'agent' must be a short printable name, got {name!r}")
    return ToolCall(
        agent=name,
        tool=tool_name(doc.get("tool"), "tool"),
        input=tool_input,
        cwd=absolute_cwd(doc.get("cwd"), "cwd"),
        session=short_label(doc.get("session")),
    )
