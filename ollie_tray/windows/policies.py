"""The Policies window: the remembered elevation decisions, with revoke and change duration.

Every edit goes through the :class:`PolicySource` (in the app, the same
:class:`~registry_core.broker.remember.policies.PolicyStore` the broker and
``ollie-tools policy`` use, which writes ``policies.yaml`` atomically and
notices edits made elsewhere).  The table is a model over a snapshot of
``store.list()``; :meth:`PoliciesWindow.refresh` takes a new snapshot.  The
app calls it when the policy file changes; while the window is visible a
timer also refreshes it, so "in 14 min" stays true and expired rows leave.

"Revoke all" asks first, with a window-modal message box opened with
``open()`` (no nested event loop); :meth:`PoliciesWindow.revoke_all` with
``confirm=False`` skips the question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from PySide6.QtCore import QItemSelection, QItemSelectionModel, QObject, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QWidget,
)

from ollie_tray.dialogs import common as c
from ollie_tray.windows.action_rules import ActionRuleSource, ActionRulesPanel
from ollie_tray.windows.common import (
    DecisionTableModel,
    close_row,
    count_text,
    decision_table,
    expires_text,
    status_label,
    window_layout,
)
from ollie_tray.windows.policy_editor import PolicyChoice, PolicyEditor
from registry_core.broker.question import Remember
from registry_core.broker.remember.policy_build import (
    UnknownToolError,
    allow_policy,
    check_known,
    deny_policies,
)
from registry_core.broker.remember.policy_file import Policy, PolicyKey, iso_time
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import OllieError, PolicyError
from registry_core.registry import Registry

COLUMNS = ("Tool", "Kind", "Host", "Decision", "Expires", "Bound executable")
DURATION_CHOICES = (Remember.MINUTES_15, Remember.HOUR, Remember.ALWAYS)


class PolicySource(Protocol):
    """What the window needs of a policy store (``PolicyStore`` has it all)."""

    def list(self) -> Sequence[Policy]: ...

    def revoke(self, tool: str, kind: Kind | str | None = None, host: str | None = None) -> int: ...

    def revoke_all(self) -> int: ...

    def set(self, policy: Policy) -> None: ...

    def change_duration(
        self, tool: str, kind: Kind | str, host: str, remember: Remember
    ) -> Policy | None: ...


def kind_text(kind: Kind) -> str:
    return "run as root (sudo)" if kind is Kind.SUDO else "sandbox escape"


def executable_text(policy: Policy) -> str:
    if policy.decision is Decision.DENY:
        return "any (a deny applies to every executable)"
    sha = c.short_sha(policy.sha256)
    return f"{policy.executable or '?'}  (sha256 {sha})" if sha else policy.executable or "?"


class PolicyTableModel(DecisionTableModel[Policy]):
    """A read-only table over a snapshot of policies; ``UserRole`` gives the :class:`Policy`."""

    columns = COLUMNS
    decision_column = 3

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._now = 0.0

    def set_policies(self, policies: Sequence[Policy], now: float) -> None:
        self._now = now
        self.set_rows(policies)

    def policy(self, row: int) -> Policy:
        return self.row_item(row)

    def text(self, policy: Policy, column: int) -> str:
        texts = (
            policy.tool,
            kind_text(policy.kind),
            policy.host,
            policy.decision.value,
            expires_text(policy, self._now),
            executable_text(policy),
        )
        return texts[column]

    def tooltip(self, policy: Policy, column: int) -> str:
        if column == 4:
            when = "" if policy.expires is None else f", until {iso_time(policy.expires)}"
            return f"{policy.remember.label}{when}"
        if column == 5 and policy.sha256:
            return f"{policy.executable}\nsha256 {policy.sha256}"
        return c.visible(policy.describe())


class PoliciesWindow(QWidget):
    """Remembered decisions: revoke one, revoke all, change a duration."""

    policies_changed = Signal()
    """Emitted after this window changed the store."""

    def __init__(
        self,
        store: PolicySource,
        *,
        registry: Callable[[], Registry] | None = None,
        host: str = "",
        actions: ActionRuleSource | None = None,
        refresh_ms: int = 5000,
        clock: Callable[[], float] = time.time,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._registry = registry
        self._host = host
        self._clock = clock
        self.confirm_box: QMessageBox | None = None
        self.editor: PolicyEditor | None = None
        self.setWindowTitle("Ollie — remembered decisions")
        self.setAccessibleName("Remembered decisions")
        self.resize(940, 420 if actions is None else 640)
        # Agents' own actions (ollie-approve), when the broker's rule store is given.
        self.action_rules: ActionRulesPanel | None = None
        if actions is not None:
            self.action_rules = ActionRulesPanel(
                actions, clock=clock, on_change=self.policies_changed.emit
            )

        intro = QLabel(
            "Answers you asked Ollie to remember. A remembered allow holds only while the"
            " tool's executable is unchanged; a revoked decision is asked again next time."
        )
        intro.setWordWrap(True)
        intro.setAccessibleName("About remembered decisions")

        self.model = PolicyTableModel(self)
        self.table = decision_table(self.model, "Remembered decisions table")
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.horizontalHeader().setSectionResizeMode(
            len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch
        )

        self.revoke_button = QPushButton("&Revoke")
        self.revoke_button.setAccessibleName("Revoke the selected decisions")
        self.revoke_button.clicked.connect(self.revoke_selected)
        self.revoke_all_button = QPushButton("Revoke a&ll…")
        self.revoke_all_button.setAccessibleName("Revoke all remembered decisions")
        self.revoke_all_button.clicked.connect(lambda: self.revoke_all(confirm=True))
        self.duration_combo = QComboBox()
        self.duration_combo.setAccessibleName("New duration")
        for choice in DURATION_CHOICES:
            self.duration_combo.addItem(choice.label, choice.value)  # Qt keeps str, not enums
        duration_label = QLabel("&Duration:")
        duration_label.setBuddy(self.duration_combo)
        self.change_button = QPushButton("&Change")
        self.change_button.setAccessibleName("Change the duration of the selected decisions")
        self.change_button.clicked.connect(self.change_selected)

        self.new_button = QPushButton("&New…")
        self.new_button.setAccessibleName("Remember a new decision")
        self.new_button.clicked.connect(self._new)
        self.edit_button = QPushButton("&Edit…")
        self.edit_button.setAccessibleName("Edit the selected decision")
        self.edit_button.clicked.connect(self._edit_selected)
        self.new_button.setVisible(registry is not None)
        self.edit_button.setVisible(registry is not None)

        self.status_label = status_label()
        self.status_label.setWordWrap(True)

        buttons = QHBoxLayout()
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.revoke_button)
        buttons.addWidget(self.revoke_all_button)
        buttons.addStretch(1)
        buttons.addWidget(duration_label)
        buttons.addWidget(self.duration_combo)
        buttons.addWidget(self.change_button)

        layout = window_layout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.status_label)
        if self.action_rules is not None:
            layout.addWidget(self.action_rules, 1)
        layout.addLayout(close_row(self))

        self._timer = QTimer(self)
        self._timer.setInterval(max(250, refresh_ms))
        self._timer.timeout.connect(self.refresh)
        selection = self.table.selectionModel()
        selection.selectionChanged.connect(self._update_buttons)
        self.refresh()

    # --- public ------------------------------------------------------------------

    def refresh(self) -> None:
        """Reload from the stores, keeping the selection (by tool, kind, host)."""
        if self.action_rules is not None:
            self.action_rules.refresh()
        selected = {p.key for p in self.selected_policies()}
        try:
            policies = self._store.list()
        except PolicyError as exc:
            self._say(f"Could not read the remembered decisions: {exc}", error=True)
            policies = []
        self.model.set_policies(policies, self._clock())
        self._select_keys(selected)
        if not policies and not self.status_label.property("error"):
            self._say("No remembered decisions: Ollie asks every time.")
        elif not self.status_label.property("error"):
            session = sum(1 for p in policies if p.remember is Remember.SESSION)
            note = ""
            if session:
                # `ollie-tools policy list` reads policies.yaml; session ones live only here.
                note = (
                    f" ({session} for this session only: kept by the tray, not in"
                    " policies.yaml, so `ollie-tools policy list` does not show "
                    f"{'it' if session == 1 else 'them'})"
                )
            self._say(f"{count_text(len(policies), 'remembered decision')}{note}.")
        self._update_buttons()

    def store_changed(self) -> None:
        """The policy file changed elsewhere: reload (a slot for the app)."""
        self.refresh()

    def selected_policies(self) -> list[Policy]:
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [self.model.policy(row) for row in rows if row < self.model.rowCount()]

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def revoke_selected(self) -> None:
        chosen = self.selected_policies()
        if not chosen:
            return
        self._edit(
            lambda: [self._store.revoke(p.tool, p.kind, p.host) for p in chosen],
            f"Revoked {count_text(len(chosen), 'decision')}.",
        )

    def revoke_all(self, *, confirm: bool = True) -> None:
        """Forget every remembered decision, after asking when ``confirm``."""
        if not confirm:

            def both() -> None:
                self._store.revoke_all()
                if self.action_rules is not None:
                    self.action_rules.revoke_all()

            self._edit(both, "Revoked every remembered decision.")
            return
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Ollie — revoke all?")
        box.setText("Revoke every remembered decision?")
        again = "Ollie will ask again the next time each tool needs elevation"
        if self.action_rules is not None:
            again += " and each agent's action needs your answer"
        box.setInformativeText(f"{again}.")
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.button(QMessageBox.StandardButton.Yes).setText("Revoke all")
        box.setAccessibleName("Confirm revoke all")
        box.finished.connect(lambda result: self._confirmed(box, result))
        self.confirm_box = box
        box.open()

    def change_selected(self) -> None:
        chosen = self.selected_policies()
        if not chosen:
            return
        remember = Remember(self.duration_combo.currentData())
        self._edit(
            lambda: [self._store.change_duration(p.tool, p.kind, p.host, remember) for p in chosen],
            f"Changed {count_text(len(chosen), 'decision')} to “{remember.label.lower()}”.",
        )

    def open_editor(self, editing: Policy | None = None) -> PolicyEditor:
        """The New…/Edit… dialog (window-modal, opened with ``open()``)."""
        names = [t.name for t in self._registry().all()] if self._registry else []
        editor = PolicyEditor(names, self._host, editing=editing, parent=self)
        editor.accepted.connect(lambda: self.save_choice(editor.choice(), editing))
        editor.finished.connect(editor.deleteLater)
        self.editor = editor
        editor.open()
        return editor

    def save_choice(self, choice: PolicyChoice, replacing: Policy | None = None) -> None:
        """Store what the editor chose, built exactly as ``ollie-tools policy`` builds it."""

        def action() -> None:
            if self._registry is None:
                raise PolicyError("no registry to check the tool against")
            registry = self._registry()
            try:
                check_known(registry, choice.tool, "this host's tools")
            except UnknownToolError as exc:
                raise PolicyError(f"no tool named {exc.name!r} on this host") from exc
            if not choice.host:
                raise PolicyError("a rule needs a host")
            now = self._clock()
            if choice.decision is Decision.ALLOW:
                policies = [
                    allow_policy(
                        registry,
                        choice.tool,
                        kind=choice.kind,
                        host=choice.host,
                        remember=choice.remember,
                        now=now,
                    )
                ]
            else:
                policies = deny_policies(choice.tool, kind=choice.kind, host=choice.host, now=now)
            for policy in policies:
                self._store.set(policy)
            if replacing is not None and replacing.key not in {p.key for p in policies}:
                self._store.revoke(replacing.tool, replacing.kind, replacing.host)

        verb = "allow" if choice.decision is Decision.ALLOW else "deny"
        self._edit(action, f"Remembered: {verb} {choice.tool} on {choice.host}.")

    def _new(self) -> None:
        self.open_editor()

    def _edit_selected(self) -> None:
        chosen = self.selected_policies()
        if len(chosen) == 1:
            self.open_editor(chosen[0])

    # --- events ------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()
        self._timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._timer.stop()

    # --- internals ---------------------------------------------------------------

    def _confirmed(self, box: QMessageBox, result: int) -> None:
        if self.confirm_box is box:
            self.confirm_box = None
        box.deleteLater()
        if result == QMessageBox.StandardButton.Yes.value:
            self.revoke_all(confirm=False)

    def _edit(self, action: Callable[[], object], done: str) -> None:
        self.status_label.setProperty("error", False)
        try:
            action()
        except OllieError as exc:
            self.refresh()
            self._say(str(exc), error=True)
            return
        finally:
            self.policies_changed.emit()
        self.refresh()
        self._say(done)

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status_label.setText(c.visible(text))
        self.status_label.setProperty("error", error)
        self.status_label.setStyleSheet(f"color: {c.RED_DARK};" if error else "")

    def _select_keys(self, keys: set[PolicyKey]) -> None:
        if not keys:
            return
        selection = QItemSelection()
        for row in range(self.model.rowCount()):
            if self.model.policy(row).key in keys:
                selection.select(self.model.index(row, 0), self.model.index(row, len(COLUMNS) - 1))
        self.table.selectionModel().select(
            selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
        )

    def _update_buttons(self) -> None:
        has_rows = self.model.rowCount() > 0
        has_selection = bool(self.table.selectionModel().selectedRows())
        self.revoke_button.setEnabled(has_selection)
        self.edit_button.setEnabled(len(self.table.selectionModel().selectedRows()) == 1)
        self.change_button.setEnabled(has_selection)
        self.duration_combo.setEnabled(has_selection)
        has_actions = self.action_rules is not None and self.action_rules.model.rowCount() > 0
        self.revoke_all_button.setEnabled(has_rows or has_actions)
