"""The password dialog of the credential gate: sudo asks for the user's password.

Shown only for a request that already passed the elevation gate.  The
caller shows it with ``show()`` and listens to
:attr:`PasswordDialog.submitted`, which fires once with a
:class:`PasswordAnswer`: OK (or Enter) answers the password and the
keyring choice; Cancel, Esc and the close button answer ``None`` (= deny).
:meth:`PasswordDialog.withdraw` takes it away without an answer.

Secrets: the password lives in the line edit only until it is emitted;
then the field is overwritten and cleared (``setText`` also drops Qt's undo
history, which would otherwise keep the password).  Nothing here logs.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs import textboxes as t
from ollie_tray.dialogs.real_input import synthetic_input_banner
from registry_core.broker.question import PasswordAnswer, PasswordRequest
from registry_core.broker.wire.messages import Kind

NO_KEYRING_TIP = "No keyring (Secret Service or KWallet) is available on this desktop"


class PasswordDialog(QDialog):
    """Ask for the sudo password of one approved request.  See the module docstring."""

    submitted = Signal(object)
    """Emitted once with the :class:`PasswordAnswer`."""

    def __init__(
        self,
        request: PasswordRequest,
        *,
        keyring_available: bool = True,
        test_banner: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.request = request
        self._finished = False
        self.withdrawn_reason: str | None = None
        approval = request.approval
        tool = c.visible(approval.tool)

        self.setWindowTitle(f"Ollie — password for {tool}")
        self.setWindowFlags(
            Qt.WindowType.Dialog
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.WindowTitleHint
            | Qt.WindowType.WindowCloseButtonHint
        )
        self.setAccessibleName(f"Password for {tool}")
        self.setMinimumWidth(500)
        self.setMaximumWidth(760)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        if test_banner:  # the synthetic-input test switch is on (dialogs/real_input.py)
            layout.addWidget(synthetic_input_banner())
        layout.addLayout(self._header(tool))

        self.retry_label = QLabel(request.retry_text)
        self.retry_label.setTextFormat(Qt.TextFormat.PlainText)
        self.retry_label.setAccessibleName(request.retry_text or "No retry")
        self.retry_label.setVisible(request.retry)
        self.retry_label.setStyleSheet(
            f"QLabel {{ color: {c.RED_DARK}; background: {c.RED_TINT};"
            f" border: 1px solid {c.RED}; border-left: 5px solid {c.RED};"
            " border-radius: 6px; padding: 6px 10px; font-weight: bold; }"
        )
        layout.addWidget(self.retry_label)

        form = c.Form()
        prompt = t.value_label(request.prompt.strip() or "(none)", "sudo prompt", mono=True)
        form.add_row("sudo asks", prompt)
        form.add_row("User", t.value_label(request.user, "User"))
        form.add_row("Host", t.value_label(approval.host, "Host"))
        form.add_row("Approved", t.value_label(f"{tool} — {approval.what}", "Approved request"))

        self._field = QLineEdit()
        self._field.setEchoMode(QLineEdit.EchoMode.Password)
        self._field.setAccessibleName("Password")
        self._field.setPlaceholderText(f"Password of {c.visible(request.user)}")
        self._field.setMinimumWidth(260)
        self._toggle = QToolButton()
        self._toggle.setCheckable(True)
        self._toggle.setText("Show")
        self._toggle.setAccessibleName("Show password")
        self._toggle.setToolTip("Show the password as you type it")
        self._toggle.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self._toggle.toggled.connect(self._set_shown)
        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(self._field, 1)
        row.addWidget(self._toggle)
        holder = QWidget()
        holder.setLayout(row)
        row.setContentsMargins(0, 0, 0, 0)
        form.add_space(4)
        form.add_row("&Password", holder, control=True).setBuddy(self._field)
        layout.addLayout(form)

        self._keyring = QCheckBox(
            f"Remember in &keyring for {c.visible(request.user)}@{c.visible(approval.host)}"
        )
        self._keyring.setAccessibleName("Remember the password in the keyring")
        self._keyring.setChecked(False)
        if keyring_available:
            self._keyring.setToolTip(
                "Stored in your desktop keyring (which may ask to be unlocked); used only for "
                "requests you already approved. Until you tick this, the keyring is never asked."
            )
        else:
            self._keyring.setEnabled(False)
            self._keyring.setToolTip(NO_KEYRING_TIP)
        layout.addWidget(self._keyring)

        box = QDialogButtonBox()
        self._cancel = box.addButton("&Cancel", QDialogButtonBox.ButtonRole.RejectRole)
        self._ok = box.addButton("&OK", QDialogButtonBox.ButtonRole.AcceptRole)
        self._cancel.setAccessibleName("Cancel")
        self._ok.setAccessibleName("OK")
        self._cancel.setAutoDefault(False)
        self._ok.setDefault(True)
        self._ok.setMinimumWidth(96)
        self._cancel.setMinimumWidth(96)
        self._ok.clicked.connect(self._on_ok)
        self._cancel.clicked.connect(self.reject)
        layout.addSpacing(4)
        layout.addWidget(box)
        self._field.setFocus()

    def _header(self, tool: str) -> QHBoxLayout:
        sudo = self.request.approval.kind is Kind.SUDO
        icon = c.icon_label(
            c.glyph_pixmap(c.RED if sudo else c.AMBER, "•", 40, shape="lock"), "Password"
        )
        self.title_label = c.plain_label("Password needed for sudo", scale=1.35)
        user = self.request.user
        explain = c.plain_label(
            f"You approved {tool}. To run it as root, sudo needs the password of {user}."
        )
        return c.header_row(icon, self.title_label, explain)

    # --- public ------------------------------------------------------------------

    @property
    def password_field(self) -> QLineEdit:
        return self._field

    @property
    def show_button(self) -> QToolButton:
        return self._toggle

    @property
    def keyring_checkbox(self) -> QCheckBox:
        return self._keyring

    @property
    def ok_button(self) -> QPushButton:
        return self._ok

    @property
    def cancel_button(self) -> QPushButton:
        return self._cancel

    @property
    def is_finished(self) -> bool:
        return self._finished

    def withdraw(self, reason: str) -> None:
        """Close without answering: the broker no longer wants the password."""
        if self._finished:
            return
        self.withdrawn_reason = reason
        self._finished = True
        self._wipe()
        super().done(QDialog.DialogCode.Rejected)

    # --- events ------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        t.fit_height(self)
        self.raise_()
        self.activateWindow()
        self._field.setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    def accept(self) -> None:
        self._on_ok()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            t.fit_height(self)  # wrapped text needs more or fewer lines now

    def reject(self) -> None:
        """Cancel and Esc: no password, the request is denied."""
        self._finish(PasswordAnswer(None))

    def closeEvent(self, event: QCloseEvent) -> None:
        self._finish(PasswordAnswer(None))
        event.accept()

    # --- internals ---------------------------------------------------------------

    def _set_shown(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        self._field.setEchoMode(mode)
        self._toggle.setText("Hide" if shown else "Show")
        self._toggle.setAccessibleName("Hide password" if shown else "Show password")

    def _on_ok(self) -> None:
        if self._finished:
            return
        answer = PasswordAnswer(self._field.text(), store_in_keyring=self._keyring.isChecked())
        self._finish(answer)

    def _wipe(self) -> None:
        # Overwrite, then clear: setText() also empties the undo history.
        self._field.setText("\0" * max(len(self._field.text()), 16))
        self._field.setText("")
        self._field.clear()
        self._toggle.setChecked(False)

    def _finish(self, answer: PasswordAnswer) -> None:
        if self._finished:
            return
        self._finished = True
        self._ok.setEnabled(False)
        self._cancel.setEnabled(False)
        try:
            self.submitted.emit(answer)
        finally:
            self._wipe()
            super().done(
                QDialog.DialogCode.Accepted
                if answer.password is not None
                else QDialog.DialogCode.Rejected
            )
