"""`ollie-approve install --agent` and `ollie-tools mcp install --client` on copies of
realistic configuration files: Ollie's entry goes in and everything else stays; twice
changes nothing; uninstall gives the original back byte for byte; --dry-run writes
nothing and prints a diff; a corrupt file is refused, named, and left alone."""

from __future__ import annotations

import io
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest

from registry_core.cli import approve, tools
from registry_core.wiring import targets

APPROVE = "/opt/ollie/bin/ollie-approve"
TOOLS = "/opt/ollie/bin/ollie-tools"

# Realistic files, with keys Ollie knows nothing about and a hook or server of someone else.
CLAUDE_SETTINGS = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": ["Bash(npm run lint)"],
    "deny": ["Read(./.env)"]
  },
  "hooks": {
    "PostToolUse": [
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
    ]
  },
  "model": "opus",
  "futureKey": {"nested": [1, 2, 3]}
}
"""
CLAUDE_JSON = """{
  "numStartups": 42,
  "projects": {"/home/u/p": {"allowedTools": []}},
  "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}}
}
"""
CODEX_TOML = """# Codex configuration
model = "gpt-5-codex"  # the default model
approval_policy = "on-request"

[features]
codex_hooks = true

# Servers
[mcp_servers.docs]
command = "docs-server"
args = ["--stdio"]
env = { "API_KEY" = "x" }

[projects."/home/u/p"]
trust_level = "trusted"
"""
CODEX_HOOKS = """{
  "hooks": {
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}
"""
GEMINI_SETTINGS = """{
  "general": {"vimMode": true},
  "ui": {"theme": "GitHub"},
  "mcpServers": {"fs": {"command": "npx", "args": ["-y", "fs-server"], "trust": false}},
  "hooks": {"AfterTool": [{"matcher": ".*", "hooks": [{"type": "command", "command": "log"}]}]}
}
"""
CURSOR_MCP = """{
  "mcpServers": {
    "linear": {"url": "https://mcp.linear.invalid/sse"}
  }
}
"""
CURSOR_HOOKS = """{
  "version": 1,
  "hooks": {
    "afterFileEdit": [{"command": "./hooks/format.sh"}],
    "beforeShellExecution": [{"command": "./hooks/audit.sh"}]
  }
}
"""
VSCODE_MCP = """{
\t"inputs": [{"type": "promptString", "id": "token", "description": "Token", "password": true}],
\t"servers": {
\t\t"github": {"type": "http", "url": "https://api.githubcopilot.invalid/mcp/"}
\t}
}
"""
CLINE_MCP = """{
  "mcpServers": {
    "weather": {"command": "node", "args": ["/w/index.js"], "disabled": false, "autoApprove": []}
  }
}
"""
OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  "theme": "opencode",
  "mcp": {"jira": {"type": "remote", "url": "https://jira.invalid/mcp", "enabled": true}},
  "permission": {"edit": "ask"}
}
"""

AGENT_CASES = [
    ("claude-code", "settings.json", CLAUDE_SETTINGS),
    ("codex", "hooks.json", CODEX_HOOKS),
    ("gemini", "settings.json", GEMINI_SETTINGS),
    ("cursor", "hooks.json", CURSOR_HOOKS),
]
CLIENT_CASES = [
    ("claude-code", ".claude.json", CLAUDE_JSON),
    ("codex", "config.toml", CODEX_TOML),
    ("gemini", "settings.json", GEMINI_SETTINGS),
    ("cursor", "mcp.json", CURSOR_MCP),
    ("vscode", "mcp.json", VSCODE_MCP),
    ("cline", "cline_mcp_settings.json", CLINE_MCP),
    ("opencode", "opencode.json", OPENCODE),
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (*targets.PASSED_ENV, "XDG_RUNTIME_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _approve(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = approve.run([*argv, "--program", APPROVE], io.StringIO(""), out, env or {"HOME": "/"})
    return code, out.getvalue()


def _tools(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = tools.main(["mcp", *argv, "--program", TOOLS], out)
    return code, out.getvalue()


def _parse(path: Path) -> Any:
    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def _without_ollie(doc: Any) -> Any:
    """``doc`` less everything that names Ollie's programs (to compare the rest)."""
    if isinstance(doc, dict):
        return {
            k: _without_ollie(v)
            for k, v in doc.items()
            if k != targets.NAME and not (isinstance(v, str) and "/opt/ollie/" in v)
        }
    if isinstance(doc, list):
        return [_without_ollie(v) for v in doc if "/opt/ollie/" not in json.dumps(v)]
    return doc


def _prune_empty(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _prune_empty(v) for k, v in doc.items() if v not in ({}, [])}
    return doc


@pytest.mark.parametrize(("agent", "name", "original"), AGENT_CASES)
def test_agent_hook_install_twice_then_uninstall(
    tmp_path: Path, agent: str, name: str, original: str
) -> None:
    config = tmp_path / name
    config.write_text(original)
    assert _approve("install", "--agent", agent, "--config", str(config))[0] == 0
    installed = config.read_text()
    assert f"{APPROVE} --format {agent}" in installed
    assert _prune_empty(_without_ollie(_parse(config))) == _prune_empty(
        _without_ollie(json.loads(original))
    )
    assert (tmp_path / (name + ".ollie-backup")).read_text() == original

    code, diff = _approve("install", "--agent", agent, "--config", str(config))
    assert (code, diff) == (0, "")
    assert config.read_text() == installed

    assert _approve("uninstall", "--agent", agent, "--config", str(config))[0] == 0
    assert config.read_bytes() == original.encode()
    assert not (tmp_path / (name + ".ollie-backup")).exists()


@pytest.mark.parametrize(("client", "name", "original"), CLIENT_CASES)
def test_mcp_install_twice_then_uninstall(
    tmp_path: Path, client: str, name: str, original: str
) -> None:
    config = tmp_path / name
    config.write_text(original)
    assert _tools("install", "--client", client, "--config", str(config))[0] == 0
    installed = config.read_text()
    doc = _parse(config)
    key = {"codex": "mcp_servers", "vscode": "servers", "opencode": "mcp"}.get(client, "mcpServers")
    entry = doc[key][targets.NAME]
    assert TOOLS in json.dumps(entry)
    assert "mcp" in (entry.get("args") or entry["command"])
    before = tomllib.loads(original) if name.endswith(".toml") else json.loads(original)
    assert _without_ollie(doc) == _without_ollie(before)

    code, diff = _tools("install", "--client", client, "--config", str(config))
    assert (code, diff) == (0, "")
    assert config.read_text() == installed

    assert _tools("uninstall", "--client", client, "--config", str(config))[0] == 0
    assert config.read_bytes() == original.encode()


def test_codex_toml_keeps_its_comments(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CODEX_TOML)
    _tools("install", "--client", "codex", "--config", str(config))
    text = config.read_text()
    assert "# Codex configuration" in text
    assert "# the default model" in text
    head, tail = CODEX_TOML.split('\n[projects."/home/u/p"]')
    assert text == (
        head + '\n[mcp_servers.ollie]\ncommand = "/opt/ollie/bin/ollie-tools"\nargs = ["mcp"]\n'
        '\n[projects."/home/u/p"]' + tail
    )


@pytest.mark.parametrize(
    ("argv", "name", "original"),
    [
        (("approve", "claude-code"), "settings.json", CLAUDE_SETTINGS),
        (("tools", "codex"), "config.toml", CODEX_TOML),
        (("tools", "vscode"), "mcp.json", VSCODE_MCP),
    ],
)
def test_dry_run_prints_a_diff_and_writes_nothing(
    tmp_path: Path, argv: tuple[str, str], name: str, original: str
) -> None:
    config = tmp_path / name
    config.write_text(original)
    which, target = argv
    if which == "approve":
        code, diff = _approve("install", "--agent", target, "--config", str(config), "--dry-run")
    else:
        code, diff = _tools("install", "--client", target, "--config", str(config), "--dry-run")
    assert code == 0
    assert diff.startswith(f"--- {config}\n+++ {config}\n")
    assert any(line.startswith("+") and "/opt/ollie/bin/" in line for line in diff.splitlines())
    assert config.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize(
    ("which", "target", "name", "corrupt"),
    [
        ("approve", "claude-code", "settings.json", '{"hooks": {"PreToolUse": [}'),
        ("approve", "cursor", "hooks.json", "[1, 2]"),
        ("tools", "codex", "config.toml", "model = \n[mcp_servers\n"),
        ("tools", "gemini", "settings.json", '{"mcpServers": '),
        ("tools", "cursor", "mcp.json", '{"mcpServers": []}'),
    ],
)
def test_a_corrupt_file_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    which: str,
    target: str,
    name: str,
    corrupt: str,
) -> None:
    config = tmp_path / name
    config.write_text(corrupt)
    if which == "approve":
        code, out = _approve("install", "--agent", target, "--config", str(config))
    else:
        code, out = _tools("install", "--client", target, "--config", str(config))
    assert code == 1
    assert out == ""
    assert str(config) in capsys.readouterr().err
    assert config.read_text() == corrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_jsonc_with_comments_is_refused_with_the_entry_to_paste(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mcp.json"
    original = '{\n  // my servers\n  "servers": {}\n}\n'
    config.write_text(original)
    assert _tools("install", "--client", "vscode", "--config", str(config))[0] == 1
    err = capsys.readouterr().err
    assert str(config) in err and "comments" in err and TOOLS in err
    assert config.read_text() == original


def test_a_file_the_install_created_is_removed_by_uninstall(tmp_path: Path) -> None:
    config = tmp_path / "new" / "mcp.json"
    assert _tools("install", "--client", "cursor", "--config", str(config))[0] == 0
    assert json.loads(config.read_text())["mcpServers"]["ollie"]["command"] == TOOLS
    assert _tools("uninstall", "--client", "cursor", "--config", str(config))[0] == 0
    assert not config.exists()


def test_an_edited_file_keeps_the_edit_and_loses_only_ollie(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text(GEMINI_SETTINGS)
    _tools("install", "--client", "gemini", "--config", str(config))
    doc = json.loads(config.read_text())
    doc["ui"]["theme"] = "Dracula"
    config.write_text(json.dumps(doc, indent=2) + "\n")
    _tools("uninstall", "--client", "gemini", "--config", str(config))
    after = json.loads(config.read_text())
    assert after["ui"]["theme"] == "Dracula"
    assert "ollie" not in after["mcpServers"]
    assert after["mcpServers"]["fs"]["command"] == "npx"


def test_a_moved_installation_replaces_the_old_hook(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text(CLAUDE_SETTINGS)
    _approve("install", "--agent", "claude-code", "--config", str(config))
    argv = ["install", "--agent", "claude-code", "--config", str(config)]
    approve.run([*argv, "--program", "/new/ollie-approve"], io.StringIO(""), io.StringIO(), {})
    groups = json.loads(config.read_text())["hooks"]["PreToolUse"]
    commands = [h["command"] for g in groups for h in g["hooks"]]
    assert commands == ["/new/ollie-approve --format claude-code"]


def test_cline_hook_script_is_executable_and_someone_elses_is_kept(tmp_path: Path) -> None:
    hook = tmp_path / "Hooks" / "PreToolUse"
    assert _approve("install", "--agent", "cline", "--config", str(hook))[0] == 0
    assert hook.stat().st_mode & stat.S_IXUSR
    assert f"exec {APPROVE} --format cline" in hook.read_text()
    assert _approve("uninstall", "--agent", "cline", "--config", str(hook))[0] == 0
    assert not hook.exists()
    hook.write_text("#!/bin/sh\necho '{\"cancel\": false}'\n")
    assert _approve("install", "--agent", "cline", "--config", str(hook))[0] == 1
    assert "not Ollie's" not in hook.read_text()


def test_opencode_plugin_runs_ollie_approve_by_absolute_path(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin" / "ollie-approve.js"
    assert _approve("install", "--agent", "opencode", "--config", str(plugin))[0] == 0
    text = plugin.read_text()
    assert f'const OLLIE_APPROVE = "{APPROVE}";' in text
    assert '"tool.execute.before"' in text and '"permission.ask"' in text
    assert '["--json", "--agent", "opencode"]' in text
    assert _approve("install", "--agent", "opencode", "--config", str(plugin)) == (0, "")
    assert _approve("uninstall", "--agent", "opencode", "--config", str(plugin))[0] == 0
    assert not plugin.exists()


def test_default_locations(tmp_path: Path) -> None:
    env = {"HOME": "/home/u"}
    assert targets.agent_default("claude-code", env) == Path("/home/u/.claude/settings.json")
    assert targets.agent_default("codex", {**env, "CODEX_HOME": "/c"}) == Path("/c/hooks.json")
    assert targets.agent_default("cline", env) == Path("/home/u/Documents/Cline/Hooks/PreToolUse")
    assert targets.client_default("codex", env, tmp_path) == Path("/home/u/.codex/config.toml")
    assert targets.client_default("vscode", env, tmp_path) == tmp_path / ".vscode" / "mcp.json"
    assert targets.client_default("opencode", {**env, "XDG_CONFIG_HOME": "/x"}, tmp_path) == Path(
        "/x/opencode/opencode.json"
    )


def test_the_mcp_entry_passes_what_a_filtered_environment_drops() -> None:
    uid_dir = f"/run/user/{os.getuid()}"
    env = {"HOME": "/h", "XDG_CONFIG_HOME": "/h/cfg", "XDG_RUNTIME_DIR": uid_dir, "PATH": "/bin"}
    assert targets.server_env(env) == {"XDG_CONFIG_HOME": "/h/cfg"}
    assert targets.server_env({"XDG_RUNTIME_DIR": "/elsewhere"}) == {
        "XDG_RUNTIME_DIR": "/elsewhere"
    }
