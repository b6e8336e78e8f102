"""The approval dialog, pinned where a person would notice a change.

Each test here was written for a mutant of ``ollie_tray/dialogs/approval.py``
that the other dialog tests let live: the countdown's last second and a
re-shown dialog, what Approve's tooltip says while it is not available, the
exact answer of the close button, the buttons after an answer, the queue's
wording, the log lines and the note after ignored input.  The countdown is
driven by a clock the test moves (the dialog reads ``time.monotonic`` through
its module), so no test waits for a real minute.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from approval_helpers import answers, shown
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QDialog, QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs import approval as approval_module
from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.common import RED
from ollie_tray.dialogs.real_input import SYNTHETIC_IGNORED
from ollie_tray.dialogs.textboxes import FitScrollArea
from ollie_tray.dialogs.xinput import Phase, Verdict
from registry_core.broker.decide.core import QueueInfo
from registry_core.broker.question import ActionDetails, Approval, ApprovalRequest, Remember
from registry_core.broker.wire.messages import ActionDisplay, PatternKind

Factory = Callable[..., ApprovalRequest]


class Clock:
    """Stands in for the ``time`` module the dialog reads its countdown from."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock(1000.0)
    monkeypatch.setattr(approval_module, "time", moved)
    return moved


@dataclass(frozen=True)
class RefusingJudge:
    """Calls every click on Approve synthetic (as X11 does for XTEST)."""

    keyboard_ok: bool = True
    notice: str | None = None
    accepts_synthetic: bool = False

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return Verdict.SYNTHETIC


def choose(dialog: ApprovalDialog, remember: Remember) -> None:
    combo = dialog.remember_combo
    combo.setCurrentIndex(combo.findData(remember.value))


# --- the countdown ------------------------------------------------------------------


def test_one_second_left_still_waits_and_says_so(
    qtbot: QtBot, approval_request: Factory, clock: Clock
) -> None:
    dialog = shown(qtbot, approval_request(), countdown_s=60)
    got = answers(dialog)
    clock.now += 59  # one second before the deadline
    qtbot.waitUntil(
        lambda: dialog.countdown_label.text() == "Denying automatically in 1 s", timeout=3000
    )
    assert got == []  # the last second is not skipped
    clock.now += 1
    qtbot.waitUntil(lambda: got != [], timeout=3000)
    assert got == [Approval(False, Remember.ONCE, "no answer within 60 s", timed_out=True)]
    assert dialog.countdown_label.text() == "Denying automatically in 0 s"


def test_showing_again_does_not_restart_the_countdown(
    qtbot: QtBot, approval_request: Factory, clock: Clock
) -> None:
    dialog = shown(qtbot, approval_request(), countdown_s=60)
    got = answers(dialog)
    clock.now += 50
    dialog.hide()  # e.g. minimised, or another window took its place
    dialog.show()
    qtbot.waitExposed(dialog)
    clock.now += 10  # 60 s after it was first shown
    qtbot.waitUntil(lambda: got != [], timeout=3000)
    assert got == [Approval(False, Remember.ONCE, "no answer within 60 s", timed_out=True)]


def test_the_dialog_owns_a_one_second_tick_and_a_one_shot_arming_timer(
    qtbot: QtBot, approval_request: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=approval_module.__name__)
    dialog = shown(qtbot, approval_request(), arm_delay_ms=30)
    timers = dialog.findChildren(QTimer)
    assert sorted(t.interval() for t in timers if t.isActive()) == [30, 1000]
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    assert [m for m in caplog.messages if "Approve is armed" in m] == [
        "approval dialog for r7: Approve is armed"
    ]
    # Armed once: a repeating arming timer would still be running (and arm again).
    assert sorted(t.interval() for t in timers if t.isActive()) == [1000]


# --- Approve while it is not available -----------------------------------------------


def test_approve_says_why_it_is_not_available_yet(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request(), arm_delay_ms=60_000)
    assert not dialog.approve_button.isEnabled()
    assert dialog.approve_button.toolTip() == "Available in a moment"


def test_approve_says_deny_always_is_chosen_and_nothing_once_armed(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    assert dialog.approve_button.toolTip() == ""
    choose(dialog, Remember.DENY_ALWAYS)
    assert not dialog.approve_button.isEnabled()
    assert dialog.approve_button.toolTip() == "Deny always is selected: use Deny"
    choose(dialog, Remember.ONCE)
    assert dialog.approve_button.isEnabled()
    assert dialog.approve_button.toolTip() == ""


def test_deny_always_before_arming_keeps_approve_disabled_after_arming(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request(), arm_delay_ms=100)
    choose(dialog, Remember.DENY_ALWAYS)
    qtbot.waitUntil(lambda: dialog.approve_button.toolTip() != "Available in a moment")
    assert not dialog.approve_button.isEnabled()
    assert dialog.approve_button.toolTip() == "Deny always is selected: use Deny"


# --- the answer and what is left after it ---------------------------------------------


def test_the_close_button_answers_in_words(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    got = answers(dialog)
    dialog.close()
    assert got == [Approval(False, Remember.ONCE, "the dialog was closed")]
    assert dialog.result() == QDialog.DialogCode.Rejected


def test_approve_accepts_the_dialog_and_deny_rejects_it(
    qtbot: QtBot, approval_request: Factory
) -> None:
    approved = shown(qtbot, approval_request())
    qtbot.waitUntil(approved.approve_button.isEnabled, timeout=3000)
    with qtbot.waitSignal(approved.accepted):
        qtbot.mouseClick(approved.approve_button, Qt.MouseButton.LeftButton)
    assert approved.result() == QDialog.DialogCode.Accepted
    denied = shown(qtbot, approval_request())
    with qtbot.waitSignal(denied.rejected):
        qtbot.mouseClick(denied.deny_button, Qt.MouseButton.LeftButton)
    assert denied.result() == QDialog.DialogCode.Rejected


def test_after_an_answer_no_button_can_be_pressed(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 3, 0))
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    assert dialog.deny_button.isEnabled() and dialog.deny_all_button.isEnabled()
    qtbot.mouseClick(dialog.deny_button, Qt.MouseButton.LeftButton)
    assert dialog.is_finished is True
    assert not dialog.approve_button.isEnabled()
    assert not dialog.deny_button.isEnabled()
    assert not dialog.deny_all_button.isEnabled()


def test_an_open_dialog_is_not_finished_nor_withdrawn(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    assert dialog.is_finished is False
    assert dialog.withdrawn_reason is None


def test_deny_always_on_an_agent_action_keeps_the_edited_pattern(
    qtbot: QtBot, approval_request: Factory
) -> None:
    details = ActionDetails(
        agent="claude-code",
        tool="Bash",
        summary="run rm -rf build",
        detail="rm -rf build",
        display=ActionDisplay.COMMAND,
        command="rm -rf build",
        path=None,
        pattern_kind=PatternKind.EXACT,
        pattern="rm -rf build",
    )
    request = approval_request(
        tool="Bash", variant=None, executable=None, sha256=None, argv=(), action=details
    )
    dialog = shown(qtbot, request)
    assert dialog.pattern_edit is not None
    dialog.pattern_edit.setText("rm -rf *")
    choose(dialog, Remember.DENY_ALWAYS)
    got = answers(dialog)
    qtbot.mouseClick(dialog.deny_button, Qt.MouseButton.LeftButton)
    assert got == [Approval(False, Remember.DENY_ALWAYS, "denied by the user", "rm -rf *")]


def test_the_dialog_belongs_to_the_window_it_is_given(
    qtbot: QtBot, approval_request: Factory
) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    dialog = ApprovalDialog(approval_request(), parent=window)
    assert dialog.parentWidget() is window


def test_a_wider_or_narrower_dialog_refits_its_height(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request(description="word " * 40))  # wraps to fewer lines
    layout = dialog.layout()
    assert layout is not None
    narrow = dialog.height()
    dialog.resize(900, narrow)
    qtbot.waitUntil(lambda: dialog.height() == layout.totalHeightForWidth(900), timeout=3000)
    assert dialog.height() < narrow
    dialog.resize(560, dialog.height())
    qtbot.waitUntil(lambda: dialog.height() == narrow, timeout=3000)


def test_title_bar_close_button_and_accessible_name(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    flags = dialog.windowFlags()
    assert flags & Qt.WindowType.WindowTitleHint
    assert flags & Qt.WindowType.WindowCloseButtonHint
    assert dialog.accessibleName() == "Approve system_logs?"


# --- the queue ---------------------------------------------------------------------


def test_one_more_request_is_singular(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 2, 1))
    assert dialog.queue_label.text() == "Request 1 of 2 · 1 more request from this process"
    dialog.set_queue(QueueInfo(1, 3, 2))
    assert dialog.queue_label.text() == "Request 1 of 3 · 2 more requests from this process"


def test_deny_all_appears_from_two_pending(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 1, 1))  # alone in the queue, yet more came before
    assert dialog.queue_label.isVisible()
    assert not dialog.deny_all_button.isVisible()
    dialog.set_queue(QueueInfo(1, 2, 0))
    assert dialog.deny_all_button.isVisible()
    assert dialog.deny_all_button.text() == "Deny all 2 pending"


# --- what it writes in the log and the note --------------------------------------------


def test_arming_is_logged_with_the_request(
    qtbot: QtBot, approval_request: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=approval_module.__name__)
    dialog = shown(qtbot, approval_request(id="r-armed"))
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    assert "approval dialog for r-armed: Approve is armed" in caplog.messages


def test_ignored_input_is_logged_and_shown_in_red(
    qtbot: QtBot, approval_request: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=approval_module.__name__)
    dialog = shown(qtbot, approval_request(id="r-fake"), judge=RefusingJudge())
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    got = answers(dialog)
    qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(dialog.input_note.isVisible, timeout=3000)
    assert got == []
    assert f"approval dialog for r-fake: {SYNTHETIC_IGNORED}" in caplog.messages
    assert dialog.input_note.text() == SYNTHETIC_IGNORED
    style = dialog.input_note.styleSheet()
    assert f"color: {RED}" in style and "font-weight: bold" in style


def test_a_taller_window_gives_its_extra_height_to_the_details(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    [details] = [w for w in dialog.findChildren(FitScrollArea) if w.parentWidget() is dialog]
    header = dialog.title_label
    before, header_before = details.height(), header.height()
    dialog.resize(dialog.width(), dialog.height() + 200)
    qtbot.waitUntil(lambda: details.height() >= before + 190, timeout=3000)
    assert header.height() == header_before
