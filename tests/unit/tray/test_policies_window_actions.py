"""The Policies window lists agents' remembered action answers and revokes them.

A real :class:`ActionRuleStore` on a temporary ``action-policies.json`` (the
broker's store, which ``ollie-approve``'s answers fill) and a real
:class:`PolicyStore`; revoking goes through to the file, and the broker's next
lookup of that action finds nothing (it asks again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ollie_tray.windows.policies import PoliciesWindow
from registry_core.broker.question import Remember
from registry_core.broker.remember.action_rules import ActionRuleStore
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire.messages import Kind, PatternKind

SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
NOW = 1_750_000_000.0


def clock() -> float:
    return NOW


@pytest.fixture
def policies(tmp_path: Path) -> PolicyStore:
    store = PolicyStore(tmp_path / "policies.yaml", clock=clock)
    store.remember("backup", Kind.SUDO, "laptop", Remember.HOUR, "/opt/ollie/backup", SHA)
    return store


@pytest.fixture
def actions(tmp_path: Path) -> ActionRuleStore:
    store = ActionRuleStore(tmp_path / "action-policies.json", clock=clock)
    store.remember("claude-code", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    store.remember("claude-code", "Edit", PatternKind.PATH, "/home/me/proj/", Remember.HOUR)
    store.remember("codex", "shell", PatternKind.EXACT, "rm -rf build", Remember.DENY_ALWAYS)
    store.remember(
        "claude-code", "WebFetch", PatternKind.EXACT, "https://x.test/", Remember.SESSION
    )
    return store


def make(qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore) -> PoliciesWindow:
    window = PoliciesWindow(policies, actions=actions, clock=clock)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def rows(window: PoliciesWindow) -> list[list[str]]:
    panel = window.action_rules
    assert panel is not None
    model = panel.model
    return [
        [str(model.index(r, c).data()) for c in range(model.columnCount())]
        for r in range(model.rowCount())
    ]


def stored(path: Path) -> list[str]:
    return [rule["pattern"] for rule in json.loads(path.read_text())["rules"]]


def test_action_rules_are_listed_beside_the_tool_policies(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    window = make(qtbot, policies, actions)
    assert window.model.rowCount() == 1  # the tool policy is still there
    assert rows(window) == [
        ["claude-code", "Bash", "commands running", "git", "allow", "never"],
        ["claude-code", "Edit", "files at or under", "/home/me/proj/", "allow", "in 1 h"],
        ["claude-code", "WebFetch", "exactly", "https://x.test/", "allow", "this session"],
        ["codex", "shell", "exactly", "rm -rf build", "deny", "never"],
    ]
    panel = window.action_rules
    assert panel is not None
    assert panel.status_label.text() == "4 remembered answers."
    assert not panel.revoke_button.isEnabled()  # nothing selected yet


def test_revoking_a_stored_rule_removes_it_from_the_file_and_the_broker_asks_again(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    window = make(qtbot, policies, actions)
    panel = window.action_rules
    assert panel is not None
    covered = {"summary": "git status", "command": "git status", "path": None}
    assert actions.lookup("claude-code", "Bash", **covered) is not None
    panel.select_row(0)
    assert panel.revoke_button.isEnabled()
    with qtbot.waitSignal(window.policies_changed):
        panel.revoke_button.click()
    assert [r[3] for r in rows(window)] == ["/home/me/proj/", "https://x.test/", "rm -rf build"]
    assert panel.status_label.text() == "Revoked 1 answer."
    assert "git" not in stored(actions.path)
    # Another store on the same file (ollie-tools policy actions) agrees.
    assert "git" not in [r.pattern for r in ActionRuleStore(actions.path, clock=clock).rules()]
    assert actions.lookup("claude-code", "Bash", **covered) is None  # asked again


def test_revoking_a_session_rule_and_a_deny_together(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    window = make(qtbot, policies, actions)
    panel = window.action_rules
    assert panel is not None
    panel.select_row(2)  # WebFetch, this session only (kept in memory by the broker)
    panel.table.selectionModel().select(
        panel.model.index(3, 0),
        panel.table.selectionModel().SelectionFlag.Select
        | panel.table.selectionModel().SelectionFlag.Rows,
    )
    panel.revoke_button.click()
    assert [r[3] for r in rows(window)] == ["git", "/home/me/proj/"]
    assert panel.status_label.text() == "Revoked 2 answers."
    assert stored(actions.path) == ["git", "/home/me/proj/"]
    fetch = {"summary": "https://x.test/", "command": None, "path": None}
    assert actions.lookup("claude-code", "WebFetch", **fetch) is None
    rm = {"summary": "rm -rf build", "command": "rm -rf build", "path": None}
    assert actions.lookup("codex", "shell", **rm) is None


def test_an_answer_remembered_elsewhere_shows_up_on_refresh(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    window = make(qtbot, policies, actions)
    other = ActionRuleStore(actions.path, clock=clock)  # e.g. another broker's store
    other.remember("gemini", "run_shell_command", PatternKind.PROGRAM, "ls", Remember.ALWAYS)
    window.refresh()
    assert ["gemini", "run_shell_command", "commands running", "ls", "allow", "never"] in rows(
        window
    )


def test_revoke_all_forgets_the_action_answers_too(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    window = make(qtbot, policies, actions)
    window.revoke_all_button.click()
    box = window.confirm_box
    assert box is not None
    assert "agent's action" in box.informativeText()
    with qtbot.waitSignal(window.policies_changed):
        box.button(QMessageBox.StandardButton.Yes).click()
    assert policies.list() == []
    assert actions.rules() == []
    assert stored(actions.path) == []
    assert rows(window) == []
    assert not window.revoke_all_button.isEnabled()


def test_revoke_all_stays_enabled_while_only_action_answers_remain(
    qtbot: QtBot, policies: PolicyStore, actions: ActionRuleStore
) -> None:
    policies.revoke_all()
    window = make(qtbot, policies, actions)
    assert window.model.rowCount() == 0
    assert window.revoke_all_button.isEnabled()


def test_a_corrupt_rules_file_is_reported_in_the_panel(
    qtbot: QtBot, policies: PolicyStore, tmp_path: Path
) -> None:
    path = tmp_path / "action-policies.json"
    path.write_text("{not json")
    actions = ActionRuleStore(path, clock=clock, on_problem=lambda text: None)
    window = make(qtbot, policies, actions)
    panel = window.action_rules
    assert panel is not None
    assert rows(window) == []
    assert "Problem with the remembered answers" in panel.status_label.text()
    assert "kept aside" in panel.status_label.text()
