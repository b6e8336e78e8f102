"""The approval dialog's code section and requester wording (rules in ``request_view``).

For ``ollie-elevate`` requests the code comes first, in full, with its line
count; runs of blank lines are collapsed into one marked line; risky
constructs are named in words above it; when the box cannot show every
line, a marker says how many more lines are below.  The same code is shown
once: where it also appears in the command or the requester's command line
it is replaced by a pointer to this section.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs import textboxes as t
from registry_core.broker.ask.request_view import (
    agent_name,
    code_view,
    process_chain,
    risk_flags,
)
from registry_core.broker.peer.identity import Requester

CODE_LINES = 14
"""Lines of code the box shows before it scrolls (then a marker says how many more)."""
SEE_CODE = "[the code above]"


class CodeSection(QWidget):
    """Title with the line count, risk flags in words, the code, and a "more lines" marker."""

    def __init__(self, code: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        view = code_view(code)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        count = "1 line" if view.total == 1 else f"{view.total} lines"
        self.title = c.section_title(f"Code to run ({count}, shown in full)")
        column.addWidget(self.title)
        self.flags = risk_flags(code)
        self.flags_panel: QWidget | None = None
        if self.flags:
            self.flags_panel = c.warning_panel(
                "⚠  Read the code: it", [f"• {flag}" for flag in self.flags], "Risky constructs"
            )
            column.addWidget(self.flags_panel)
        text = "\n".join(c.visible(line) for line in view.lines)
        self.box = t.MonoBox(text, "Code to run", max_lines=CODE_LINES)
        column.addWidget(self.box)
        hidden = len(view.lines) - CODE_LINES
        self.more: QLabel = c.plain_label(
            f"▼ {hidden} more lines below: scroll the code to read them all" if hidden > 0 else "",
            style=f"color: {c.RED_DARK}; font-weight: bold;",
        )
        self.more.setAccessibleName("More code below")
        self.more.setVisible(hidden > 0)
        column.addWidget(self.more)


def without_code(argv: Sequence[str], code: str | None) -> list[str]:
    """``argv`` with an argument that is the whole code replaced by :data:`SEE_CODE`."""
    if not code:
        return list(argv)
    return [SEE_CODE if arg == code else arg for arg in argv]


def requester_title(requester: Requester, where: str) -> str:
    agent = agent_name(requester)
    who = f"Requested by {c.visible(agent)}" if agent else "Requested by"
    return f"{who} (as reported by the system for pid {requester.pid}{where})"


def chain_text(requester: Requester, code: str | None) -> str:
    """The process chain, the requester first, each parent below it (secrets elided)."""
    lines = process_chain(requester)
    if code:
        lines = [line.replace(code, SEE_CODE) for line in lines]
    out = []
    for depth, line in enumerate(lines):
        prefix = "" if depth == 0 else "  " * (depth - 1) + "↑ started by "
        suffix = "   ← requester" if depth == 0 else ""
        out.append(prefix + c.visible(line) + suffix)
    return "\n".join(out)
