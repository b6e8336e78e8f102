"""Dialogs fit half of a 1280x800 screen: a tiling compositor's half tile must show Approve.

A window smaller than its minimum size is cut off, not shrunk, so the
minimum (what the widget asks for, and what its layout needs) must fit in a
640x800 tile less a title bar and a panel.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtWidgets import QApplication, QWidget

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.password import PasswordDialog
from registry_core.broker.question import ApprovalRequest, PasswordRequest
from registry_core.broker.wire.messages import Kind

TILE_W, TILE_H = 640, 800 - 30 - 26  # half the width; less a title bar and a panel


def _minimum(widget: QWidget) -> tuple[int, int]:
    hint = widget.minimumSizeHint()
    return max(widget.minimumWidth(), hint.width()), max(widget.minimumHeight(), hint.height())


@pytest.mark.parametrize("kind", [Kind.SANDBOX, Kind.SUDO])
def test_approval_dialog_fits_a_half_screen_tile(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest], kind: Kind
) -> None:
    dialog = ApprovalDialog(approval_request(kind=kind))
    width, height = _minimum(dialog)
    assert width <= TILE_W, f"minimum width {width} > {TILE_W}"
    assert height <= TILE_H, f"minimum height {height} > {TILE_H}"
    dialog.resize(TILE_W, TILE_H)
    dialog.show()
    qapp.processEvents()
    approve = dialog.approve_button
    right = approve.mapTo(dialog, approve.rect().bottomRight())
    assert 0 < right.x() <= dialog.width() and 0 < right.y() <= dialog.height()
    dialog.close()


def test_password_dialog_fits_a_half_screen_tile(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    request = PasswordRequest(
        id="p1",
        approval=approval_request(kind=Kind.SUDO),
        prompt="[sudo] password for me: ",
        user="me",
        attempt=1,
    )
    dialog = PasswordDialog(request)
    width, height = _minimum(dialog)
    assert width <= TILE_W and height <= TILE_H, (width, height)
