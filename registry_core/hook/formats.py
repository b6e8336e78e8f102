"""Each coding agent's own hook contract: what it sends ``ollie-approve``, what it honours back.

One :class:`HookFormat` per agent reads the agent's JSON (stdin) into a
:class:`HookEvent` -- the agent's call in the vocabulary of
:mod:`registry_core.hook.actions` (``Bash`` with ``command``, ``Write``/``Edit``
with ``file_path``, ``Read``...), so every agent's actions are judged, shown and
remembered alike -- and writes the decision back the way that agent reads it
(:meth:`HookFormat.answer`).  A decision is ``allow``, ``deny``, ``ask`` (the
agent's own prompt: Ollie could not get an answer) or ``None`` (the rules file
says ``pass``: leave the call to the agent's normal flow).

Each agent honours only some answers; what it ignores is never relied on
(``docs/hooks.md`` has one section per agent, with where each contract was
read):

- Claude Code: ``PreToolUse`` (allow / deny / ask) and ``PermissionRequest``
  (allow / deny; no output shows Claude Code's own dialog).
- Codex: ``PermissionRequest`` (allow / deny; no output: Codex's own approval)
  and ``PreToolUse``, where Codex acts on ``deny`` only -- ``allow`` and ``ask``
  are rejected as unsupported -- so nothing but a deny is ever printed there.
- Gemini CLI: ``BeforeTool``; ``decision`` allow / deny, ``{}`` for no decision.
- Cursor: ``beforeShellExecution``, ``beforeMCPExecution``, ``beforeReadFile`` and
  ``preToolUse``; ``permission`` allow / deny / ask.
- Cline: ``PreToolUse`` scripts; ``cancel`` true blocks, false lets Cline go on.
- ``json``: Ollie's own generic contract (:mod:`registry_core.hook.tool_call`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from registry_core.hook.tool_call import (
    HookInputError,
    ToolCall,
    absolute_cwd,
    json_object,
    parse_generic,
    short_label,
    tool_name,
)

Decision = Literal["allow", "deny", "ask"]

EXIT_DENIED = 77


@dataclass(frozen=True)
class HookEvent:
    """One parsed hook invocation: the call (in facts' vocabulary) and the agent's event."""

    call: ToolCall
    event: str
    native_tool: str


@dataclass(frozen=True)
class HookAnswer:
    stdout: str
    exit_code: int = 0


def _json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc) + "\n"


def _event(doc: Mapping[str, Any], field: str, allowed: tuple[str, ...]) -> str:
    event = doc.get(field)
    if event not in allowed:
        raise HookInputError(f"stdin: {field!r} must be one of {list(allowed)}, got {event!r}")
    assert isinstance(event, str)
    return event


def _input(value: Any, field: str) -> dict[str, Any]:
    """A tool's arguments: an object, or a JSON text of one (Cursor's MCP input)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise HookInputError(f"stdin: {field!r} is not a JSON object: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise HookInputError(f"stdin: {field!r} must be an object")
    return value


def _rename(inp: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``inp`` with the agent's argument names replaced by facts' ones (others kept)."""
    return {names.get(key, key): value for key, value in inp.items()}


# An agent's tool -> (facts' tool, argument renames).  Tools not listed keep their
# own name and arguments and are described generically (command, path, url).
ToolMap = Mapping[str, tuple[str, Mapping[str, str]]]

GEMINI_TOOLS: ToolMap = {
    "run_shell_command": ("Bash", {}),
    "write_file": ("Write", {}),
    "replace": ("Edit", {}),
    "read_file": ("Read", {"absolute_path": "file_path"}),
    "web_fetch": ("WebFetch", {}),
}
CLINE_TOOLS: ToolMap = {
    "execute_command": ("Bash", {}),
    "write_to_file": ("Write", {"path": "file_path"}),
    "read_file": ("Read", {"path": "file_path"}),
}
CURSOR_TOOLS: ToolMap = {
    "Shell": ("Bash", {}),
    "Write": ("Write", {"path": "file_path", "contents": "content"}),
    "Read": ("Read", {"path": "file_path"}),
}


def _mapped(tools: ToolMap, name: str, inp: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if name in tools:
        canonical, renames = tools[name]
        return canonical, _rename(inp, renames)
    return name, inp


class HookFormat:
    """One agent's contract; subclasses say how to read and how to answer."""

    name: str = ""
    agent: str = ""

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        raise NotImplementedError

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        raise NotImplementedError

    def label(self, agent: str | None) -> str:
        name = agent or self.agent
        if short_label(name) is None:
            raise HookInputError(f"--agent must be a short printable name, got {name!r}")
        return name


class ClaudeCode(HookFormat):
    name = agent = "claude-code"
    events: tuple[str, ...] = ("PreToolUse", "PermissionRequest")

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        doc = json_object(text)
        event = _event(doc, "hook_event_name", self.events)
        tool = tool_name(doc.get("tool_name"), "tool_name")
        call = ToolCall(
            agent=self.label(agent),
            tool=tool,
            input=_input(doc.get("tool_input"), "tool_input"),
            cwd=absolute_cwd(doc.get("cwd"), "cwd"),
            session=short_label(doc.get("session_id")),
        )
        return HookEvent(call, event, tool)

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        name = event.event if event else "PreToolUse"
        if name == "PermissionRequest":
            return _permission_request(decision, reason)
        if decision is None:
            return HookAnswer("")
        return HookAnswer(
            _json(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": decision,
                        "permissionDecisionReason": reason,
                    }
                }
            )
        )


def _permission_request(decision: Decision | None, reason: str) -> HookAnswer:
    """``PermissionRequest`` (Claude Code and Codex): allow or deny; anything else prints
    nothing, and the agent shows its own approval prompt."""
    if decision not in ("allow", "deny"):
        return HookAnswer("")
    verdict: dict[str, Any] = {"behavior": decision}
    if decision == "deny":
        verdict["message"] = reason
    return HookAnswer(
        _json({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": verdict}})
    )


class Codex(ClaudeCode):
    name = agent = "codex"

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        if event is not None and event.event == "PermissionRequest":
            return _permission_request(decision, reason)
        # PreToolUse: Codex rejects allow (without updatedInput) and ask as unsupported
        # output; only a deny with a reason has an effect.  Anything else: no output.
        if decision != "deny":
            return HookAnswer("")
        return HookAnswer(
            _json(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": reason or "denied in Ollie",
                    }
                }
            )
        )


class Gemini(HookFormat):
    name = "gemini"
    agent = "gemini-cli"

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        doc = json_object(text)
        event = _event(doc, "hook_event_name", ("BeforeTool",))
        native = tool_name(doc.get("tool_name"), "tool_name")
        tool, inp = _mapped(GEMINI_TOOLS, native, _input(doc.get("tool_input"), "tool_input"))
        call = ToolCall(
            agent=self.label(agent),
            tool=tool,
            input=inp,
            cwd=absolute_cwd(doc.get("cwd"), "cwd"),
            session=short_label(doc.get("session_id")),
        )
        return HookEvent(call, event, native)

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        if decision in ("allow", "deny"):
            return HookAnswer(_json({"decision": decision, "reason": reason}))
        return HookAnswer("{}\n")  # no decision: Gemini CLI's own confirmation


class Cursor(HookFormat):
    name = agent = "cursor"
    events = ("beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse")

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        doc = json_object(text)
        event = _event(doc, "hook_event_name", self.events)
        roots = doc.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots else None
        cwd = absolute_cwd(doc.get("cwd") or root, "cwd")
        if event == "beforeShellExecution":
            command = doc.get("command")
            if not isinstance(command, str):
                raise HookInputError("stdin: 'command' must be a string")
            native, tool, inp = "shell", "Bash", {"command": command}
        elif event == "beforeReadFile":
            path = doc.get("file_path")
            if not isinstance(path, str):
                raise HookInputError("stdin: 'file_path' must be a string")
            native, tool, inp = "read", "Read", {"file_path": path}
        else:
            native = tool_name(doc.get("tool_name"), "tool_name")
            inp = _input(doc.get("tool_input"), "tool_input")
            tool, inp = (
                _mapped(CURSOR_TOOLS, native, inp)
                if event == "preToolUse"
                else (
                    native,
                    inp,
                )
            )
        call = ToolCall(
            agent=self.label(agent),
            tool=tool,
            input=inp,
            cwd=cwd,
            session=short_label(doc.get("conversation_id")),
        )
        return HookEvent(call, event, native)

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        permission = decision or "ask"  # "pass": Cursor's own prompt
        if event is not None and event.event == "beforeReadFile":
            return HookAnswer(_json({"permission": permission}))
        return HookAnswer(
            _json({"permission": permission, "user_message": reason, "agent_message": reason})
        )


class Cline(HookFormat):
    name = agent = "cline"

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        doc = json_object(text)
        event = _event(doc, "hookName", ("PreToolUse",))
        body = doc.get("preToolUse")
        if not isinstance(body, dict):
            raise HookInputError("stdin: 'preToolUse' must be an object")
        native = tool_name(body.get("toolName"), "preToolUse.toolName")
        tool, inp = _mapped(CLINE_TOOLS, native, _input(body.get("parameters"), "parameters"))
        roots = doc.get("workspaceRoots")
        root = roots[0] if isinstance(roots, list) and roots else None
        call = ToolCall(
            agent=self.label(agent),
            tool=tool,
            input=inp,
            cwd=absolute_cwd(root, "workspaceRoots"),
            session=short_label(doc.get("taskId")),
        )
        return HookEvent(call, event, native)

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        if decision == "deny":
            return HookAnswer(_json({"cancel": True, "errorMessage": reason}))
        return HookAnswer(_json({"cancel": False}))


class GenericJson(HookFormat):
    name = "json"
    agent = "agent"

    def parse(self, text: str, agent: str | None = None) -> HookEvent:
        call = parse_generic(text, agent)
        return HookEvent(call, "generic", call.tool)

    def answer(self, event: HookEvent | None, decision: Decision | None, reason: str) -> HookAnswer:
        verdict = decision or "ask"
        return HookAnswer(
            _json({"decision": verdict, "reason": reason}),
            EXIT_DENIED if verdict == "deny" else 0,
        )


FORMATS: dict[str, Callable[[], HookFormat]] = {
    "claude-code": ClaudeCode,
    "codex": Codex,
    "gemini": Gemini,
    "cursor": Cursor,
    "cline": Cline,
    "json": GenericJson,
}
"""Every contract ``ollie-approve --format`` speaks, by name."""


def hook_format(name: str) -> HookFormat:
    try:
        return FORMATS[name]()
    except KeyError:
        raise HookInputError(f"unknown hook format {name!r}: one of {sorted(FORMATS)}") from None
