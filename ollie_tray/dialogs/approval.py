"""The approval dialog: may this tool leave the sandbox, or run as root?

One dialog per :class:`ApprovalRequest`.  The caller shows it with
``show()`` and listens to :attr:`ApprovalDialog.decided`, which fires
exactly once with an :class:`Approval`: Approve, Deny, Esc, the window's
close button and the end of the countdown all answer; Esc, closing and the
countdown deny (fail closed).  :meth:`ApprovalDialog.withdraw` takes the
dialog away without an answer (the broker no longer wants one).  No method
here runs a nested event loop.

Anti-clickjacking: Deny is the default button and has the focus; Approve
stays disabled for ``arm_delay_ms`` after the dialog is first shown, so a
click or key press aimed at whatever was under the pointer cannot approve.

Only a person approves: Approve is an
:class:`~ollie_tray.dialogs.real_input.ApproveButton` (no mnemonic; ``click()``,
AT-SPI and, on X11, XTEST input do not approve; see that module).

"Deny always" is a deny: while it is selected Approve is disabled and
Deny answers ``Approval(False, Remember.DENY_ALWAYS)``; with any other
choice Deny answers for this request only.  Requests with free-form code
or a registry mismatch can only be approved once, and an action whose
description differs from its command is never remembered
(``ApprovalRequest.remember_choices``; the broker enforces it, the other
choices are disabled here so the dialog does not promise more).
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QResizeEvent, QShowEvent, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs import textboxes as t
from ollie_tray.dialogs.action_view import ActionDetailsView, pattern_editor
from ollie_tray.dialogs.approval_text import explanation
from ollie_tray.dialogs.code_section import (
    CodeSection,
    chain_text,
    requester_title,
    without_code,
)
from ollie_tray.dialogs.real_input import (
    ApproveButton,
    InputJudge,
    default_judge,
    synthetic_input_banner,
)
from registry_core.broker.decide.core import QueueInfo
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.question import Approval, ApprovalRequest, Remember
from registry_core.broker.wire.messages import Kind

log = logging.getLogger(__name__)


class ApprovalDialog(QDialog):
    """Ask whether one elevation request may run.  See the module docstring."""

    decided = Signal(object)
    """Emitted once with the :class:`Approval`."""
    deny_all_requested = Signal()
    """"Deny all pending" was pressed: emitted just before this dialog's own denial."""

    def __init__(
        self,
        request: ApprovalRequest,
        *,
        countdown_s: int = 60,
        arm_delay_ms: int = 700,
        judge: InputJudge | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.request = request
        self._judge = judge if judge is not None else default_judge()
        self._countdown_s = max(1, int(countdown_s))
        self._arm_delay_ms = max(0, arm_delay_ms)
        self._finished = False
        self._armed = False
        self._deadline: float | None = None
        self.withdrawn_reason: str | None = None

        self.setWindowTitle(f"Ollie — approve {c.visible(request.tool)}?")
        self.setWindowFlags(
            Qt.WindowType.Dialog
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.WindowTitleHint
            | Qt.WindowType.WindowCloseButtonHint
        )
        self.setAccessibleName(f"Approve {c.visible(request.tool)}?")
        # Fits a half-screen tile of a 1280x800 screen (tiling compositors);
        # long values wrap or scroll inside their boxes.
        self.setMinimumWidth(560)
        self.setMaximumWidth(900)

        self._arm_timer = QTimer(self)
        self._arm_timer.setSingleShot(True)
        self._arm_timer.timeout.connect(self._arm)
        self._tick_timer = QTimer(self)
        self._tick_timer.setInterval(1000)
        self._tick_timer.timeout.connect(self._tick)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        self.test_banner: QLabel | None = None
        if self._judge.accepts_synthetic:
            self.test_banner = synthetic_input_banner()
            layout.addWidget(self.test_banner)
        if request.mismatches:
            layout.addWidget(
                c.warning_panel(
                    "⚠  The request does not match the registry:",
                    request.mismatches,
                    "Registry mismatch warning",
                )
            )
        layout.addWidget(self._header())
        layout.addWidget(self._description())
        layout.addWidget(self._details(), 1)
        layout.addLayout(self._footer())

        # Slots take exactly what they use: Qt passes a signal's arguments to any
        # callable that accepts them (as mutation testing's wrappers do).
        self._remember.currentIndexChanged.connect(lambda _index: self._update_approve())
        self._deny.clicked.connect(lambda _checked=False: self._on_deny())
        self._approve.approved.connect(self._on_approve)
        self._approve.ignored.connect(self._on_ignored)
        self._update_approve()
        self._deny.setFocus()

    # --- building --------------------------------------------------------------

    def _header(self) -> QWidget:
        action = self.request.action
        sudo = self.request.kind is Kind.SUDO and action is None
        color, dark, tint = (
            (c.RED, c.RED_DARK, c.RED_TINT) if sudo else (c.AMBER, c.AMBER_DARK, c.AMBER_TINT)
        )
        panel = c.Panel(color, tint)
        panel.setAccessibleName("Request summary")
        pixmap = (
            c.glyph_pixmap(color, "#", 46, shape="square")
            if sudo
            else c.glyph_pixmap(color, "!", 46, shape="triangle")
        )
        icon = c.icon_label(pixmap, "Run as root" if sudo else "Sandbox escape")
        headline = (
            f"{self.request.tool} wants to {self.request.what}"
            if action is None
            else f"{c.visible(action.agent)} wants to use its tool {c.visible(action.tool)}"
        )
        title = c.plain_label(headline, scale=1.45)
        self.title_label = title
        explain = c.plain_label(explanation(self.request), style=f"color: {dark};")
        tag = "RUN AS ROOT" if sudo else "SANDBOX ESCAPE" if action is None else "AGENT ACTION"
        tags: list[QWidget] = [c.badge(tag, color)]
        self.sandbox_badge: QLabel | None = None
        if self.request.sandboxed:
            self.sandbox_badge = c.badge(SANDBOX_LABEL.upper(), "#6a1b9a")
            self.sandbox_badge.setAccessibleName(f"Requested {SANDBOX_LABEL}")
            self.sandbox_badge.setToolTip(
                "A process inside the sandbox asks. It never receives a password."
            )
            tags.append(self.sandbox_badge)
        self.remote_badge: QLabel | None = None
        if self.request.remote:
            self.remote_badge = c.badge(f"REMOTE · {self.request.host}", "#1565c0")
            tags.append(self.remote_badge)
        row = c.header_row(icon, title, explain, c.hbox(*tags))
        panel.body.addLayout(row)
        return panel

    def _description(self) -> QWidget:
        text = self.request.description.strip() or "(the registry has no description)"
        label = t.value_label(text, "Description")
        label.setStyleSheet("font-style: italic;")
        label.setToolTip(
            "As the agent describes its action"
            if self.request.action is not None
            else "From this computer's tool registry, not from the requester"
        )
        label.setContentsMargins(4, 0, 4, 0)
        return label

    def _details(self) -> QWidget:
        """Tool, requester, code and arguments: scrolls only when the screen is too small."""
        r = self.request
        self.action_view: ActionDetailsView | None = None
        if r.action is not None:
            self.action_view = ActionDetailsView(r)
            return t.FitScrollArea(self.action_view)
        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        self.code_section: CodeSection | None = None
        self.code_box: t.MonoBox | None = None
        if r.code is not None:  # the code first: it is what would run
            self.code_section = CodeSection(r.code)
            self.code_box = self.code_section.box
            column.addWidget(self.code_section)
        column.addWidget(c.section_title("Tool (from this computer's registry)"))
        form = c.Form()
        form.add_row("Tool", t.value_label(r.tool, "Tool"))
        variant = "none (the tool has no variants)" if r.variant is None else f"variant {r.variant}"
        form.add_row("Variant", t.value_label(variant, "Variant"))
        exe = t.MonoBox(c.visible(r.executable or "(not found)"), "Executable", framed=False)
        form.add_row("Executable", exe)
        sha = t.value_label(c.short_sha(r.sha256) or "(unknown)", "SHA-256", mono=True)
        sha.setToolTip(r.sha256 or "")
        form.add_row("SHA-256", sha)
        command = c.shell_join(without_code(r.argv, r.code))
        form.add_row("Command", t.MonoBox(command, "Command", max_lines=4))
        cwd = t.MonoBox(c.visible(r.cwd), "Working directory", max_lines=3, framed=False)
        form.add_row("Working dir", cwd)
        where = "this computer" if not r.remote else "remote host"
        if r.claimed_host:  # ollie-remote named the host; the remote said otherwise
            where += f"; it calls itself {r.claimed_host}"
        form.add_row("Host", t.value_label(f"{r.host}  ({where})", "Host"))
        column.addLayout(form)

        req = r.requester
        where = f", {SANDBOX_LABEL}" if req.sandboxed else ""
        column.addWidget(c.section_title(requester_title(req, where)))
        form = c.Form()
        process = t.MonoBox(
            c.visible(f"pid {req.pid} · {req.exe or '?'}"), "Process", framed=False, mono=False
        )
        form.add_row("Process", process)
        cmdline = c.shell_join(without_code(req.cmdline, r.code)) if req.cmdline else "(unknown)"
        form.add_row("Command line", t.MonoBox(cmdline, "Requester command line", max_lines=3))
        chain = t.MonoBox(chain_text(req, r.code), "Process chain, nearest first", max_lines=6)
        form.add_row("Started by", chain)
        if r.client is not None:  # e.g. the MCP client's name: the requester's claim
            client = t.value_label(f"{c.visible(r.client)}  (as the requester says)", "Via client")
            form.add_row("Via client", client)
        column.addLayout(form)

        column.addWidget(c.section_title("Arguments"))
        self.args_box = t.MonoBox(c.pretty_json(r.args), "Arguments", max_lines=8)
        column.addWidget(self.args_box)
        column.addStretch(1)
        return t.FitScrollArea(content)

    def _footer(self) -> QVBoxLayout:
        column = QVBoxLayout()
        column.setSpacing(8)
        remember = QComboBox()
        remember.setAccessibleName("Remember this decision")
        for choice in Remember:
            remember.addItem(choice.label, choice.value)  # Qt keeps a StrEnum as str
        once_only = self.request.once_only
        if once_only:
            allowed = self.request.remember_choices
            model = remember.model()
            assert isinstance(model, QStandardItemModel)
            for position, choice in enumerate(Remember):
                item = model.item(position)
                if choice not in allowed and item is not None:
                    item.setEnabled(False)
            remember.setToolTip(
                "Code, mismatching requests and actions whose description differs "
                "from their command are approved one at a time"
            )
        self._remember = remember
        caption = QLabel("&Remember:")
        caption.setBuddy(remember)
        caption.setAccessibleName("Remember")
        row = c.hbox(caption, remember)
        if once_only:
            note = c.plain_label(
                "this request can only be approved once",
                wrap=False,
                style="color: palette(placeholder-text);",
            )
            row.insertWidget(2, note)
        column.addLayout(row)
        self.pattern_edit: QLineEdit | None = None
        if self.request.action is not None and not once_only:
            text, self.pattern_edit = pattern_editor(self.request)
            pattern_caption = QLabel(f"{text}:")
            pattern_caption.setBuddy(self.pattern_edit)
            column.addLayout(c.hbox(pattern_caption, self.pattern_edit, stretch_after=False))

        self.countdown_label = QLabel()
        self.countdown_label.setTextFormat(Qt.TextFormat.PlainText)
        self.countdown_label.setAccessibleName("Automatic denial countdown")
        self._show_remaining(self._countdown_s)
        self._deny = QPushButton("&Deny")
        self._deny.setAccessibleName("Deny")
        self._deny.setDefault(True)
        self._deny.setAutoDefault(True)
        self._deny.setMinimumWidth(110)
        # No mnemonic: one keystroke must not be enough (Deny keeps Alt+D and Esc).
        self._approve = ApproveButton("Approve", self._judge)
        self._approve.setAccessibleName("Approve")
        self._approve.setAutoDefault(False)  # Enter never approves
        self._approve.setMinimumWidth(110)
        self.queue_label = c.plain_label("", wrap=False, style="font-weight: bold;")
        self.queue_label.setAccessibleName("Queue")
        self._deny_all = QPushButton("Deny all pending")
        self._deny_all.setAccessibleName("Deny all pending")
        self._deny_all.setAutoDefault(False)
        self._deny_all.clicked.connect(self._on_deny_all)
        queue_row = c.hbox(self.queue_label, self._deny_all)
        self.queue_label.setVisible(False)
        self._deny_all.setVisible(False)
        column.addLayout(queue_row)
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self.countdown_label, 1)
        buttons.addWidget(self._deny)
        buttons.addWidget(self._approve)
        column.addLayout(buttons)
        self.input_note = c.plain_label(self._judge.notice or "", style=f"color: {c.AMBER_DARK};")
        self.input_note.setAccessibleName("Input note")
        self.input_note.setVisible(bool(self._judge.notice))
        column.addWidget(self.input_note)
        return column

    # --- public ------------------------------------------------------------------

    @property
    def approve_button(self) -> QPushButton:
        return self._approve

    def set_queue(self, info: QueueInfo | None) -> None:
        """Show "Request 1 of N" and how many more came from the same process."""
        if info is None or (info.total <= 1 and info.same_process == 0):
            self.queue_label.setVisible(False)
            self._deny_all.setVisible(False)
            return
        text = f"Request {info.position} of {info.total}"
        if info.same_process:
            more = "request" if info.same_process == 1 else "requests"
            text += f" · {info.same_process} more {more} from this process"
        self.queue_label.setText(text)
        self.queue_label.setVisible(True)
        self._deny_all.setText(f"Deny all {info.total} pending")
        self._deny_all.setVisible(info.total > 1)

    @property
    def deny_all_button(self) -> QPushButton:
        return self._deny_all

    @property
    def approve_widget(self) -> ApproveButton:
        return self._approve

    @property
    def deny_button(self) -> QPushButton:
        return self._deny

    @property
    def remember_combo(self) -> QComboBox:
        return self._remember

    @property
    def is_finished(self) -> bool:
        """True once answered or withdrawn."""
        return self._finished

    def selected_remember(self) -> Remember:
        try:
            chosen = Remember(self._remember.currentData())
        except ValueError:
            return Remember.ONCE
        # A disabled choice (selected by code, not by a person) promises nothing.
        return chosen if chosen in self.request.remember_choices else Remember.ONCE

    def withdraw(self, reason: str) -> None:
        """Close without answering: the broker no longer wants an answer."""
        if self._finished:
            return
        self.withdrawn_reason = reason
        self._stop()
        super().done(QDialog.DialogCode.Rejected)

    # --- events ------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        t.fit_height(self)
        if not self._finished and self._deadline is None:
            # Timers start when the person can see the dialog, not when it is built.
            self._deadline = time.monotonic() + self._countdown_s
            self._arm_timer.start(self._arm_delay_ms)
            self._tick_timer.start()
            self._deny.setFocus(Qt.FocusReason.ActiveWindowFocusReason)
        self.raise_()
        self.activateWindow()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            t.fit_height(self)  # wrapped text needs more or fewer lines now

    def reject(self) -> None:
        """Esc (and QDialog's own rejections) deny."""
        self._finish(Approval(False, Remember.ONCE, "denied by the user"))

    def closeEvent(self, event: QCloseEvent) -> None:
        self._finish(Approval(False, Remember.ONCE, "the dialog was closed"))
        event.accept()

    # --- internals ---------------------------------------------------------------

    def _arm(self) -> None:
        self._armed = True
        log.info("approval dialog for %s: Approve is armed", self.request.id)
        self._update_approve()

    def _update_approve(self) -> None:
        deny_always = self.selected_remember() is Remember.DENY_ALWAYS
        self._approve.setEnabled(self._armed and not deny_always and not self._finished)
        if deny_always:
            self._approve.setToolTip("Deny always is selected: use Deny")
        elif not self._armed:
            self._approve.setToolTip("Available in a moment")
        else:
            self._approve.setToolTip("")

    def _remaining(self) -> int:
        if self._deadline is None:
            return self._countdown_s
        return max(0, round(self._deadline - time.monotonic()))

    def _show_remaining(self, seconds: int) -> None:
        self.countdown_label.setText(f"Denying automatically in {seconds} s")

    def _tick(self) -> None:
        left = self._remaining()
        self._show_remaining(left)
        if left <= 0:
            reason = f"no answer within {self._countdown_s} s"
            self._finish(Approval(False, Remember.ONCE, reason, timed_out=True))

    def _on_deny(self) -> None:
        deny_always = self.selected_remember() is Remember.DENY_ALWAYS
        remember = Remember.DENY_ALWAYS if deny_always else Remember.ONCE
        self._finish(Approval(False, remember, "denied by the user", self._pattern()))

    def _on_approve(self) -> None:
        if not self._approve.isEnabled():  # a click that raced the arming or the choice
            return
        approval = Approval(True, self.selected_remember(), "approved by the user", self._pattern())
        self._finish(approval)

    def _pattern(self) -> str | None:
        return None if self.pattern_edit is None else self.pattern_edit.text()

    def _on_deny_all(self) -> None:
        if self._finished:
            return
        self.deny_all_requested.emit()
        self._finish(Approval(False, Remember.ONCE, "denied with all pending requests"))

    def _on_ignored(self, why: str) -> None:
        log.warning("approval dialog for %s: %s", self.request.id, why)
        self.input_note.setText(why)
        self.input_note.setStyleSheet(f"color: {c.RED}; font-weight: bold;")
        self.input_note.setVisible(True)

    def _stop(self) -> None:
        self._finished = True
        self._arm_timer.stop()
        self._tick_timer.stop()
        self._approve.setEnabled(False)
        self._deny.setEnabled(False)
        self._deny_all.setEnabled(False)

    def _finish(self, approval: Approval) -> None:
        if self._finished:
            return
        self._stop()
        self.decided.emit(approval)
        super().done(
            QDialog.DialogCode.Accepted if approval.approved else QDialog.DialogCode.Rejected
        )
