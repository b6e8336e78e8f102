"""The Qt prompter: dialogs as awaitables, withdrawal, early denial and the keyring rules."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from qt_async import run, until

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.password import PasswordDialog
from ollie_tray.keyring_consent import KeyringConsent
from ollie_tray.qt_prompter import PrompterSettings, QtPrompter
from registry_core.broker.question import (
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)


class FakeVault:
    """A keyring stand-in that records what the prompter does with it."""

    def __init__(self, stored: str | None = None, available: bool = True) -> None:
        self.stored = stored
        self.ok = available
        self.calls: list[str] = []

    def available(self) -> bool:
        return self.ok

    async def available_async(self) -> bool:
        self.calls.append("available")
        return self.ok

    async def get_async(self, user: str, host: str) -> str | None:
        self.calls.append(f"get {user}@{host}")
        return self.stored

    async def store_async(self, user: str, host: str, password: str) -> bool:
        self.calls.append(f"store {user}@{host}")
        self.stored = password
        return True

    async def delete_async(self, user: str, host: str) -> bool:
        self.calls.append(f"delete {user}@{host}")
        self.stored = None
        return True


def test_approval_dialog_answer_becomes_the_result(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    prompter = QtPrompter(settings=PrompterSettings(countdown_s=30, arm_delay_ms=10))

    async def scenario() -> Any:
        task = asyncio.ensure_future(prompter.ask_approval(approval_request()))
        dialog = await until(lambda: prompter.current_dialog)
        assert isinstance(dialog, ApprovalDialog)
        await until(dialog.approve_button.isEnabled)
        dialog.remember_combo.setCurrentIndex(dialog.remember_combo.findText("For 1 hour"))
        QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)  # a real click
        return await task

    answer = run(qapp, scenario)
    assert answer.approved
    assert answer.remember is Remember.HOUR
    assert prompter.current_dialog is None


def test_the_dialog_countdown_is_at_most_the_requesters_time(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    # ollie-elevate's step deadline reaches the dialog as request.timeout (what is left).
    prompter = QtPrompter(settings=PrompterSettings(countdown_s=60, arm_delay_ms=10))

    async def scenario() -> Any:
        task = asyncio.ensure_future(prompter.ask_approval(approval_request(timeout=7.9)))
        dialog = await until(lambda: prompter.current_dialog)
        text = dialog.countdown_label.text()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return text

    assert run(qapp, scenario) == "Denying automatically in 7 s"


def test_cancel_withdraws_the_dialog(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    prompter = QtPrompter()

    async def scenario() -> Any:
        task = asyncio.ensure_future(prompter.ask_approval(approval_request()))
        dialog = await until(lambda: prompter.current_dialog)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return dialog, task

    dialog, task = run(qapp, scenario)
    assert task.cancelled()
    assert dialog.is_finished
    assert prompter.current_dialog is None


def test_denied_from_a_notification_before_its_turn(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    prompter = QtPrompter()
    prompter.deny("r7")
    answer = run(qapp, lambda: prompter.ask_approval(approval_request(id="r7")))
    assert not answer.approved
    assert prompter.current_dialog is None


def consented(tmp_path: Path, *keys: str) -> KeyringConsent:
    consent = KeyringConsent(tmp_path / "config" / "keyring-consent.json")
    for key in keys or ("alice@laptop",):
        consent.grant(*key.split("@"))
    return consent


def test_stored_password_answers_the_first_attempt_without_a_dialog(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    vault = FakeVault(stored="from-keyring")
    prompter = QtPrompter(vault=vault, consent=consented(tmp_path))  # type: ignore[arg-type]
    answer = run(qapp, lambda: prompter.ask_password(password_request()))
    assert answer == PasswordAnswer("from-keyring")
    assert vault.calls == ["available", "get alice@laptop"]


def test_rejected_stored_password_is_deleted_and_the_person_asked(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    vault = FakeVault(stored="stale")
    prompter = QtPrompter(vault=vault, consent=consented(tmp_path))  # type: ignore[arg-type]

    async def scenario() -> Any:
        first = await prompter.ask_password(password_request(attempt=1))
        task = asyncio.ensure_future(prompter.ask_password(password_request(attempt=2)))
        dialog = await until(lambda: prompter.current_dialog)
        assert isinstance(dialog, PasswordDialog)
        dialog.password_field.setText("fresh")
        dialog.ok_button.click()
        return first, await task

    first, second = run(qapp, scenario)
    assert first.password == "stale"
    assert second.password == "fresh"
    assert "delete alice@laptop" in vault.calls
    assert vault.stored is None


def test_remember_in_keyring_stores_and_remote_requests_never_read_it(
    qapp: QApplication,
    password_request: Callable[..., PasswordRequest],
    approval_request: Callable[..., ApprovalRequest],
    tmp_path: Path,
) -> None:
    consent = KeyringConsent(tmp_path / "keyring-consent.json")
    vault = FakeVault()
    prompter = QtPrompter(vault=vault, consent=consent)  # type: ignore[arg-type]

    async def answer_with(request: PasswordRequest, store: bool) -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(request))
        dialog = await until(lambda: prompter.current_dialog)
        dialog.password_field.setText("pw")
        dialog.keyring_checkbox.setChecked(store)
        dialog.ok_button.click()
        return await task

    async def scenario() -> Any:
        await answer_with(password_request(), store=True)
        remote = password_request(approval=approval_request(id="r9", remote=True))
        return await answer_with(remote, store=False)

    run(qapp, scenario)
    # No consent yet: the first request did not touch the keyring before the tick.
    assert vault.calls[0] == "store alice@laptop"
    assert consent.granted("alice", "laptop")
    # The remote request showed a dialog instead of reading the stored password.
    assert vault.calls.count("get alice@laptop") == 0


# --- the keyring only on consent ------------------------------------------------------


async def _answer(prompter: QtPrompter, request: PasswordRequest, store: bool) -> PasswordAnswer:
    task = asyncio.ensure_future(prompter.ask_password(request))
    dialog = await until(lambda: prompter.current_dialog)
    assert isinstance(dialog, PasswordDialog)
    assert dialog.keyring_checkbox.isEnabled()
    assert not dialog.keyring_checkbox.isChecked()
    dialog.password_field.setText("typed")
    dialog.keyring_checkbox.setChecked(store)
    dialog.ok_button.click()
    return await task


def test_without_consent_the_keyring_is_never_touched(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    # Somebody else's consent, and a password sitting in the keyring: still not asked.
    vault = FakeVault(stored="in-the-keyring")
    consent = consented(tmp_path, "bob@laptop", "alice@elsewhere")
    prompter = QtPrompter(vault=vault, consent=consent)  # type: ignore[arg-type]
    answer = run(qapp, lambda: _answer(prompter, password_request(), store=False))
    assert answer.password == "typed"
    assert vault.calls == []  # not even "available"
    assert not consent.granted("alice", "laptop")


def test_ticking_records_consent_and_the_next_request_uses_the_keyring(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    vault = FakeVault()
    path = tmp_path / "cfg" / "keyring-consent.json"
    prompter = QtPrompter(vault=vault, consent=KeyringConsent(path))  # type: ignore[arg-type]

    async def scenario() -> PasswordAnswer:
        await _answer(prompter, password_request(), store=True)
        return await prompter.ask_password(password_request(id="p8"))

    second = run(qapp, scenario)
    assert second.password == "typed"  # from the keyring, no dialog
    assert vault.calls == ["store alice@laptop", "available", "get alice@laptop"]
    assert path.stat().st_mode & 0o777 == 0o600
    assert KeyringConsent(path).granted("alice", "laptop")


def test_a_failed_store_records_no_consent(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    class RefusingVault(FakeVault):
        async def store_async(self, user: str, host: str, password: str) -> bool:
            self.calls.append("store refused")
            return False

    vault = RefusingVault()
    consent = KeyringConsent(tmp_path / "keyring-consent.json")
    prompter = QtPrompter(vault=vault, consent=consent)  # type: ignore[arg-type]
    run(qapp, lambda: _answer(prompter, password_request(), store=True))
    assert vault.calls == ["store refused"]
    assert not consent.granted("alice", "laptop")


def test_leaving_the_box_unticked_withdraws_consent(
    qapp: QApplication, password_request: Callable[..., PasswordRequest], tmp_path: Path
) -> None:
    vault = FakeVault()  # consent given, but nothing stored (e.g. deleted meanwhile)
    consent = consented(tmp_path)
    prompter = QtPrompter(vault=vault, consent=consent)  # type: ignore[arg-type]
    run(qapp, lambda: _answer(prompter, password_request(), store=False))
    assert vault.calls == ["available", "get alice@laptop"]
    assert not consent.granted("alice", "laptop")


@pytest.mark.parametrize(
    "content", [b"{", b"[]", b'{"remember_in_keyring": "alice@laptop"}', b"\xff", b" " * 70000]
)
def test_a_corrupt_consent_file_means_no_consent(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "keyring-consent.json"
    path.write_bytes(content)
    consent = KeyringConsent(path)
    assert not consent.granted("alice", "laptop")
    consent.grant("alice", "laptop")  # rewritten whole
    assert KeyringConsent(path).granted("alice", "laptop")
