"""The password dialog: masked input, retry state, keyring choice, one answer, no traces."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QLabel, QLineEdit, QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.password import NO_KEYRING_TIP, PasswordDialog
from registry_core.broker.question import PasswordAnswer, PasswordRequest

Factory = Callable[..., PasswordRequest]
Texts = Callable[[QWidget], str]
SECRET = "correct horse battery staple"


class Answers:
    def __init__(self, dialog: PasswordDialog) -> None:
        self.items: list[PasswordAnswer] = []
        dialog.submitted.connect(self.items.append)

    @property
    def only(self) -> PasswordAnswer:
        assert len(self.items) == 1, self.items
        return self.items[0]


def make(
    qtbot: QtBot, request: PasswordRequest, *, keyring_available: bool = True
) -> PasswordDialog:
    dialog = PasswordDialog(request, keyring_available=keyring_available)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_shows_prompt_user_and_what_was_approved(
    qtbot: QtBot, password_request: Factory, widget_texts: Texts
) -> None:
    dialog = make(qtbot, password_request())
    text = widget_texts(dialog)
    assert "[sudo] password for alice:" in text
    assert "alice" in text
    assert "system_logs — run as root via sudo" in text
    assert "laptop" in text
    assert dialog.windowTitle() == "Ollie — password for system_logs"
    assert dialog.windowFlags() & Qt.WindowType.WindowStaysOnTopHint


def test_masked_by_default_and_toggle_shows(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    field = dialog.password_field
    assert field.echoMode() is QLineEdit.EchoMode.Password
    assert dialog.show_button.isCheckable()
    assert not dialog.show_button.isChecked()
    assert dialog.show_button.accessibleName() == "Show password"
    qtbot.mouseClick(dialog.show_button, Qt.MouseButton.LeftButton)
    assert field.echoMode() is QLineEdit.EchoMode.Normal
    assert dialog.show_button.accessibleName() == "Hide password"
    qtbot.mouseClick(dialog.show_button, Qt.MouseButton.LeftButton)
    assert field.echoMode() is QLineEdit.EchoMode.Password


def test_field_has_focus(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    qtbot.waitUntil(lambda: dialog.focusWidget() is dialog.password_field)
    assert dialog.ok_button.isDefault()


def test_no_retry_text_on_the_first_attempt(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request(attempt=1))
    assert not dialog.retry_label.isVisible()


@pytest.mark.parametrize("attempt", [2, 3])
def test_retry_text_is_shown_in_red(qtbot: QtBot, password_request: Factory, attempt: int) -> None:
    dialog = make(qtbot, password_request(attempt=attempt))
    assert dialog.retry_label.isVisible()
    assert dialog.retry_label.text() == f"Wrong password, try again ({attempt}/3)"
    assert "#8e0000" in dialog.retry_label.styleSheet()


def test_keyring_box_is_off_by_default(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    assert dialog.keyring_checkbox.isEnabled()
    assert not dialog.keyring_checkbox.isChecked()


def test_keyring_unavailable_disables_the_box(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request(), keyring_available=False)
    assert not dialog.keyring_checkbox.isEnabled()
    assert not dialog.keyring_checkbox.isChecked()
    assert dialog.keyring_checkbox.toolTip() == NO_KEYRING_TIP


@pytest.mark.parametrize("store", [False, True])
def test_ok_submits_password_and_keyring_choice(
    qtbot: QtBot, password_request: Factory, store: bool
) -> None:
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    dialog.keyring_checkbox.setChecked(store)
    with qtbot.waitSignal(dialog.submitted) as blocker:
        qtbot.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    assert blocker.args == [PasswordAnswer(SECRET, store_in_keyring=store)]
    assert not dialog.isVisible()


def test_enter_submits(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    answers = Answers(dialog)
    qtbot.keyClick(dialog.password_field, Qt.Key.Key_Return)
    assert answers.only == PasswordAnswer(SECRET, store_in_keyring=False)


def test_cancel_answers_none(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    answers = Answers(dialog)
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert answers.only.password is None
    assert not answers.only.store_in_keyring


def test_escape_answers_none(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    answers = Answers(dialog)
    qtbot.keyClick(dialog.password_field, Qt.Key.Key_Escape)
    assert answers.only == PasswordAnswer(None)


def test_closing_answers_none(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    answers = Answers(dialog)
    dialog.close()
    assert answers.only == PasswordAnswer(None)


def test_field_is_wiped_after_submit(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    field = dialog.password_field
    qtbot.mouseClick(dialog.show_button, Qt.MouseButton.LeftButton)  # shown: undo is live
    qtbot.keyClicks(field, SECRET)
    assert field.isUndoAvailable()
    dialog.ok_button.click()
    assert field.text() == ""
    assert not field.isUndoAvailable()  # the undo history no longer holds the password
    assert not field.isRedoAvailable()
    assert field.echoMode() is QLineEdit.EchoMode.Password


def test_submitted_once(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    answers = Answers(dialog)
    dialog.ok_button.click()
    dialog.accept()
    dialog.reject()
    dialog.close()
    assert answers.only.password == SECRET


def test_withdraw_closes_without_an_answer(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    answers = Answers(dialog)
    dialog.withdraw("the grant expired")
    assert not dialog.isVisible()
    assert dialog.withdrawn_reason == "the grant expired"
    assert dialog.password_field.text() == ""
    dialog.close()
    dialog.reject()
    assert answers.items == []


def test_password_is_never_logged(
    qtbot: QtBot, password_request: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dialog = make(qtbot, password_request())
    qtbot.keyClicks(dialog.password_field, SECRET)
    answers = Answers(dialog)
    dialog.ok_button.click()
    assert SECRET not in caplog.text
    assert SECRET not in repr(answers.only)


def test_accessible_names_everywhere(qtbot: QtBot, password_request: Factory) -> None:
    dialog = make(qtbot, password_request(attempt=2), keyring_available=False)
    controls = [
        *dialog.findChildren(QAbstractButton),
        *dialog.findChildren(QLineEdit),
        *(w for w in dialog.findChildren(QLabel) if w.text()),
    ]
    assert [w for w in controls if not w.accessibleName()] == []
    assert dialog.password_field.accessibleName() == "Password"
    assert dialog.keyring_checkbox.accessibleName() == "Remember the password in the keyring"
