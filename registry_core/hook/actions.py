"""A coding agent's tool call as an action a person can judge (and remember).

Claude Code's tools are known by name (``Bash``, ``Edit``, ``MultiEdit``,
``Write``, ``NotebookEdit``, ``Read``, ``Glob``, ``Grep``, ``LS``,
``WebFetch``, ``WebSearch``...); any other tool (another agent's, an MCP
tool ``mcp__server__tool``) is described generically from ``command``,
``file_path``/``path`` and ``url`` inputs when present.

Paths are real paths (:mod:`.realpath`): symbolic links are followed as the
kernel would, so an edit of ``NOTES.md -> ~/.bashrc`` is an edit of
``~/.bashrc`` — its summary shows both (``NOTES.md → ~/.bashrc``), its diff
is against the target's content, its pattern and the working-directory test
use the target.  A path whose file cannot be told is marked
(:attr:`ActionFacts.path_problem`) and never judged.

Edits are shown as a unified diff of the file before and after (the file is
read, bounded, through no symbolic link; a missing file is a new one, an
existing one that cannot be shown says so).  Long texts are clipped with a
visible marker so the request fits the broker's frame limit; the summary
names the clip.  The suggested remember pattern is the narrowest useful
one: the program of a simple command, the file itself for an edit, the
exact URL for a fetch, else the exact summary.
"""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass
from typing import Any

from registry_core.broker.remember.action_rules import program_of
from registry_core.broker.wire.messages import ActionDisplay, PatternKind
from registry_core.hook.realpath import RealPath, Unresolvable, is_beneath, real_path, resolve

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
    real_cwd: str | None = None
    """The working directory's real path (``None``: it cannot be told)."""
    names: int = 1
    """Hard links of the file at :attr:`path` (its other names may be anywhere)."""
    path_problem: str | None = None
    """Why the file the agent named cannot be told (a link loop...); ``None`` when it can."""

    @property
    def writes(self) -> bool:
        return self.tool in EDIT_TOOLS

    @property
    def inside_cwd(self) -> bool:
        """The action's real file is the real working directory or beneath it, and has
        no second name (a hard link may be anywhere on the same file system)."""
        if self.path is None or self.path_problem is not None or self.real_cwd is None:
            return False
        return self.names == 1 and is_beneath(self.path, self.real_cwd)


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


def _open_without_links(path: str) -> int:
    """A read descriptor of real ``path``, opened through no symbolic link (one planted
    since the path was resolved fails with ``ELOOP``/``ENOTDIR``)."""
    parts = [part for part in path.split("/") if part]
    if not parts:
        raise IsADirectoryError(21, "Is a directory")
    directory = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            step = os.open(
                part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory
            )
            os.close(directory)
            directory = step
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(parts[-1], flags, dir_fd=directory)
    finally:
        os.close(directory)


def _read_file(path: str) -> tuple[str | None, str | None]:
    """(text, ``None``); (``None``, ``None``) when there is no such file; (``None``, why)
    when it exists but cannot be shown (unreadable, not a regular file, huge, binary)."""
    try:
        fd = _open_without_links(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file"
        data = os.read(fd, MAX_FILE + 1)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    finally:
        os.close(fd)
    if len(data) > MAX_FILE:
        return None, f"larger than {MAX_FILE // 1024} KiB"
    if b"\x00" in data:
        return None, "binary"
    return data.decode("utf-8", errors="replace"), None


def _apply_edits(before: str, edits: list[dict[str, Any]]) -> str:
    after = before
    for item in edits:
        old, new = item.get("old_string"), item.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            continue
        after = after.replace(old, new) if item.get("replace_all") else after.replace(old, new, 1)
    return after


def edit_diff(tool: str, path: str, inp: dict[str, Any]) -> str:
    """A unified diff of what the edit would do to real ``path``."""
    before, unseen = _read_file(path)
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
        fromfile=(
            path
            if before is not None
            else "/dev/null"
            if unseen is None
            else f"{path} (an existing file, {unseen}: its content is not shown)"
        ),
        tofile=path,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


def _shown_path(where: RealPath) -> str:
    """The path as the dialog's summary shows it: the link's name and its target when
    they differ, and a file's count of names when it has more than one."""
    shown = f"{where.named} → {where.real}" if where.through_link else where.real
    if where.names > 1:
        shown += f" (one of {where.names} names of this file: the others may be anywhere)"
    return shown


def _unresolvable(tool: str, named: str, cwd: str, shown: dict[str, Any], why: str) -> ActionFacts:
    """The facts of an action whose file cannot be told: marked, never judged by its path."""
    summary = clip(f"{tool} {named}", 300)
    return ActionFacts(
        tool=tool,
        summary=summary,
        cwd=cwd,
        input=shown,
        pattern_kind=PatternKind.EXACT,
        pattern=summary,
        path_problem=why,
    )


def action_facts(tool: str, tool_input: Any, cwd: str) -> ActionFacts:
    """Describe one tool call of an agent (see the module docstring)."""
    inp: dict[str, Any] = tool_input if isinstance(tool_input, dict) else {}
    command = _text(inp, "command", "cmd")
    named = _text(inp, "file_path", "notebook_path", "path")
    if named is not None and "\x00" in named:
        named = None
    url = _text(inp, "url")
    shown = clip_input(inp)
    if command is not None and (tool in SHELL_TOOLS or named is None):
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
    try:
        real_cwd: str | None = real_path(cwd)
    except Unresolvable:
        real_cwd = None  # nothing is inside a directory that cannot be told
    where: RealPath | None = None
    if named is not None:
        try:
            where = resolve(named, cwd)
        except Unresolvable as exc:
            return _unresolvable(tool, named, cwd, shown, str(exc))
    path = None if where is None else where.real
    if tool in EDIT_TOOLS and where is not None and path is not None:
        summary = f"{'write' if tool == 'Write' else 'edit'} {_shown_path(where)}"
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
            real_cwd=real_cwd,
            names=where.names,
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
    if where is not None and path is not None:
        summary = f"{tool} {_shown_path(where)}"
        return ActionFacts(
            tool=tool,
            summary=summary,
            cwd=cwd,
            input=shown,
            path=path,
            pattern_kind=PatternKind.PATH,
            pattern=path,
            real_cwd=real_cwd,
            names=where.names,
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
