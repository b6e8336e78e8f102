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


ADD = ["policy", "add-action"]


def test_add_action_remembers_what_a_dialog_would_and_the_store_decides_by_it(
    store: ActionRuleStore,
) -> None:
    code, out = run(
        [*ADD, "--agent", "codex", "--tool", "Bash", "--pattern", "make", "--allow", "--for", "1h"]
    )
    assert code == 0 and "remembered: allow codex Bash program 'make' until " in out
    rule = next(r for r in store.rules() if r.agent == "codex")
    assert (rule.decision.value, rule.remember, rule.kind) == (
        "allow",
        Remember.HOUR,
        PatternKind.PROGRAM,
    )
    assert rule.expires is not None and rule.expires - rule.created == 3600
    code, _ = run(
        [
            *ADD,
            "--agent",
            "codex",
            "--tool",
            "Write",
            "--kind",
            "path",
            "--pattern",
            "/etc/",
            "--deny",
        ]
    )
    assert code == 0
    denied = next(r for r in store.rules() if r.tool == "Write")
    assert (denied.decision.value, denied.remember, denied.expires) == (
        "deny",
        Remember.DENY_ALWAYS,
        None,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--agent", "a", "--tool", "Bash", "--pattern", "git"],  # neither allow nor deny
        ["--agent", "a", "--tool", "Bash", "--pattern", "git", "--allow", "--deny"],
        ["--agent", "a", "--tool", "Bash", "--pattern", "git", "--deny", "--for", "1h"],
        ["--agent", "a", "--tool", "Bash", "--pattern", "gi\x1bt", "--allow"],
        ["--agent", " ", "--tool", "Bash", "--pattern", "git", "--allow"],
        ["--agent", "a", "--tool", "Bash", "--pattern", "git", "--allow", "--for", "2d"],
    ],
)
def test_add_action_refuses_what_it_cannot_keep_and_stores_nothing(
    store: ActionRuleStore, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = store.rules()
    try:
        code = run(["policy", "add-action", *argv])[0]
    except SystemExit as exc:  # argparse's own usage errors
        code = int(str(exc.code))
    assert code == 2
    assert "add-action" in capsys.readouterr().err
    assert store.rules() == before
