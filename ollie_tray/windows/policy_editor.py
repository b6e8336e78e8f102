"""Create or edit a remembered decision by hand: the Policies window's New… and Edit… dialog.

The person picks a tool (from the registry, or types a name), allow or deny,
the kind, the host and, for an allow, how long.  What that becomes is decided
by :mod:`registry_core.broker.remember.policy_build`, exactly as for
``ollie-tools policy allow|deny``: an allow is bound to the tool's executable
and sha256 as they are now; a name the registry does not know is refused.
The dialog only collects the choice (:meth:`PolicyEditor.choice`); the window
builds and stores the policies.  Opened with ``open()``, no nested loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from registry_core.broker.question import Remember
from registry_core.broker.remember.policy_build import ALLOW_DURATIONS
from registry_core.broker.remember.policy_file import Policy
from registry_core.broker.wire.messages import Decision, Kind

KIND_DEFAULT = "default"


@dataclass(frozen=True)
class PolicyChoice:
    """What the person chose; ``kind`` ``None`` = the default (allow: the tool's, deny: both)."""

    tool: str
    decision: Decision
    kind: Kind | None
    host: str
    remember: Remember


class PolicyEditor(QDialog):
    """New or edited rule; ``editing`` is the policy being replaced, if any."""

    def __init__(
        self,
        tools: Sequence[str],
        host: str,
        *,
        editing: Policy | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.editing = editing
        self.setWindowTitle("Ollie — edit remembered decision" if editing else "Ollie — new rule")
        self.setAccessibleName("Remembered decision editor")

        self.tool_combo = QComboBox()
        self.tool_combo.setEditable(True)
        self.tool_combo.setAccessibleName("Tool")
        self.tool_combo.addItems(sorted(tools))
        self.tool_combo.setToolTip(
            "A tool of this host's registry (a rule for an unknown name is refused)"
        )
        self.decision_combo = QComboBox()
        self.decision_combo.setAccessibleName("Decision")
        self.decision_combo.addItem("Allow without asking", Decision.ALLOW.value)
        self.decision_combo.addItem("Deny always", Decision.DENY.value)
        self.kind_combo = QComboBox()
        self.kind_combo.setAccessibleName("Kind")
        self.kind_combo.addItem("Default", KIND_DEFAULT)
        self.kind_combo.addItem("Sandbox escape", Kind.SANDBOX.value)
        self.kind_combo.addItem("Run as root (sudo)", Kind.SUDO.value)
        self.kind_combo.setToolTip(
            "Default: an allow covers what the tool needs (sudo for sudo tools, else a sandbox "
            "escape); a deny covers both"
        )
        self.host_edit = QLineEdit(host)
        self.host_edit.setAccessibleName("Host")
        self.host_edit.setToolTip("The machine whose requests this rule decides")
        self.duration_combo = QComboBox()
        self.duration_combo.setAccessibleName("Duration")
        for choice in ALLOW_DURATIONS:
            self.duration_combo.addItem(choice.label, choice.value)
        self.duration_combo.setCurrentIndex(len(ALLOW_DURATIONS) - 1)
        self.decision_combo.currentIndexChanged.connect(self._decision_changed)

        form = QFormLayout()
        form.addRow("&Tool:", self.tool_combo)
        form.addRow("&Decision:", self.decision_combo)
        form.addRow("&Kind:", self.kind_combo)
        form.addRow("&Host:", self.host_edit)
        form.addRow("D&uration:", self.duration_combo)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("&Save")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)
        if editing is not None:
            self._load(editing)
        self._decision_changed()

    def choice(self) -> PolicyChoice:
        kind = self.kind_combo.currentData()
        decision = Decision(self.decision_combo.currentData())
        remember = (
            Remember(self.duration_combo.currentData())
            if decision is Decision.ALLOW
            else Remember.DENY_ALWAYS
        )
        return PolicyChoice(
            tool=self.tool_combo.currentText().strip(),
            decision=decision,
            kind=None if kind == KIND_DEFAULT else Kind(kind),
            host=self.host_edit.text().strip(),
            remember=remember,
        )

    def _load(self, policy: Policy) -> None:
        self.tool_combo.setCurrentText(policy.tool)
        self.decision_combo.setCurrentIndex(self.decision_combo.findData(policy.decision.value))
        self.kind_combo.setCurrentIndex(self.kind_combo.findData(policy.kind.value))
        self.host_edit.setText(policy.host)
        index = self.duration_combo.findData(policy.remember.value)
        if index >= 0:
            self.duration_combo.setCurrentIndex(index)

    def _decision_changed(self) -> None:
        allow = self.decision_combo.currentData() == Decision.ALLOW.value
        self.duration_combo.setEnabled(allow)
