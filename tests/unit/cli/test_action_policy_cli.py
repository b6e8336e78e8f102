"""``ollie-tools policy actions`` and ``forget-action``: agent-action rules, listed and dropped."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from registry_core.broker.question import Remember
from registry_core.broker.remember.action_rules import RULES_FILE, ActionRuleStore
from registry_core.broker.wire.messages import PatternKind
from registry_core.cli import tools


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ActionRuleStore:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path / "tools"))
    rules = ActionRuleStore(tmp_path / "config" / "ollie" / RULES_FILE)
    rules.remember("claude-code", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    rules.remember("claude-code", "Edit", PatternKind.PATH, "/p/", Remember.DENY_ALWAYS)
    return rules


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return tools.main(argv, out=out), out.getvalue()


def test_actions_lists_the_stored_rules(store: ActionRuleStore) -> None:
    code, out = run(["policy", "actions", "--json"])
    assert code == 0
    assert [(r["decision"], r["tool"], r["pattern"]) for r in json.loads(out)] == [
        ("allow", "Bash", "git"),
        ("deny", "Edit", "/p/"),
    ]
    code, out = run(["policy", "actions"])
    assert code == 0 and "claude-code" in out and "/p/" in out


def test_forget_action_drops_only_what_matches(store: ActionRuleStore) -> None:
    code, out = run(["policy", "forget-action", "--tool", "Bash"])
    assert code == 0 and "forgot: allow claude-code Bash program 'git'" in out
    assert [r.tool for r in store.rules()] == ["Edit"]  # the store sees the change at once
    assert run(["policy", "forget-action", "--tool", "Bash"])[0] == 1  # nothing left
    assert run(["policy", "forget-action"])[0] == 2  # forgetting needs a filter or --all
    assert run(["policy", "forget-action", "--all"])[0] == 0
    assert store.rules() == []
