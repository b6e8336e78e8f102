"""At the default arming delay, Approve is still disabled ~300 ms after the dialog shows.

The other dialog tests arm after 50 ms to stay fast; a default of 0 ms (or an
arming timer started at construction instead of at showing) passes them.  This
test keeps the real default and looks after 300 ms.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QElapsedTimer
from pytestqt.qtbot import QtBot

from ollie_tray.app import AppOptions
from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.qt_prompter import PrompterSettings
from registry_core.broker.question import ApprovalRequest


def test_the_defaults_arm_after_about_700_ms() -> None:
    assert PrompterSettings().arm_delay_ms == 700
    assert AppOptions().arm_delay_ms == 700


def test_approve_is_still_disabled_300_ms_after_showing(
    qtbot: QtBot, approval_request: Callable[..., ApprovalRequest]
) -> None:
    dialog = ApprovalDialog(approval_request())  # the default arming delay
    qtbot.addWidget(dialog)
    qtbot.wait(400)  # built but not shown: the delay has not begun
    dialog.show()
    clock = QElapsedTimer()
    clock.start()
    qtbot.waitExposed(dialog)
    assert not dialog.approve_button.isEnabled()
    qtbot.wait(300)
    elapsed = clock.elapsed()
    if elapsed < 650:  # on a machine too loaded to look in time, only the end is checked
        assert not dialog.approve_button.isEnabled(), f"armed after {elapsed} ms"
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=5000)
    assert clock.elapsed() >= 600  # Qt's coarse timers may fire up to 5% early
