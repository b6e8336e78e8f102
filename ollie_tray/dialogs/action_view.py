"""The approval dialog's body for an agent's own action (an ``action`` request).

Shows which agent, which of its tools, the exact command or the edit as a
diff (added lines green, removed lines red), the file, the working
directory, the requesting process and the raw input; and the remember
pattern, in an editable field, so the person sees (and may narrow) exactly
what a remembered answer would cover.  The broker stores an edited pattern
only if it still covers this action.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QSyntaxHighlighter, QTextCharFormat, QTextDocument
from PySide6.QtWidgets import QLineEdit, QVBoxLayout, QWidget

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs import textboxes as t
from registry_core.broker.question import DETAIL_DIFFERS, ApprovalRequest
from registry_core.broker.wire.messages import ActionDisplay, PatternKind

PATTERN_CAPTION = {
    PatternKind.PROGRAM: "Remember for the program",
    PatternKind.PATH: "Remember for the path",
    PatternKind.EXACT: "Remember for exactly",
}


def _format(color: str, background: str) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    fmt.setBackground(QColor(background))
    return fmt


class DiffHighlighter(QSyntaxHighlighter):
    """Unified-diff colours: ``+`` added, ``-`` removed, ``@@`` hunk headers."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self.added = _format("#1b5e20", "#e8f5e9")
        self.removed = _format("#b71c1c", "#ffebee")
        self.hunk = _format("#0d47a1", "#e3f2fd")

    def highlightBlock(self, text: str) -> None:
        if text.startswith(("+++", "---")):
            return
        fmt = None
        if text.startswith("+"):
            fmt = self.added
        elif text.startswith("-"):
            fmt = self.removed
        elif text.startswith("@@"):
            fmt = self.hunk
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


class ActionDetailsView(QWidget):
    """Everything about one action, for :class:`~ollie_tray.dialogs.approval.ApprovalDialog`."""

    def __init__(self, request: ApprovalRequest, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        action = request.action
        assert action is not None
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        column.addWidget(c.section_title("Action (as the agent describes it)"))
        form = c.Form()
        form.add_row("Agent", t.value_label(c.visible(action.agent), "Agent"))
        form.add_row("Tool", t.value_label(c.visible(action.tool), "Agent tool"))
        form.add_row("Action", t.MonoBox(c.visible(action.summary), "Action", max_lines=3))
        if action.path is not None:
            form.add_row("File", t.MonoBox(c.visible(action.path), "File", framed=False))
        cwd = t.MonoBox(c.visible(request.cwd), "Working directory", max_lines=2, framed=False)
        form.add_row("Working dir", cwd)
        req = request.requester
        process = t.MonoBox(
            c.visible(f"pid {req.pid} · {req.exe or '?'}"), "Process", framed=False, mono=False
        )
        form.add_row("Requested by", process)
        column.addLayout(form)

        self.detail_box: t.MonoBox | None = None
        self.description_box: t.MonoBox | None = None
        self.diff_highlighter: DiffHighlighter | None = None
        if action.detail_differs and action.command is not None:
            # What runs, and what a rule would cover, is the command: it comes first;
            # the requester's differing description follows under a warning.
            column.addWidget(c.section_title("The command (what runs)"))
            self.detail_box = t.MonoBox(
                c.visible(action.command, multiline=True), "The command", max_lines=16
            )
            column.addWidget(self.detail_box)
            column.addWidget(
                c.warning_panel(
                    f"⚠  Warning: {DETAIL_DIFFERS}; this answer is never remembered.",
                    (),
                    "Description differs warning",
                )
            )
            column.addWidget(c.section_title("The description (as the agent gives it)"))
            self.description_box = t.MonoBox(
                c.visible(action.detail or "", multiline=True), "The description", max_lines=8
            )
            column.addWidget(self.description_box)
        else:
            detail = action.detail if action.detail is not None else action.command
            if detail is not None:
                title = {
                    ActionDisplay.DIFF: "The edit (diff)",
                    ActionDisplay.COMMAND: "The command",
                }.get(action.display or ActionDisplay.TEXT, "Details")
                column.addWidget(c.section_title(title))
                self.detail_box = t.MonoBox(c.visible(detail, multiline=True), title, max_lines=16)
                if action.display is ActionDisplay.DIFF:
                    self.diff_highlighter = DiffHighlighter(self.detail_box.document())
                    self.diff_highlighter.rehighlight()  # now, not on the next loop turn
                column.addWidget(self.detail_box)
        column.addWidget(c.section_title("Input"))
        self.input_box = t.MonoBox(c.pretty_json(request.args), "Input", max_lines=6)
        column.addWidget(self.input_box)
        column.addStretch(1)


def pattern_editor(request: ApprovalRequest) -> tuple[str, QLineEdit]:
    """(caption, editor) of the remember pattern, prefilled with the broker's suggestion."""
    action = request.action
    assert action is not None
    edit = QLineEdit(action.pattern)
    edit.setAccessibleName("Remember pattern")
    edit.setToolTip(
        "What a remembered answer covers. The broker keeps it only if it still covers "
        "this action; otherwise the answer counts once."
    )
    return PATTERN_CAPTION[action.pattern_kind], edit
