"""The approval dialog's footer as a person sees and hears it.

The Remember choice and its caption, the once-only note, the countdown, the
button row, the queue line, Deny all and the input note: their words, their
accessible names, where they sit and what Enter does near them.  Each check
here kills mutants of ``ApprovalDialog._footer`` that no other test noticed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from approval_helpers import shown
from PySide6.QtCore import Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QBoxLayout, QLabel, QLayout, QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.common import AMBER_DARK
from ollie_tray.dialogs.xinput import Phase, Verdict
from registry_core.broker.decide.core import QueueInfo
from registry_core.broker.question import ActionDetails, Approval, ApprovalRequest, Remember
from registry_core.broker.wire.messages import ActionDisplay, PatternKind

Factory = Callable[..., ApprovalRequest]
ONCE_NOTE = "this request can only be approved once"
ONCE_TIP = (
    "Code, mismatching requests and actions whose description differs "
    "from their command are approved one at a time"
)


@dataclass(frozen=True)
class NoticeJudge:
    """A platform whose judge has a caveat to show (as on Wayland with virtual input)."""

    notice: str | None = "Keys cannot approve here."
    keyboard_ok: bool = False
    accepts_synthetic: bool = False

    def pointer(self, event: QMouseEvent, phase: Phase) -> Verdict:
        return Verdict.REAL


def row_of(dialog: ApprovalDialog, widget: QWidget) -> QBoxLayout:
    """The horizontal layout that holds ``widget``."""
    for layout in dialog.findChildren(QLayout):
        if isinstance(layout, QBoxLayout) and layout.indexOf(widget) >= 0:
            return layout
    raise AssertionError(f"{widget!r} is in no layout")


def row_widgets(row: QBoxLayout) -> list[QWidget | None]:
    """The row's items left to right: widgets, or None for a stretch."""
    items = [row.itemAt(i) for i in range(row.count())]
    return [item.widget() if item is not None else None for item in items]


def once_notes(dialog: ApprovalDialog) -> list[QLabel]:
    return [w for w in dialog.findChildren(QLabel) if w.text() == ONCE_NOTE]


def test_the_remember_choice_its_caption_and_values(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    combo = dialog.remember_combo
    assert combo.accessibleName() == "Remember this decision"
    assert [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())] == [
        (r.label, r.value) for r in Remember
    ]
    captions = [w for w in dialog.findChildren(QLabel) if w.buddy() is combo]
    assert [(w.text(), w.accessibleName()) for w in captions] == [("&Remember:", "Remember")]
    assert row_widgets(row_of(dialog, combo)) == [captions[0], combo, None]
    assert combo.toolTip() == ""
    assert once_notes(dialog) == []


def test_code_or_a_mismatch_offers_once_only_and_says_so(
    qtbot: QtBot, approval_request: Factory
) -> None:
    code = shown(qtbot, approval_request(code="id", argv=("bash", "-c", "id")))
    mismatch = shown(qtbot, approval_request(mismatches=("the executable differs",)))
    for dialog in (code, mismatch):
        combo = dialog.remember_combo
        model = combo.model()
        enabled = [
            Remember(combo.itemData(i))
            for i in range(combo.count())
            if model.flags(model.index(i, 0)) & Qt.ItemFlag.ItemIsEnabled
        ]
        assert enabled == [Remember.ONCE, Remember.DENY_ALWAYS]
        assert combo.toolTip() == ONCE_TIP
        [note] = once_notes(dialog)
        assert note.isVisible() and not note.wordWrap()
        assert note.styleSheet() == "color: palette(placeholder-text);"
        row = row_widgets(row_of(dialog, combo))
        assert row[1:] == [combo, note, None]  # right after the choice it explains


def test_the_countdown_and_the_buttons_in_one_row(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request(), countdown_s=45)
    label = dialog.countdown_label
    assert label.text() == "Denying automatically in 45 s"
    assert label.accessibleName() == "Automatic denial countdown"
    assert label.textFormat() is Qt.TextFormat.PlainText
    assert row_widgets(row_of(dialog, dialog.deny_button)) == [
        label,
        dialog.deny_button,
        dialog.approve_button,
    ]
    assert dialog.deny_button.accessibleName() == "Deny"
    assert label.geometry().right() < dialog.deny_button.x() < dialog.approve_button.x()


def test_the_queue_line_and_deny_all_start_hidden_and_named(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    queue, deny_all = dialog.queue_label, dialog.deny_all_button
    assert not queue.isVisible() and not deny_all.isVisible()
    assert queue.text() == "" and queue.accessibleName() == "Queue"
    assert deny_all.text() == "Deny all pending"
    assert deny_all.accessibleName() == "Deny all pending"
    dialog.set_queue(QueueInfo(2, 4, 0))
    assert row_widgets(row_of(dialog, queue)) == [queue, deny_all, None]
    assert not queue.wordWrap()
    assert queue.styleSheet() == "font-weight: bold;"


def test_enter_on_deny_all_denies_only_this_request(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 4, 0))
    asked: list[str] = []
    dialog.deny_all_requested.connect(lambda: asked.append("all"))
    dialog.deny_all_button.setFocus()
    qtbot.waitUntil(dialog.deny_all_button.hasFocus, timeout=3000)
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.keyClick(dialog.deny_all_button, Qt.Key.Key_Return)
    assert blocker.args == [Approval(False, Remember.ONCE, "denied by the user")]
    assert asked == []


def test_the_input_note_shows_the_platforms_caveat(qtbot: QtBot, approval_request: Factory) -> None:
    quiet = shown(qtbot, approval_request())
    assert not quiet.input_note.isVisible() and quiet.input_note.text() == ""
    assert quiet.input_note.accessibleName() == "Input note"
    judge = NoticeJudge()
    loud = shown(qtbot, approval_request(), judge=judge)
    assert loud.input_note.isVisible()
    assert loud.input_note.text() == judge.notice
    assert loud.input_note.styleSheet() == f"color: {AMBER_DARK};"


def test_the_pattern_field_has_its_caption_and_the_rest_of_the_row(
    qtbot: QtBot, approval_request: Factory
) -> None:
    details = ActionDetails(
        agent="claude-code",
        tool="Edit",
        summary="edit /p/a.py",
        detail="--- /p/a.py\n+++ /p/a.py\n",
        display=ActionDisplay.DIFF,
        command=None,
        path="/p/a.py",
        pattern_kind=PatternKind.PATH,
        pattern="/p/a.py",
    )
    request = approval_request(
        tool="Edit", variant=None, executable=None, sha256=None, argv=(), action=details
    )
    dialog = shown(qtbot, request)
    edit = dialog.pattern_edit
    assert edit is not None
    captions = [w for w in dialog.findChildren(QLabel) if w.buddy() is edit]
    assert [w.text() for w in captions] == ["Remember for the path:"]
    assert row_widgets(row_of(dialog, edit)) == [captions[0], edit]  # no stretch: it is wide
    assert edit.width() > dialog.width() // 2
    descriptions = [
        w for w in dialog.findChildren(QLabel) if w.accessibleName().startswith("Description: ")
    ]
    assert [w.toolTip() for w in descriptions] == ["As the agent describes its action"]


def test_enter_on_the_remember_choice_denies(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=3000)
    combo = dialog.remember_combo
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus, timeout=3000)
    assert dialog.deny_button.isDefault()  # even without the focus
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.keyClick(combo, Qt.Key.Key_Return)
    assert blocker.args == [Approval(False, Remember.ONCE, "denied by the user")]
