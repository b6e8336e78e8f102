"""The "confirm with your login password" step after Approve (opt-in, ollie_tray/login_check.py).

One dialog per attempt; :attr:`LoginCheckDialog.submitted` fires once with
the typed password (``str``) or ``None`` (Cancel, Esc, closing).  The field
is masked and wiped when the dialog ends, as in the sudo password dialog.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QVBoxLayout, QWidget

from ollie_tray.dialogs import common as c


class LoginCheckDialog(QDialog):
    submitted = Signal(object)

    def __init__(
        self, tool: str, user: str, retry_text: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._finished = False
        self.setWindowTitle(f"Ollie — confirm approving {c.visible(tool)}")
        self.setWindowFlags(
            Qt.WindowType.Dialog
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.WindowTitleHint
            | Qt.WindowType.WindowCloseButtonHint
        )
        self.setMinimumWidth(420)
        layout = QVBoxLayout(self)
        layout.addWidget(
            c.plain_label(
                f"You approved {c.visible(tool)}. Type the login password of"
                f" {c.visible(user)} to confirm (required by your settings)."
            )
        )
        self.retry_label = QLabel(retry_text)
        self.retry_label.setTextFormat(Qt.TextFormat.PlainText)
        self.retry_label.setStyleSheet(f"color: {c.RED_DARK}; font-weight: bold;")
        self.retry_label.setVisible(bool(retry_text))
        layout.addWidget(self.retry_label)
        self._field = QLineEdit()
        self._field.setEchoMode(QLineEdit.EchoMode.Password)
        self._field.setAccessibleName("Login password")
        layout.addWidget(self._field)
        box = QDialogButtonBox()
        self._cancel = box.addButton("&Cancel", QDialogButtonBox.ButtonRole.RejectRole)
        self._ok = box.addButton("C&onfirm", QDialogButtonBox.ButtonRole.AcceptRole)
        self._ok.setDefault(True)
        self._ok.clicked.connect(self._on_ok)
        self._cancel.clicked.connect(self.reject)
        layout.addWidget(box)
        self._field.setFocus()

    @property
    def password_field(self) -> QLineEdit:
        return self._field

    @property
    def ok_button(self) -> QWidget:
        return self._ok

    def withdraw(self, reason: str) -> None:
        self._finished = True
        self._wipe()
        super().done(QDialog.DialogCode.Rejected)

    def accept(self) -> None:
        self._on_ok()

    def reject(self) -> None:
        self._finish(None)

    def closeEvent(self, event: QCloseEvent) -> None:
        self._finish(None)
        event.accept()

    def _on_ok(self) -> None:
        self._finish(self._field.text())

    def _wipe(self) -> None:
        self._field.setText("\0" * max(len(self._field.text()), 16))
        self._field.clear()

    def _finish(self, password: str | None) -> None:
        if self._finished:
            return
        self._finished = True
        try:
            self.submitted.emit(password)
        finally:
            self._wipe()
            super().done(QDialog.DialogCode.Rejected)
