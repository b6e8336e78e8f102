"""The approval dialog shows the queue: "Request 1 of N", a burst from one process, Deny all."""

from __future__ import annotations

from collections.abc import Callable

from approval_helpers import shown
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from registry_core.broker.decide.core import QueueInfo
from registry_core.broker.question import Approval, ApprovalRequest, Remember

Factory = Callable[..., ApprovalRequest]


def test_a_lone_request_shows_no_queue(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 1, 0))
    assert not dialog.queue_label.isVisible()
    assert not dialog.deny_all_button.isVisible()


def test_request_one_of_n_and_a_burst_from_one_process(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 3000, 2999))
    assert dialog.queue_label.isVisible()
    assert dialog.queue_label.text() == "Request 1 of 3000 · 2999 more requests from this process"
    assert dialog.deny_all_button.isVisible()
    assert dialog.deny_all_button.text() == "Deny all 3000 pending"
    dialog.set_queue(QueueInfo(1, 2, 0))  # the queue changed while it was open
    assert dialog.queue_label.text() == "Request 1 of 2"


def test_deny_all_asks_for_the_queue_then_denies_this_one(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = shown(qtbot, approval_request())
    dialog.set_queue(QueueInfo(1, 5, 4))
    order: list[str] = []
    dialog.deny_all_requested.connect(lambda: order.append("queue"))
    dialog.decided.connect(lambda a: order.append(f"decided {a.approved}"))
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.mouseClick(dialog.deny_all_button, Qt.MouseButton.LeftButton)
    assert order == ["queue", "decided False"]
    assert blocker.args == [Approval(False, Remember.ONCE, "denied with all pending requests")]
