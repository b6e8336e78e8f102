"""The approval dialog says what approving means, word for word (a mutation survived)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        (
            Kind.SUDO,
            "If you approve, this tool runs as root through sudo: it can read and change"
            " anything on this computer.",
        ),
        (
            Kind.SANDBOX,
            "If you approve, this tool runs outside the Landlock sandbox as you: it can reach"
            " all your files, the network and your desktop session.",
        ),
    ],
)
def test_the_consequence_is_spelled_out(
    qtbot: QtBot,
    approval_request: Callable[..., ApprovalRequest],
    widget_texts: Callable[[QWidget], str],
    kind: Kind,
    words: str,
) -> None:
    dialog = ApprovalDialog(approval_request(kind=kind), arm_delay_ms=50)
    qtbot.addWidget(dialog)
    assert words in " ".join(widget_texts(dialog).split())
