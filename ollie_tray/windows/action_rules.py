"""The Policies window's second table: remembered answers to agents' own actions.

``ollie-approve`` asks the person about an agent's own action (a shell command,
a file edit, a fetch: the broker's ``action`` request kind); "remember" stores
an answer keyed by agent + agent tool + a pattern (``program``, ``path`` or
``exact``; see :mod:`registry_core.broker.remember.action_rules`).  This panel lists
those rules, the ones of this session (kept only by the running broker) and
the stored ones (``action-policies.json``), and revokes the selected ones
through the broker's own :class:`~registry_core.broker.remember.action_rules.ActionRuleStore`,
so the next such action is asked about again.  ``ollie-tools policy actions``
and ``forget-action`` are the same on the command line (session rules aside).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from PySide6.QtCore import QItemSelection, QItemSelectionModel, QObject
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from ollie_tray.windows.common import (
    DecisionTableModel,
    count_text,
    decision_table,
    expires_text,
    status_label,
)
from registry_core.broker.remember.action_rules import ActionRule
from registry_core.broker.remember.policy_file import iso_time
from registry_core.broker.wire.messages import PatternKind

COLUMNS = ("Agent", "Agent's tool", "Covers", "Pattern", "Decision", "Expires")
KIND_TEXT = {
    PatternKind.PROGRAM: "commands running",
    PatternKind.PATH: "files at or under",
    PatternKind.EXACT: "exactly",
}


class ActionRuleSource(Protocol):
    """What the panel needs of an action rule store (``ActionRuleStore`` has it)."""

    problems: list[str]

    def rules(self) -> list[ActionRule]: ...

    def revoke(self, rules: Iterable[ActionRule]) -> list[ActionRule]: ...

    def forget(
        self, agent: str | None = None, tool: str | None = None, pattern: str | None = None
    ) -> list[ActionRule]: ...


class ActionRuleTableModel(DecisionTableModel[ActionRule]):
    """A read-only table over a snapshot of action rules."""

    columns = COLUMNS
    decision_column = 4

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._now = 0.0

    def set_rules(self, rules: Sequence[ActionRule], now: float) -> None:
        self._now = now
        self.set_rows(rules)

    def rule(self, row: int) -> ActionRule:
        return self.row_item(row)

    def text(self, rule: ActionRule, column: int) -> str:
        texts = (
            rule.agent,
            rule.tool,
            KIND_TEXT.get(rule.kind, rule.kind.value),
            rule.pattern,
            rule.decision.value,
            expires_text(rule, self._now),
        )
        return texts[column]

    def tooltip(self, rule: ActionRule, column: int) -> str:
        if column == 5:
            when = "" if rule.expires is None else f", until {iso_time(rule.expires)}"
            return f"{rule.remember.label}{when}"
        return c.visible(rule.describe())


class ActionRulesPanel(QWidget):
    """The remembered answers to agents' actions, with Revoke."""

    def __init__(
        self,
        store: ActionRuleSource,
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._clock = clock
        self._on_change = on_change
        self._problem: str | None = None  # the store's last complaint, shown until a change
        self.setAccessibleName("Remembered answers to agents' actions")
        heading = QLabel(
            "Agents' own actions (ollie-approve): answers remembered for an agent's tool and"
            " a pattern. A revoked answer is asked again next time."
        )
        heading.setWordWrap(True)
        heading.setAccessibleName("About remembered answers to agents' actions")
        self.model = ActionRuleTableModel(self)
        self.table = decision_table(self.model, "Remembered answers to agents' actions table")
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.horizontalHeader().setSectionResizeMode(
            len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch
        )
        self.revoke_button = QPushButton("Re&voke answer")
        self.revoke_button.setAccessibleName("Revoke the selected answers to agents' actions")
        self.revoke_button.clicked.connect(self.revoke_selected)
        self.status_label = status_label()
        self.status_label.setAccessibleName("Agents' actions status")
        self.status_label.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.revoke_button)
        buttons.addWidget(self.status_label, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(heading)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self.table.selectionModel().selectionChanged.connect(self._update_buttons)
        self.refresh()

    def refresh(self) -> None:
        """Reload from the store, keeping the selection."""
        selected = {rule.key() for rule in self.selected_rules()}
        before = len(self._store.problems)
        rules = sorted(self._store.rules(), key=lambda r: (r.agent, r.tool, r.kind, r.pattern))
        self.model.set_rules(rules, self._clock())
        if selected:
            selection = QItemSelection()
            last = len(COLUMNS) - 1
            for row, rule in enumerate(rules):
                if rule.key() in selected:
                    selection.select(self.model.index(row, 0), self.model.index(row, last))
            self.table.selectionModel().select(
                selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
            )
        if len(self._store.problems) > before:
            self._problem = self._store.problems[-1]
        if self._problem is not None:
            self._say(f"Problem with the remembered answers: {self._problem}", error=True)
        elif rules:
            self._say(f"{count_text(len(rules), 'remembered answer')}.")
        else:
            self._say("No remembered answers to agents' actions.")
        self._update_buttons()

    def selected_rules(self) -> list[ActionRule]:
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [self.model.rule(row) for row in rows if row < self.model.rowCount()]

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def revoke_selected(self) -> None:
        chosen = self.selected_rules()
        if chosen:
            self._change(lambda: self._store.revoke(chosen), "Revoked")

    def revoke_all(self) -> None:
        """Forget every answer (the Policies window's "Revoke all" calls this)."""
        self._change(self._store.forget, "Revoked")

    def _change(self, action: Callable[[], list[ActionRule]], verb: str) -> None:
        before = len(self._store.problems)
        dropped = action()
        problems = self._store.problems[before:]
        self._problem = None
        self.table.clearSelection()
        self.refresh()
        if self._on_change is not None:
            self._on_change()
        if problems:
            self._say(f"Could not revoke: {problems[-1]}", error=True)
        else:
            self._say(f"{verb} {count_text(len(dropped), 'answer')}.")

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status_label.setText(c.visible(text))
        self.status_label.setProperty("error", error)
        self.status_label.setStyleSheet(f"color: {c.RED_DARK};" if error else "")

    def _update_buttons(self) -> None:
        self.revoke_button.setEnabled(bool(self.table.selectionModel().selectedRows()))
