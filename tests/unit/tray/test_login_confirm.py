"""Opt-in "require my login password to approve": Approve, then the password, or it is a denial.

The verifier here is a Fake (the real PAM check is
tests/integration/test_login_password_pam.py); the dialogs and the
prompter's flow are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from qt_async import run, until

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.login_check import LoginCheckDialog
from ollie_tray.login_check import require_password_from
from ollie_tray.main import build_parser
from ollie_tray.qt_prompter import PrompterSettings, QtPrompter
from registry_core.broker.question import Approval, ApprovalRequest

RIGHT = "correct horse"


class FakeVerifier:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, user: str, password: str) -> bool:
        self.seen.append(user)
        return password == RIGHT


def prompter(verify: FakeVerifier, *, required: bool = True) -> QtPrompter:
    settings = PrompterSettings(
        countdown_s=30, arm_delay_ms=10, require_password=required, verify_password=verify
    )
    return QtPrompter(settings=settings)


async def approve(p: QtPrompter) -> None:
    dialog = await until(lambda: p.current_dialog)
    assert isinstance(dialog, ApprovalDialog)
    await until(dialog.approve_button.isEnabled)
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)


async def type_password(p: QtPrompter, text: str, previous: object = None) -> LoginCheckDialog:
    dialog = await until(
        lambda: (
            p.current_dialog
            if isinstance(p.current_dialog, LoginCheckDialog) and p.current_dialog is not previous
            else None
        )
    )
    assert isinstance(dialog, LoginCheckDialog)
    dialog.password_field.setText(text)
    QTest.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    return dialog


def test_approval_counts_after_the_right_password(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    verify = FakeVerifier()
    p = prompter(verify)

    async def scenario() -> tuple[Approval, str]:
        task = asyncio.ensure_future(p.ask_approval(approval_request()))
        await approve(p)
        first = await type_password(p, "wrong")
        second = await until(
            lambda: (
                p.current_dialog
                if isinstance(p.current_dialog, LoginCheckDialog) and p.current_dialog is not first
                else None
            )
        )
        retry = second.retry_label.text()
        await type_password(p, RIGHT, first)
        return await task, retry

    answer, retry = run(qapp, scenario)
    assert answer.approved
    assert retry == "Wrong password, try again (1/3)"
    assert len(verify.seen) == 2


def test_cancel_or_three_wrong_passwords_deny(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    verify = FakeVerifier()
    p = prompter(verify)

    async def cancelled() -> Approval:
        task = asyncio.ensure_future(p.ask_approval(approval_request()))
        await approve(p)
        dialog = await until(lambda: isinstance(p.current_dialog, LoginCheckDialog))
        assert dialog
        current = p.current_dialog
        assert isinstance(current, LoginCheckDialog)
        current.reject()
        return await task

    async def three_wrong() -> Approval:
        task = asyncio.ensure_future(p.ask_approval(approval_request()))
        await approve(p)
        previous = None
        for _ in range(3):
            previous = await type_password(p, "nope", previous)
        return await task

    for scenario in (cancelled, three_wrong):
        answer = run(qapp, scenario)
        assert answer == Approval(False, answer.remember, "the login password was not confirmed")


def test_without_the_option_no_password_is_asked(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    verify = FakeVerifier()
    p = prompter(verify, required=False)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(p.ask_approval(approval_request()))
        await approve(p)
        return await task

    assert run(qapp, scenario).approved
    assert verify.seen == []


def test_the_option_is_off_by_default_and_opt_in() -> None:
    assert not build_parser().parse_args([]).require_password
    assert build_parser().parse_args(["--require-password"]).require_password
    assert not require_password_from({})
    assert require_password_from({"OLLIE_TRAY_REQUIRE_PASSWORD": "1"})
