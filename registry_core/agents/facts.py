"""A coding agent's tool call as an action a person can judge (and remember).

Claude Code's tools are known by name (``Bash``, ``Edit``, ``MultiEdit``,
``Write``, ``NotebookEdit``, ``Read``, ``Glob``, ``Grep``, ``LS``,
``WebFetch``, ``WebSearch``...); any other tool (another agent's, an MCP
tool ``mcp__server__tool``) is described generically from ``command``,
``file_path``/``path`` and ``url`` inputs when present.

Edits are shown as a unified diff of the file before and after (the file is
read, bounded; a missing file is a new one).  Long texts are clipped with a
visible marker so the request fits the broker's frame limit; the summary
names the clip.  The suggested remember pattern is the narrowest useful
one: the program of a simple command, the file itself for an edit, the
exact URL for a fetch, else the exact summary.
"""

from __future__ import annotations

import difflib
import os
import posixpath
from dataclasses import dataclass
from typing import Any

from registry_core.elevation.actions import program_of
from registry_core.elevation.messages import ActionDisplay, PatternKind

MAX_DETAIL = 24 * 1024
MAX_INPUT_STRING = 2048
MAX_FILE = 1024 * 1024
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoWrite", "TodoRead"})
NETWORK_TOOLS = frozenset({"WebFetch", "WebSearch"})
SHELL_TOOLS = frozenset({"Bash", "BashOutput", "KillShell", "KillBash"})


@dataclass(frozen=True)
class ActionFacts:
    tool: str
    summary: str
    cwd: str
    input: dict[str, Any]
    detail: str | None = None
    display: ActionDisplay | None = None
    command: str | None = None
    path: str | None = None
    url: str | None = None
    pattern_kind: PatternKind = PatternKind.EXACT
    pattern: str = ""

    @property
    def writes(self) -> bool:
        return self.tool in EDIT_TOOLS

    @property
    def inside_cwd(self) -> bool:
        """The action's file is the working directory or beneath it."""
        if self.path is None:
            return False
        root = posixpath.normpath(self.cwd).rstrip("/") + "/"
        return (posixpath.normpath(self.path) + "/").startswith(root)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


def clip_input(value: Any, depth: int = 0) -> Any:
    """The tool input with every long string clipped (what the dialog's Input box shows)."""
    if isinstance(value, str):
        return clip(value, MAX_INPUT_STRING)
    if depth > 8:
        return "[…]"
    if isinstance(value, dict):
        return {str(k): clip_input(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_input(v, depth + 1) for v in value[:200]]
    return value


def _text(inp: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = inp.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _absolute(path: str | None, cwd: str) -> str | None:
    if path is None or "\x00" in path:
        return None
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(cwd, path))


def _read_file(path: str) -> str | None:
    """The file's text, or ``None`` when it does not exist (or is unreadable/huge/binary)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        data = os.read(fd, MAX_FILE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE or b"\x00" in data:
        return None
    return data.decode("utf-8", errors="replace")


def _apply_edits(before: str, edits: list[dict[str, Any]]) -> str:
    after = before
    for item in edits:
        old, new = item.get("old_string"), item.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            continue
        after = after.replace(old, new) if item.get("replace_all") else after.replace(old, new, 1)
    return after


def edit_diff(tool: str, path: str, inp: dict[str, Any]) -> str:
    """A unified diff of what the edit would do to ``path``."""
    before = _read_file(path)
    if tool == "Write":
        content = inp.get("content")
        after = content if isinstance(content, str) else ""
    elif tool == "MultiEdit":
        edits = [e for e in inp.get("edits", []) if isinstance(e, dict)]
        after = _apply_edits(before or "", edits)
    elif tool == "NotebookEdit":
        source = inp.get("new_source")
        return f"notebook cell ({inp.get('edit_mode', 'replace')}):\n" + (
            source if isinstance(source, str) else ""
        )
    else:
        after = _apply_edits(before or "", [inp])
        if before is not None and after == before:
            # old_string not found as-is: show the replacement itself.
            old, new = str(inp.get("old_string", "")), str(inp.get("new_string", ""))
            before, after = old, new
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else path,
        tofile=path,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


def action_facts(tool: str, tool_input: Any, cwd: str) -> ActionFacts:
    """Describe one tool call of an agent (see the module docstring)."""
    inp: dict[str, Any] = tool_input if isinstance(tool_input, dict) else {}
    command = _text(inp, "command", "cmd")
    path = _absolute(_text(inp, "file_path", "notebook_path", "path"), cwd)
    url = _text(inp, "url")
    shown = clip_input(inp)
    if command is not None and (tool in SHELL_TOOLS or path is None):
        program = program_of(command)
        return ActionFacts(
            tool=tool,
            summary=clip(" ".join(command.split()), 300),
            cwd=cwd,
            input=shown,
            detail=clip(command, MAX_DETAIL),
            display=ActionDisplay.COMMAND,
            command=command,
            pattern_kind=PatternKind.PROGRAM if program else PatternKind.EXACT,
            pattern=program or command,
        )
    if tool in EDIT_TOOLS and path is not None:
        summary = f"{'write' if tool == 'Write' else 'edit'} {path}"
        return ActionFacts(
            tool=tool,
            summary=summary,
            cwd=cwd,
            input=shown,
            detail=clip(edit_diff(tool, path, inp), MAX_DETAIL),
            display=ActionDisplay.DIFF,
            path=path,
            pattern_kind=PatternKind.PATH,
            pattern=path,
        )
    if url is not None:
        summary = f"fetch {url}"
        return ActionFacts(
            tool=tool,
            summary=summary,
            cwd=cwd,
            input=shown,
            detail=_text(inp, "prompt"),
            display=ActionDisplay.TEXT,
            url=url,
            pattern_kind=PatternKind.EXACT,
            pattern=summary,
        )
    if path is not None:
        summary = f"{tool} {path}"
        return ActionFacts(
            tool=tool,
            summary=summary,
            cwd=cwd,
            input=shown,
            path=path,
            pattern_kind=PatternKind.PATH,
            pattern=path,
        )
    query = _text(inp, "query", "pattern", "description", "prompt")
    summary = f"{tool}: {query}" if query else tool
    return ActionFacts(
        tool=tool,
        summary=summary,
        cwd=cwd,
        input=shown,
        pattern_kind=PatternKind.EXACT,
        pattern=summary,
    )
