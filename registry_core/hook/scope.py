"""Which agent actions need the desktop, and which pass to the agent's own prompt.

``$XDG_CONFIG_HOME/ollie/approve-rules.yaml`` (``ollie-approve --rules FILE``
to use another) holds an ordered list of rules; the first that matches an
action decides its scope, else ``default`` does::

    default: desktop          # desktop | pass
    rules:
      - tools: [Read, Glob, Grep, LS]      # names or shell-style globs
        scope: pass
      - tools: [Edit, Write, MultiEdit, NotebookEdit]
        inside_cwd: true                   # the file is in the working directory tree
        scope: pass
      - tools: [Bash]
        programs: [ls, pwd]                # a simple command running one of these
        scope: pass
      - agents: [claude-code]              # optional: only for these agents
        tools: ["mcp__ollie__*"]
        scope: pass

``desktop`` sends the action to the broker (the person answers in the tray);
``pass`` leaves it to the agent's own permission prompt (``ollie-approve``
gives no decision).  Nothing here ever allows on its own.

Without a file the built-in defaults apply (:data:`DEFAULT_RULES`): read-only
tools and edits inside the working directory pass; shell commands, writes
outside it, network fetches and every unknown tool go to the desktop.  A file
that cannot be read or parsed is an error naming the file and field; the
hook then answers ``ask`` (never a silent allow).
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry_core import paths
from registry_core.broker.remember.action_rules import program_of
from registry_core.errors import ApproveRulesError as RulesError
from registry_core.hook.actions import ActionFacts

RULES_FILE = "approve-rules.yaml"
MAX_RULES_BYTES = 256 * 1024


class Scope(enum.StrEnum):
    DESKTOP = "desktop"
    PASS = "pass"  # noqa: S105 (a scope, not a password)


@dataclass(frozen=True)
class Rule:
    scope: Scope
    tools: tuple[str, ...] = ("*",)
    agents: tuple[str, ...] = ()
    programs: tuple[str, ...] | None = None
    inside_cwd: bool | None = None
    where: str = "built-in default"

    def matches(self, agent: str, facts: ActionFacts) -> bool:
        if self.agents and agent not in self.agents:
            return False
        if not any(fnmatch.fnmatchcase(facts.tool, pattern) for pattern in self.tools):
            return False
        if self.programs is not None and program_of(facts.command) not in self.programs:
            return False
        return self.inside_cwd is None or facts.inside_cwd is self.inside_cwd


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        Scope.PASS,
        tools=(
            "Read",
            "Glob",
            "Grep",
            "LS",
            "NotebookRead",
            "TodoWrite",
            "TodoRead",
            "Task",
            "ExitPlanMode",
        ),
        where="built-in default: read-only tools",
    ),
    Rule(
        Scope.PASS,
        tools=("Edit", "MultiEdit", "Write", "NotebookEdit"),
        inside_cwd=True,
        where="built-in default: edits inside the working directory",
    ),
    # Ollie's own MCP tools ask the broker themselves (sandbox escape, sudo).
    Rule(Scope.PASS, tools=("mcp__ollie__*",), where="built-in default: Ollie's MCP tools"),
)


@dataclass(frozen=True)
class Rules:
    rules: tuple[Rule, ...] = DEFAULT_RULES
    default: Scope = Scope.DESKTOP
    source: str = "built-in defaults"

    def decide(self, agent: str, facts: ActionFacts) -> tuple[Scope, str]:
        """(scope, which rule decided)."""
        for rule in self.rules:
            if rule.matches(agent, facts):
                return rule.scope, rule.where
        return self.default, f"{self.source}: default"


def rules_path(env: Mapping[str, str]) -> Path:
    return paths.ollie_config_dir(env) / RULES_FILE


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesError(f"{where} must be a string or a list of strings")
    return tuple(value)


def _scope(value: Any, where: str) -> Scope:
    try:
        return Scope(value)
    except ValueError:
        raise RulesError(f"{where} must be 'desktop' or 'pass', not {value!r}") from None


def parse_rules(text: str, source: str) -> Rules:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: invalid YAML: {exc}") from exc
    if doc is None:
        return Rules(source=source)
    if not isinstance(doc, dict):
        raise RulesError(f"{source}: expected a mapping with 'rules' and 'default'")
    unknown = set(doc) - {"rules", "default"}
    if unknown:
        raise RulesError(f"{source}: unknown key {sorted(unknown)[0]!r}")
    default = _scope(doc.get("default", "desktop"), f"{source}: 'default'")
    items = doc.get("rules", [])
    if not isinstance(items, list):
        raise RulesError(f"{source}: 'rules' must be a list")
    rules: list[Rule] = []
    for index, item in enumerate(items):
        where = f"{source}: rules[{index}]"
        if not isinstance(item, dict):
            raise RulesError(f"{where} must be a mapping")
        extra = set(item) - {"tools", "agents", "programs", "inside_cwd", "scope"}
        if extra:
            raise RulesError(f"{where}: unknown key {sorted(extra)[0]!r}")
        if "scope" not in item:
            raise RulesError(f"{where}: missing 'scope'")
        inside = item.get("inside_cwd")
        if inside is not None and not isinstance(inside, bool):
            raise RulesError(f"{where}.inside_cwd must be true or false")
        programs = item.get("programs")
        rules.append(
            Rule(
                scope=_scope(item["scope"], f"{where}.scope"),
                tools=_strings(item.get("tools", "*"), f"{where}.tools"),
                agents=_strings(item.get("agents", []), f"{where}.agents"),
                programs=None if programs is None else _strings(programs, f"{where}.programs"),
                inside_cwd=inside,
                where=where,
            )
        )
    return Rules(tuple(rules), default, source)


def load_rules(path: Path) -> Rules:
    """The rules of ``path``; the built-in defaults when it does not exist."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_RULES_BYTES + 1)
    except FileNotFoundError:
        return Rules()
    except OSError as exc:
        raise RulesError(f"{path}: cannot read: {exc.strerror}") from exc
    if len(data) > MAX_RULES_BYTES:
        raise RulesError(f"{path}: larger than {MAX_RULES_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RulesError(f"{path}: not UTF-8 (byte {exc.start})") from exc
    return parse_rules(text, str(path))


__all__: Sequence[str] = ["DEFAULT_RULES", "Rule", "Rules", "RulesError", "Scope", "load_rules"]
