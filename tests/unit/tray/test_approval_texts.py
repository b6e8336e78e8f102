"""Every word of the approval dialog's header and details, and what a screen reader hears.

Two requests: a plain sudo request, and a sandbox escape with every field
unusual (no variant, executable or hash, a remote host that calls itself
otherwise, a sandboxed requester with no command line, a client name, code,
no description).  Each form row is checked as caption, accessible name,
shown value and tooltip; the header as icon, colours, title and tags.
Written for the mutants of ``_header``, ``_description`` and ``_details``
that no other test noticed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.approval_text import explanation
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind

Factory = Callable[..., ApprovalRequest]
Row = tuple[str, str, str, str]
EXE = "/home/alice/.config/ollie/tools/system_logs_journald"


def built(qtbot: QtBot, request: ApprovalRequest) -> ApprovalDialog:
    dialog = ApprovalDialog(request, arm_delay_ms=20)
    qtbot.addWidget(dialog)
    return dialog


def value_of(widget: QWidget) -> str:
    if isinstance(widget, QPlainTextEdit):
        return widget.toPlainText()
    assert isinstance(widget, QLabel), widget
    return widget.text()


def form_rows(dialog: ApprovalDialog) -> list[Row]:
    """(caption, accessible name, value, tooltip) of every captioned value, top to bottom."""
    rows: list[Row] = []
    for caption in dialog.findChildren(QLabel):
        field = caption.buddy()
        if field is None or field is dialog.remember_combo:
            continue
        rows.append((caption.text(), field.accessibleName(), value_of(field), field.toolTip()))
    return rows


def label_named(dialog: ApprovalDialog, name: str) -> QLabel:
    [label] = [w for w in dialog.findChildren(QLabel) if w.accessibleName() == name]
    return label


def same_icon(label: QLabel, color: str, glyph: str, shape: str) -> bool:
    """Whether ``label`` shows the 46-point ``glyph`` icon (compared as a label shows it)."""
    expected = c.icon_label(c.glyph_pixmap(color, glyph, 46, shape=shape), "expected")
    return label.pixmap().toImage() == expected.pixmap().toImage()


def sandbox_oddities(factory: Factory) -> ApprovalRequest:
    requester = Requester(pid=77, uid=1000, gid=1000, exe="", cmdline=(), sandboxed=True)
    return factory(
        kind=Kind.SANDBOX,
        variant=None,
        executable=None,
        sha256=None,
        remote=True,
        host="build",
        claimed_host="laptop2",
        client="mcp-x",
        requester=requester,
        description="   ",
        code="echo hi",
        argv=("bash", "-c", "echo hi"),
    )


def test_a_sudo_requests_details_word_for_word(qtbot: QtBot, approval_request: Factory) -> None:
    request = approval_request()
    dialog = built(qtbot, request)
    sha = request.sha256 or ""
    assert form_rows(dialog) == [
        ("Tool", "Tool: system_logs", "system_logs", ""),
        ("Variant", "Variant: variant 0", "variant 0", ""),
        ("Executable", "Executable", EXE, ""),
        ("SHA-256", f"SHA-256: {sha[:12]}", sha[:12], sha),
        ("Command", "Command", f"sudo -A -- {EXE}", ""),
        ("Working dir", "Working directory", "/home/alice/project", ""),
        ("Host", "Host: laptop  (this computer)", "laptop  (this computer)", ""),
        ("Process", "Process", "pid 4242 · /usr/bin/python3.11", ""),
        ("Command line", "Requester command line", "python3 agent.py --model local", ""),
        (
            "Started by",
            "Process chain, nearest first",
            "4242 python3 agent.py --model local   ← requester\n"
            "↑ started by 4200 bash -l\n"
            "  ↑ started by 4100 tmux new -s agents\n"
            "    ↑ started by 1500 /lib/systemd/systemd --user",
            "",
        ),
    ]
    titles = ["Tool (from this computer's registry)", "Arguments"]
    titles.insert(1, "Requested by systemd (as reported by the system for pid 4242)")
    for title in titles:
        assert label_named(dialog, title).text() == title
    description = label_named(dialog, f"Description: {request.description}")
    assert description.toolTip() == "From this computer's tool registry, not from the requester"
    assert description.styleSheet() == "font-style: italic;"


def test_an_unusual_sandbox_requests_details_word_for_word(
    qtbot: QtBot, approval_request: Factory
) -> None:
    dialog = built(qtbot, sandbox_oddities(approval_request))
    none = "none (the tool has no variants)"
    host = "build  (remote host; it calls itself laptop2)"
    client = "mcp-x  (as the requester says)"
    assert form_rows(dialog) == [
        ("Tool", "Tool: system_logs", "system_logs", ""),
        ("Variant", f"Variant: {none}", none, ""),
        ("Executable", "Executable", "(not found)", ""),
        ("SHA-256", "SHA-256: (unknown)", "(unknown)", ""),
        ("Command", "Command", "bash -c '[the code above]'", ""),
        ("Working dir", "Working directory", "/home/alice/project", ""),
        ("Host", f"Host: {host}", host, ""),
        ("Process", "Process", "pid 77 · ?", ""),
        ("Command line", "Requester command line", "(unknown)", ""),
        ("Started by", "Process chain, nearest first", "77 ?   ← requester", ""),
        ("Via client", f"Via client: {client}", client, ""),
    ]
    title = "Requested by (as reported by the system for pid 77, from inside the sandbox)"
    assert label_named(dialog, title).text() == title
    empty = "(the registry has no description)"
    assert label_named(dialog, f"Description: {empty}").text() == empty


def test_the_sudo_header_is_red_and_says_run_as_root(
    qtbot: QtBot, approval_request: Factory
) -> None:
    request = approval_request()
    dialog = built(qtbot, request)
    icon = label_named(dialog, "Run as root")
    assert same_icon(icon, c.RED, "#", "square")
    assert dialog.title_label.text() == "system_logs wants to run as root via sudo"
    assert dialog.title_label.font().bold()
    body = QLabel().font().pointSizeF()
    assert dialog.title_label.font().pointSizeF() == pytest.approx(1.45 * body)
    explain = label_named(dialog, explanation(request))
    assert explain.styleSheet() == f"color: {c.RED_DARK};"
    tag = label_named(dialog, "RUN AS ROOT")
    assert tag.text() == "RUN AS ROOT" and c.RED in tag.styleSheet()
    [summary] = [w for w in dialog.findChildren(QWidget) if w.accessibleName() == "Request summary"]
    assert f"background: {c.RED_TINT}; border: 1px solid {c.RED};" in summary.styleSheet()
    assert dialog.sandbox_badge is None and dialog.remote_badge is None


def test_the_sandbox_header_is_amber_with_its_tags(qtbot: QtBot, approval_request: Factory) -> None:
    request = sandbox_oddities(approval_request)
    dialog = built(qtbot, request)
    icon = label_named(dialog, "Sandbox escape")
    assert same_icon(icon, c.AMBER, "!", "triangle")
    assert dialog.title_label.text() == "system_logs wants to run outside the sandbox as you"
    explain = label_named(dialog, explanation(request))
    assert explain.styleSheet() == f"color: {c.AMBER_DARK};"
    tag = label_named(dialog, "SANDBOX ESCAPE")
    assert c.AMBER in tag.styleSheet()
    badge = dialog.sandbox_badge
    assert badge is not None
    assert badge.text() == "FROM INSIDE THE SANDBOX"
    assert badge.accessibleName() == "Requested from inside the sandbox"
    assert badge.toolTip() == "A process inside the sandbox asks. It never receives a password."
    assert "background: #6a1b9a;" in badge.styleSheet()
    remote = dialog.remote_badge
    assert remote is not None and "background: #1565c0;" in remote.styleSheet()
    [summary] = [w for w in dialog.findChildren(QWidget) if w.accessibleName() == "Request summary"]
    assert f"background: {c.AMBER_TINT}; border: 1px solid {c.AMBER};" in summary.styleSheet()


def test_the_mismatch_warning_heading_and_lines(qtbot: QtBot, approval_request: Factory) -> None:
    problem = "the executable's sha256 differs from the registry's"
    dialog = built(qtbot, approval_request(mismatches=(problem,)))
    texts = [w.text() for w in dialog.findChildren(QLabel)]
    assert "⚠  The request does not match the registry:" in texts
