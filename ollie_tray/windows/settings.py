"""The Settings window: the common entries of ``tray.yaml`` (ollie_tray/settings.py).

It shows the file's values (not the flags of this run), and **Save** writes the
file back through :func:`ollie_tray.settings.save` (the commented template with
the new values; comments a person added to the file are not kept).  Keys the
window does not show keep the values the file had.  Changes apply from the next
start; the window says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ollie_tray import settings
from ollie_tray.settings import COUNTDOWN_RANGE, TraySettings


class SettingsWindow(QDialog):
    def __init__(self, env: Mapping[str, str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.env = env
        self.setWindowTitle("Ollie — settings")
        self.setAccessibleName("Ollie Tray settings")
        self.loaded = settings.load(env)
        self.countdown = QSpinBox()
        self.countdown.setRange(*COUNTDOWN_RANGE)
        self.countdown.setSuffix(" s")
        self.countdown.setValue(self.loaded.countdown_s)
        self.countdown.setAccessibleName("Countdown before an unanswered request is denied")
        self.require_password = QCheckBox("Approvals need my login password")
        self.require_password.setChecked(self.loaded.require_password)
        form = QFormLayout()
        form.addRow("Deny unanswered requests after", self.countdown)
        form.addRow("", self.require_password)
        note = QLabel(f"Saved to {settings.settings_path(env)}; applies from the next start.")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        self.buttons = buttons
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)

    def chosen(self) -> TraySettings:
        """The file's settings with what the window shows."""
        return replace(
            self.loaded,
            countdown_s=self.countdown.value(),
            require_password=self.require_password.isChecked(),
        )

    def save(self) -> None:
        self.loaded = self.chosen()
        settings.save(self.env, self.loaded)
        self.accept()
