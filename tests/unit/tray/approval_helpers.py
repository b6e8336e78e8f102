"""Shared pieces of the approval dialog's unit tests: showing a dialog, its answers.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from registry_core.broker.question import Approval, ApprovalRequest


def shown(qtbot: QtBot, request: ApprovalRequest, **kwargs: object) -> ApprovalDialog:
    """The dialog for ``request`` on screen (armed after 20 ms unless told otherwise)."""
    kwargs.setdefault("arm_delay_ms", 20)
    dialog = ApprovalDialog(request, **kwargs)  # type: ignore[arg-type]
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def answers(dialog: ApprovalDialog) -> list[Approval]:
    """Every answer the dialog gives from now on, in order."""
    items: list[Approval] = []
    dialog.decided.connect(items.append)
    return items
