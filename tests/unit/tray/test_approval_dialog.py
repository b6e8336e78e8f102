"""The approval dialog: what it shows, how it arms, and that it answers exactly once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from registry_core.broker.peer.identity import ProcessInfo, Requester
from registry_core.broker.question import Approval, ApprovalRequest, Remember
from registry_core.broker.wire.messages import Kind

Factory = Callable[..., ApprovalRequest]
Texts = Callable[[QWidget], str]

ALLOW_CHOICES = [r for r in Remember if r is not Remember.DENY_ALWAYS]


class Answers:
    """Collects every ``decided`` emission (to prove there is exactly one)."""

    def __init__(self, dialog: ApprovalDialog) -> None:
        self.items: list[Approval] = []
        dialog.decided.connect(self.items.append)

    @property
    def only(self) -> Approval:
        assert len(self.items) == 1, self.items
        return self.items[0]


def make(
    qtbot: QtBot, request: ApprovalRequest, *, show: bool = True, **kwargs: int
) -> ApprovalDialog:
    kwargs.setdefault("arm_delay_ms", 50)
    dialog = ApprovalDialog(request, **kwargs)
    qtbot.addWidget(dialog)
    if show:
        dialog.show()
        qtbot.waitExposed(dialog)
    return dialog


def armed(qtbot: QtBot, dialog: ApprovalDialog) -> ApprovalDialog:
    qtbot.waitUntil(dialog.approve_button.isEnabled, timeout=2000)
    return dialog


def choose(dialog: ApprovalDialog, remember: Remember) -> None:
    combo = dialog.remember_combo
    combo.setCurrentIndex(combo.findData(remember.value))
    assert dialog.selected_remember() is remember


def test_qt_binding_keeps_none_alive(none_loss: Callable[[int], int]) -> None:
    """A Qt binding that leaks references to None aborts any long-running tray (see conftest)."""
    lost = none_loss(1000)
    assert lost < 100, (
        f"{lost} references to None lost in 1000 void Qt calls: this PySide6 build would"
        " abort the tray after a few thousand calls; use PySide6-Essentials<6.12 on Python 3.11"
    )


# --- what it shows ---------------------------------------------------------------


def test_shows_every_field(qtbot: QtBot, approval_request: Factory, widget_texts: Texts) -> None:
    request = approval_request()
    dialog = make(qtbot, request)
    text = widget_texts(dialog)
    expected = [
        "system_logs wants to run as root via sudo",
        "Show the last lines of the system journal",
        "variant 0",
        request.executable,
        request.short_sha,
        f"sudo -A -- {request.executable}",
        "/home/alice/project",
        "laptop",
        "pid 4242 · /usr/bin/python3.11",
        "python3 agent.py --model local",
        "1500 /lib/systemd/systemd --user",
        "↑ started by 4200 bash -l",
        "↑ started by 4100 tmux new -s agents",
        "4242 python3 agent.py --model local",
        '"unit": "ssh.service"',
        '"lines": 50',
        "Denying automatically in 60 s",
    ]
    for item in expected:
        assert item in text, item
    assert dialog.windowTitle() == "Ollie — approve system_logs?"
    assert dialog.windowFlags() & Qt.WindowType.WindowStaysOnTopHint


def test_full_sha_is_in_the_tooltip(qtbot: QtBot, approval_request: Factory) -> None:
    request = approval_request()
    dialog = make(qtbot, request, show=False)
    shas = [w for w in dialog.findChildren(QLabel) if w.text() == request.short_sha]
    assert [w.toolTip() for w in shas] == [request.sha256]


def test_parent_chain_is_shown_nearest_first(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), show=False)
    tree = next(
        box
        for box in dialog.findChildren(QPlainTextEdit)
        if box.accessibleName() == "Process chain, nearest first"
    )
    lines = tree.toPlainText().splitlines()
    assert lines[0].startswith("4242 ") and lines[0].endswith("requester")
    assert lines[1].startswith("↑ started by 4200")
    assert lines[2].startswith("  ↑ started by 4100")
    assert lines[3].startswith("    ↑ started by 1500")


def test_sudo_and_sandbox_say_what_escaping_means(
    qtbot: QtBot, approval_request: Factory, widget_texts: Texts
) -> None:
    sudo = widget_texts(make(qtbot, approval_request(kind=Kind.SUDO), show=False))
    assert "RUN AS ROOT" in sudo
    assert "runs as root through sudo" in sudo
    sandbox_request = approval_request(kind=Kind.SANDBOX, argv=("/bin/true",))
    sandbox = widget_texts(make(qtbot, sandbox_request, show=False))
    assert "wants to run outside the sandbox as you" in sandbox
    assert "SANDBOX ESCAPE" in sandbox
    assert "RUN AS ROOT" not in sandbox


def test_mismatch_panel_only_when_mismatches(
    qtbot: QtBot, approval_request: Factory, widget_texts: Texts
) -> None:
    def panels(dialog: ApprovalDialog) -> list[QWidget]:
        return [
            w
            for w in dialog.findChildren(QWidget)
            if w.accessibleName() == "Registry mismatch warning"
        ]

    plain = make(qtbot, approval_request(), show=False)
    assert panels(plain) == []
    assert "does not match the registry" not in widget_texts(plain)

    problem = "requested argv ['sudo', '-A', '--', '/tmp/evil']; the registry would run [...]"
    loud = make(qtbot, approval_request(mismatches=(problem,)))
    assert len(panels(loud)) == 1
    assert panels(loud)[0].isVisible()
    text = widget_texts(loud)
    assert "The request does not match the registry:" in text
    assert problem in text


def test_remote_badge_names_the_host(qtbot: QtBot, approval_request: Factory) -> None:
    local = make(qtbot, approval_request(), show=False)
    assert local.remote_badge is None
    remote = make(qtbot, approval_request(remote=True, host="build-server"))
    assert remote.remote_badge is not None
    assert remote.remote_badge.isVisible()
    assert remote.remote_badge.text() == "REMOTE · build-server"


def test_code_box_only_for_code_requests(qtbot: QtBot, approval_request: Factory) -> None:
    assert make(qtbot, approval_request(), show=False).code_box is None
    code = 'set -e\nfor f in /var/log/*.log; do tail -n 5 "$f"; done\n'
    dialog = make(
        qtbot, approval_request(tool="execute_code", code=code, argv=("bash", "-c", code))
    )
    assert dialog.code_box is not None
    assert dialog.code_box.toPlainText() == code.rstrip("\n")  # a final newline ends a line
    assert dialog.code_box.isReadOnly()


def test_args_are_pretty_json_in_a_read_only_box(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(args={"b": [1, 2], "a": {"x": "y"}}), show=False)
    assert dialog.args_box.isReadOnly()
    assert dialog.args_box.toPlainText() == (
        '{\n  "b": [\n    1,\n    2\n  ],\n  "a": {\n    "x": "y"\n  }\n}'
    )


def test_hostile_text_is_plain_and_visible(qtbot: QtBot, approval_request: Factory) -> None:
    """Rich text is never interpreted and bidi/control characters cannot hide."""
    sneaky = "<b>ok</b>\u202etxt.exe\x1b[2J"
    requester = Requester(
        pid=1, uid=1000, gid=1000, exe="/x", cmdline=(sneaky,), parents=(ProcessInfo(2, "", ()),)
    )
    request = approval_request(description=sneaky, cwd="/tmp/\u202eevil", requester=requester)
    dialog = make(qtbot, request, show=False)
    hostile = [w for w in dialog.findChildren(QLabel) if "<b>ok</b>" in w.text()]
    assert hostile
    assert all(label.textFormat() is Qt.TextFormat.PlainText for label in hostile)
    shown = [w.text() for w in dialog.findChildren(QLabel)]
    shown += [w.toPlainText() for w in dialog.findChildren(QPlainTextEdit)]
    joined = "\n".join(shown)
    assert "\u202e" not in joined
    assert "\x1b" not in joined
    assert "<U+202E>" in joined
    assert "<U+001B>" in joined
    assert "<b>ok</b>" in joined


# --- arming, focus and keys ------------------------------------------------------


def test_deny_is_default_and_has_focus(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request())
    assert dialog.deny_button.isDefault()
    assert not dialog.approve_button.autoDefault()
    qtbot.waitUntil(lambda: dialog.focusWidget() is dialog.deny_button)


def test_shortcuts(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), show=False)
    assert dialog.deny_button.text() == "&Deny"
    assert dialog.approve_button.text() == "Approve"  # no mnemonic: one keystroke is not enough
    assert dialog.deny_button.shortcut() == QKeySequence("Alt+D")
    assert dialog.approve_button.shortcut().isEmpty()


def test_approve_arms_only_after_being_shown(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), show=False, arm_delay_ms=50)
    assert not dialog.approve_button.isEnabled()
    dialog.show()
    qtbot.waitExposed(dialog)
    assert not dialog.approve_button.isEnabled()  # disabled right after show
    armed(qtbot, dialog)


def test_approve_is_disabled_for_the_default_arm_delay(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = ApprovalDialog(approval_request())
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert not dialog.approve_button.isEnabled()
    answers = Answers(dialog)
    dialog.approve_button.click()  # a click aimed at whatever was there before
    assert answers.items == []


def test_enter_denies(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, make(qtbot, approval_request()))
    answers = Answers(dialog)
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert answers.only == Approval(False, Remember.ONCE, "denied by the user")


def test_escape_denies(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request())
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert blocker.args == [Approval(False, Remember.ONCE, "denied by the user")]
    assert not dialog.isVisible()


def test_closing_denies(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request())
    answers = Answers(dialog)
    dialog.close()
    assert answers.only.approved is False
    assert answers.only.remember is Remember.ONCE


# --- answers ---------------------------------------------------------------------


@pytest.mark.parametrize("remember", ALLOW_CHOICES, ids=lambda r: r.value)
def test_approve_carries_the_remember_choice(
    qtbot: QtBot, approval_request: Factory, remember: Remember
) -> None:
    dialog = armed(qtbot, make(qtbot, approval_request()))
    choose(dialog, remember)
    with qtbot.waitSignal(dialog.decided) as blocker:
        qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    assert blocker.args == [Approval(True, remember, "approved by the user")]
    assert not dialog.isVisible()


def test_remember_choices_use_the_labels(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), show=False)
    combo = dialog.remember_combo
    assert [combo.itemText(i) for i in range(combo.count())] == [r.label for r in Remember]
    assert combo.currentText() == "Only this time"


def test_deny_always_disables_approve_and_denies_always(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = armed(qtbot, make(qtbot, approval_request()))
    choose(dialog, Remember.DENY_ALWAYS)
    assert not dialog.approve_button.isEnabled()
    choose(dialog, Remember.HOUR)
    assert dialog.approve_button.isEnabled()
    choose(dialog, Remember.DENY_ALWAYS)
    answers = Answers(dialog)
    dialog.deny_button.click()
    assert answers.only == Approval(False, Remember.DENY_ALWAYS, "denied by the user")


@pytest.mark.parametrize("remember", ALLOW_CHOICES, ids=lambda r: r.value)
def test_deny_with_an_allow_choice_is_once(
    qtbot: QtBot, approval_request: Factory, remember: Remember
) -> None:
    dialog = make(qtbot, approval_request())
    choose(dialog, remember)
    answers = Answers(dialog)
    qtbot.mouseClick(dialog.deny_button, Qt.MouseButton.LeftButton)
    assert answers.only == Approval(False, Remember.ONCE, "denied by the user")


def test_code_and_mismatch_requests_offer_once_only(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = make(qtbot, approval_request(code="id", argv=("bash", "-c", "id")), show=False)
    model = dialog.remember_combo.model()
    enabled = [
        Remember(dialog.remember_combo.itemData(i))
        for i in range(dialog.remember_combo.count())
        if model.flags(model.index(i, 0)) & Qt.ItemFlag.ItemIsEnabled
    ]
    assert enabled == [Remember.ONCE, Remember.DENY_ALWAYS]


def test_countdown_ends_in_deny(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), countdown_s=1)
    assert dialog.countdown_label.text() == "Denying automatically in 1 s"
    with qtbot.waitSignal(dialog.decided, timeout=3000) as blocker:
        pass
    assert blocker.args == [Approval(False, Remember.ONCE, "no answer within 1 s", timed_out=True)]
    assert not dialog.isVisible()


def test_countdown_label_counts_down(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), countdown_s=3)
    qtbot.waitUntil(
        lambda: dialog.countdown_label.text() == "Denying automatically in 2 s", timeout=2500
    )


def test_decided_is_emitted_once(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = armed(qtbot, make(qtbot, approval_request(), countdown_s=1))
    answers = Answers(dialog)
    qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    dialog.deny_button.click()
    dialog.reject()
    dialog.close()
    assert answers.only.approved is True
    # The countdown cannot answer again later: every timer is stopped.
    assert not any(timer.isActive() for timer in dialog.findChildren(QTimer))


def test_withdraw_closes_without_an_answer(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(), countdown_s=1)
    answers = Answers(dialog)
    dialog.withdraw("the requester went away")
    assert not dialog.isVisible()
    assert dialog.is_finished
    assert dialog.withdrawn_reason == "the requester went away"
    dialog.close()
    dialog.reject()
    assert answers.items == []
    assert not any(timer.isActive() for timer in dialog.findChildren(QTimer))


# --- accessibility ---------------------------------------------------------------


def test_accessible_names_everywhere(qtbot: QtBot, approval_request: Factory) -> None:
    dialog = make(qtbot, approval_request(code="id", remote=True, mismatches=("differs",)))
    controls: list[QWidget] = [
        *dialog.findChildren(QAbstractButton),
        *dialog.findChildren(QComboBox),
        *dialog.findChildren(QLineEdit),
        *dialog.findChildren(QPlainTextEdit),
        *dialog.findChildren(QLabel),
    ]
    unnamed = [
        w for w in controls if not w.accessibleName() and (not isinstance(w, QLabel) or w.text())
    ]
    assert [w.text() if isinstance(w, QLabel) else w for w in unnamed] == []
    assert dialog.approve_button.accessibleName() == "Approve"
    assert dialog.deny_button.accessibleName() == "Deny"
    assert dialog.remember_combo.accessibleName() == "Remember this decision"


def test_long_ancestor_command_lines_are_shortened_in_the_tree(
    qtbot: QtBot, approval_request: Callable[..., ApprovalRequest]
) -> None:
    huge = ("launcher", "--env", "x" * 5000)
    requester = Requester(
        pid=10,
        uid=1000,
        gid=1000,
        exe="/usr/bin/python3",
        cmdline=("python3", "agent.py", "y" * 300),
        parents=(ProcessInfo(9, "/usr/bin/launcher", huge),),
    )
    dialog = ApprovalDialog(approval_request(requester=requester), arm_delay_ms=10)
    qtbot.addWidget(dialog)
    tree = next(
        box.toPlainText()
        for box in dialog.findChildren(QPlainTextEdit)
        if "requester" in box.toPlainText()
    )
    assert "x" * 200 not in tree
    assert "[5000 characters, elided]" in tree  # a secret-looking blob, elided
    assert "y" * 300 in tree  # the requester itself is shown whole
