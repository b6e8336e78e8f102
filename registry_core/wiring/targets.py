"""Which file each agent reads, and what Ollie puts there.

Where each location and shape was read (December 2026):

- Claude Code: its settings and hooks reference -- ``~/.claude/settings.json``,
  ``hooks.<Event>`` = ``[{"matcher", "hooks": [{"type": "command", "command",
  "timeout"}]}]``; MCP servers of the user scope in ``~/.claude.json``
  ``mcpServers`` (what ``claude mcp add --scope user`` writes; a project's
  ``.mcp.json`` has the same shape: ``--config .mcp.json``).
- Codex (``openai/codex``): MCP servers in ``$CODEX_HOME/config.toml``
  (default ``~/.codex``) as ``[mcp_servers.<name>]`` with ``command``, ``args``,
  ``env``; hooks in ``hooks.json`` beside it, read by
  ``codex-rs/hooks/src/engine/discovery.rs`` in Claude Code's shape.
- Gemini CLI (``google-gemini/gemini-cli``, ``docs/hooks/``, ``docs/tools/mcp-server.md``):
  ``~/.gemini/settings.json``, ``mcpServers`` and ``hooks.BeforeTool`` (timeouts in ms).
- Cursor (its MCP and agent hooks documentation): ``~/.cursor/mcp.json``
  ``mcpServers``; ``~/.cursor/hooks.json`` = ``{"version": 1, "hooks": {"<event>":
  [{"command"}]}}``.
- Cline (its hooks and MCP documentation, ``.clinerules/hooks/README.md``): a global
  hook is an executable named after its event in ``~/Documents/Cline/Hooks/``
  (``PreToolUse``, no extension); MCP servers in the VS Code extension's
  ``globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json``.
- OpenCode (``sst/opencode``, its config and plugin documentation):
  ``~/.config/opencode/opencode.json`` ``mcp.<name>`` = ``{"type": "local",
  "command": [...], "environment", "enabled"}``; global plugins are the files in
  ``~/.config/opencode/plugin/``.
- VS Code (its MCP servers documentation): a workspace's ``.vscode/mcp.json``
  ``servers.<name>`` = ``{"type": "stdio", "command", "args", "env"}``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from registry_core.wiring.edit import Edit, JsonEdit, OwnedFile, TomlTableEdit, WiringError

NAME = "ollie"
"""The MCP server's name in every client's configuration."""

APPROVE = "ollie-approve"
HOOK_TIMEOUT = 60  # seconds; above ollie-approve's own 55 s (docs/hooks.md)
AGENTS = ("claude-code", "codex", "gemini", "cursor", "cline", "opencode")
CLIENTS = ("claude-code", "codex", "gemini", "cursor", "vscode", "cline", "opencode")
PLUGIN_MARKER = "ollie-approve plugin for OpenCode"
CLINE_MARKER = "ollie-approve hook for Cline"

# Variables Ollie reads that a client's filtered environment may drop (Codex passes
# MCP servers only a short default set): passed on when set where install runs.
PASSED_ENV = (
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "OLLIE_CFG_PATH",
    "OLLIE_DATA_PATH",
    "OLLIE_TOOLS_PATH",
    "OLLIE_PLUGINS_PATH",
    "OLLIE_ELEVATE_SOCKET",
)


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    if not home:
        raise WiringError("HOME is not set: pass --config PATH")
    return Path(home)


def _config_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config")


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the MCP entry sets: Ollie's own variables that are set here.

    ``XDG_RUNTIME_DIR`` only when it is not logind's ``/run/user/<uid>``: without it,
    ``paths.session_runtime_dir`` finds that directory by itself, so the entry does
    not pin one session's value.
    """
    passed = {key: env[key] for key in PASSED_ENV if env.get(key)}
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and runtime != f"/run/user/{os.getuid()}":
        passed["XDG_RUNTIME_DIR"] = runtime
    return passed


# --- Hooks: Claude Code's shape (Claude Code, Codex, Gemini CLI) --------------------


def is_ours(command: Any) -> bool:
    """A hook command that runs ``ollie-approve`` (whatever its path and options)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and os.path.basename(words[0]) == APPROVE


def _groups(doc: dict[str, Any], event: str, path: Path) -> list[Any]:
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise WiringError(f"{path}: 'hooks' is not an object; nothing was written")
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise WiringError(f"{path}: 'hooks.{event}' is not a list; nothing was written")
    return groups


def _drop_ours(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept.append(group)
            continue
        mine = [h for h in handlers if isinstance(h, dict) and is_ours(h.get("command"))]
        if not mine:
            kept.append(group)
        elif len(mine) < len(handlers):
            kept.append({**group, "hooks": [h for h in handlers if h not in mine]})
    return kept


def _prune(doc: dict[str, Any], event: str) -> None:
    hooks = doc.get("hooks")
    if isinstance(hooks, dict):
        if hooks.get(event) == []:
            del hooks[event]
        if not hooks:
            del doc["hooks"]


def grouped_hooks(path: Path, events: Mapping[str, dict[str, Any]]) -> JsonEdit:
    """``hooks.<event>: [group]`` for each event, ``group`` = Ollie's matcher group."""

    def add(doc: dict[str, Any]) -> None:
        for event, group in events.items():
            groups = _groups(doc, event, path)
            if group not in groups:
                groups[:] = [*_drop_ours(groups), group]

    def remove(doc: dict[str, Any]) -> None:
        hooks = doc.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event in events:
            groups = hooks.get(event)
            if isinstance(groups, list):
                hooks[event] = _drop_ours(groups)
                _prune(doc, event)

    return JsonEdit(path, add, remove)


def _group(command: str, matcher: str, timeout: int) -> dict[str, Any]:
    return {
        "matcher": matcher,
        "hooks": [{"type": "command", "command": command, "timeout": timeout}],
    }


def cursor_hooks(path: Path, command: str) -> JsonEdit:
    events = ("beforeShellExecution", "beforeMCPExecution", "beforeReadFile")
    entry = {"command": command}

    def add(doc: dict[str, Any]) -> None:
        doc.setdefault("version", 1)
        for event in events:
            entries = _groups(doc, event, path)
            if entry not in entries:
                entries[:] = [
                    e for e in entries if not (isinstance(e, dict) and is_ours(e.get("command")))
                ] + [entry]

    def remove(doc: dict[str, Any]) -> None:
        hooks = doc.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event in events:
            entries = hooks.get(event)
            if isinstance(entries, list):
                hooks[event] = [
                    e for e in entries if not (isinstance(e, dict) and is_ours(e.get("command")))
                ]
                _prune(doc, event)

    return JsonEdit(path, add, remove)


def cline_script(program: str) -> str:
    return (
        "#!/bin/sh\n"
        f"# {CLINE_MARKER} (written by `ollie-approve install --agent cline`;\n"
        "# `ollie-approve uninstall --agent cline` removes it).  docs/agents/cline.md\n"
        f"exec {shlex.quote(program)} --format cline\n"
    )


def opencode_plugin(program: str) -> str:
    from registry_core import paths

    template = paths.resources_dir() / "agents" / "opencode" / "ollie-approve.js"
    try:
        text = template.read_text(encoding="utf-8")
    except OSError as exc:
        raise WiringError(f"the shipped OpenCode plugin is missing: {exc}") from None
    return text.replace("@OLLIE_APPROVE@", program.replace("\\", "\\\\").replace('"', '\\"'))


def agent_default(agent: str, env: Mapping[str, str]) -> Path:
    home = _home(env)
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    return {
        "claude-code": home / ".claude" / "settings.json",
        "codex": codex_home / "hooks.json",
        "gemini": home / ".gemini" / "settings.json",
        "cursor": home / ".cursor" / "hooks.json",
        "cline": home / "Documents" / "Cline" / "Hooks" / "PreToolUse",
        "opencode": _config_home(env) / "opencode" / "plugin" / "ollie-approve.js",
    }[agent]


def agent_edit(agent: str, path: Path, program: str) -> Edit:
    """The hook that makes ``agent`` ask Ollie, in ``path``; ``program`` is ollie-approve."""
    run = shlex.quote(program)
    if agent == "claude-code":
        command = f"{run} --format claude-code"
        return grouped_hooks(path, {"PreToolUse": _group(command, "*", HOOK_TIMEOUT)})
    if agent == "codex":
        # PermissionRequest: where Codex honours both allow and deny (docs/hooks.md).
        command = f"{run} --format codex"
        return grouped_hooks(path, {"PermissionRequest": _group(command, "*", HOOK_TIMEOUT)})
    if agent == "gemini":
        command = f"{run} --format gemini"
        return grouped_hooks(path, {"BeforeTool": _group(command, ".*", HOOK_TIMEOUT * 1000)})
    if agent == "cursor":
        return cursor_hooks(path, f"{run} --format cursor")
    if agent == "cline":
        return OwnedFile(path, cline_script(program), CLINE_MARKER, 0o755)
    if agent == "opencode":
        return OwnedFile(path, opencode_plugin(program), PLUGIN_MARKER)
    raise WiringError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")


# --- MCP servers ---------------------------------------------------------------------


def client_default(client: str, env: Mapping[str, str], cwd: Path) -> Path:
    home = _home(env)
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    opencode = _config_home(env) / "opencode"
    return {
        "claude-code": home / ".claude.json",
        "codex": codex_home / "config.toml",
        "gemini": home / ".gemini" / "settings.json",
        "cursor": home / ".cursor" / "mcp.json",
        "vscode": cwd / ".vscode" / "mcp.json",
        "cline": _config_home(env)
        / "Code"
        / "User"
        / "globalStorage"
        / "saoudrizwan.claude-dev"
        / "settings"
        / "cline_mcp_settings.json",
        "opencode": opencode / "opencode.jsonc"
        if (opencode / "opencode.jsonc").exists()
        else opencode / "opencode.json",
    }[client]


def _member(path: Path, key: str, entry: dict[str, Any]) -> JsonEdit:
    def add(doc: dict[str, Any]) -> None:
        servers = doc.setdefault(key, {})
        if not isinstance(servers, dict):
            raise WiringError(f"{path}: {key!r} is not an object; nothing was written")
        servers[NAME] = entry

    def remove(doc: dict[str, Any]) -> None:
        servers = doc.get(key)
        if isinstance(servers, dict) and NAME in servers:
            del servers[NAME]
            if not servers:
                del doc[key]

    return JsonEdit(path, add, remove)


def client_edit(client: str, path: Path, program: str, env: Mapping[str, str]) -> Edit:
    """Ollie's MCP server in ``client``'s ``path``; ``program`` is ollie-tools."""
    passed = server_env(env)
    plain: dict[str, Any] = {"command": program, "args": ["mcp"]}
    if passed:
        plain["env"] = passed
    if client == "codex":
        return TomlTableEdit(path, "mcp_servers", NAME, plain)
    if client in ("gemini", "cursor"):
        return _member(path, "mcpServers", plain)
    if client == "claude-code":
        return _member(path, "mcpServers", {"type": "stdio", **plain, "env": passed})
    if client == "cline":
        return _member(path, "mcpServers", {**plain, "disabled": False})
    if client == "vscode":
        return _member(path, "servers", {"type": "stdio", **plain})
    if client == "opencode":
        entry: dict[str, Any] = {"type": "local", "command": [program, "mcp"], "enabled": True}
        if passed:
            entry["environment"] = passed
        return _member(path, "mcp", entry)
    raise WiringError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")
