"""Which actions need the desktop: defaults, the rules file, and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.errors import ApproveRulesError
from registry_core.hook.actions import action_facts
from registry_core.hook.scope import Rules, Scope, load_rules, parse_rules


def scope(rules: Rules, tool: str, tool_input: dict[str, object], agent: str = "cc") -> Scope:
    return rules.decide(agent, action_facts(tool, tool_input, "/w/p"))[0]


def test_defaults_pass_read_only_and_inside_edits_and_ask_for_the_rest() -> None:
    rules = Rules()
    assert scope(rules, "Read", {"file_path": "/etc/shadow"}) is Scope.PASS
    assert scope(rules, "Grep", {"pattern": "x"}) is Scope.PASS
    assert scope(rules, "Edit", {"file_path": "/w/p/a.py"}) is Scope.PASS
    assert scope(rules, "mcp__ollie__greet", {}) is Scope.PASS
    assert scope(rules, "Edit", {"file_path": "/w/other.py"}) is Scope.DESKTOP
    assert scope(rules, "Write", {"file_path": "/w/p/../x"}) is Scope.DESKTOP
    assert scope(rules, "Bash", {"command": "ls"}) is Scope.DESKTOP
    assert scope(rules, "WebFetch", {"url": "https://x"}) is Scope.DESKTOP
    assert scope(rules, "WebSearch", {"query": "x"}) is Scope.DESKTOP
    assert scope(rules, "mcp__other__tool", {}) is Scope.DESKTOP
    assert scope(rules, "SomethingNew", {}) is Scope.DESKTOP


def test_a_rules_file_orders_rules_and_filters_by_agent_and_program() -> None:
    rules = parse_rules(
        "default: pass\n"
        "rules:\n"
        "  - tools: [Bash]\n    programs: [ls]\n    scope: pass\n"
        "  - tools: Bash\n    scope: desktop\n"
        "  - agents: [gemini]\n    tools: ['mcp__*']\n    scope: desktop\n",
        "rules.yaml",
    )
    assert scope(rules, "Bash", {"command": "ls -la"}) is Scope.PASS
    assert scope(rules, "Bash", {"command": "ls; rm x"}) is Scope.DESKTOP
    assert scope(rules, "mcp__x__y", {}, agent="gemini") is Scope.DESKTOP
    assert scope(rules, "mcp__x__y", {}, agent="cc") is Scope.PASS  # the default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: 5\n", "'rules' must be a list"),
        ("rules:\n  - tools: [Bash]\n", "rules[0]: missing 'scope'"),
        ("rules:\n  - scope: maybe\n", "rules[0].scope must be 'desktop' or 'pass'"),
        ("rules:\n  - scope: pass\n    tool: Bash\n", "rules[0]: unknown key 'tool'"),
        ("rules:\n  - scope: pass\n    inside_cwd: yes please\n", "rules[0].inside_cwd"),
        ("default: allow\n", "'default' must be 'desktop' or 'pass'"),
        ("rules: [\n", "invalid YAML"),
        ("colour: red\n", "unknown key 'colour'"),
    ],
)
def test_bad_rules_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ApproveRulesError) as caught:
        parse_rules(text, "rules.yaml")
    assert message in str(caught.value)
    assert "rules.yaml" in str(caught.value)


def test_a_missing_file_means_the_defaults(tmp_path: Path) -> None:
    assert load_rules(tmp_path / "none.yaml") == Rules()
