"""The approval dialog's details (``ApprovalDialog._details``), item by item and row by row.

The details of a tool request are one column: the code (when there is
some), the registry's facts as a form, the requester as a form, and the
arguments.  Each test walks that column as the layout holds it and
compares it whole: section titles in order, each form row's caption and
field (label or text box, accessible name, shown value, tooltip, monospace
or not, framed or not, how many lines a box grows to before it scrolls),
which rows appear for which request, and where each item sits (no margin
around the column, 4 pixels between items).  An agent's action has a view
of its own instead (``test_action_dialog.py``).  Written for the 309 mutants
of ``_details``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QFrame, QLabel, QLayoutItem, QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs import common as c
from ollie_tray.dialogs import textboxes as t
from ollie_tray.dialogs.action_view import ActionDetailsView
from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.code_section import CodeSection
from registry_core.broker.peer.identity import ProcessInfo, Requester
from registry_core.broker.question import ActionDetails, ApprovalRequest
from registry_core.broker.wire.messages import ActionDisplay, Kind, PatternKind

Factory = Callable[..., ApprovalRequest]
EXE = "/home/alice/.config/ollie/tools/system_logs_journald"
CODE = "echo hi"

# A form row: (caption, field): a value label is ("label", name, value, tooltip, mono);
# a text box is ("box", name, value, mono, framed, lines it grows to).
Field = tuple[object, ...]
Row = tuple[str, Field]


def built(qtbot: QtBot, request: ApprovalRequest) -> ApprovalDialog:
    dialog = ApprovalDialog(request, arm_delay_ms=20)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def details_area(dialog: ApprovalDialog) -> t.FitScrollArea:
    [area] = dialog.findChildren(t.FitScrollArea)
    return area


def column_of(dialog: ApprovalDialog) -> tuple[QWidget, list[QLayoutItem]]:
    """The details' content widget and the items of its column, top to bottom."""
    content = details_area(dialog).widget()
    assert content is not None
    column = content.layout()
    assert column is not None
    items = [column.itemAt(index) for index in range(column.count())]
    return content, [item for item in items if item is not None]


def is_mono(widget: QWidget) -> bool:
    return widget.font() == c.mono_font()


def grows_to(box: t.MonoBox) -> int:
    """How many lines ``box`` grows to before it scrolls (its text is put back after)."""
    text = box.toPlainText()
    try:
        box.setPlainText("x")
        one = box.heightForWidth(400)
        box.setPlainText("\n".join("x" * 40))
        many = box.heightForWidth(400)
    finally:
        box.setPlainText(text)
    line = QFontMetrics(box.font()).lineSpacing()
    assert (many - one) % line == 0, (one, many, line)
    return 1 + (many - one) // line


def field_of(widget: QWidget) -> Field:
    if isinstance(widget, t.MonoBox):
        framed = widget.frameShape() != QFrame.Shape.NoFrame
        assert widget.isReadOnly()
        return (
            "box",
            widget.accessibleName(),
            widget.toPlainText(),
            is_mono(widget),
            framed,
            grows_to(widget),
        )
    assert isinstance(widget, QLabel), widget
    return ("label", widget.accessibleName(), widget.text(), widget.toolTip(), is_mono(widget))


def form_rows(form: c.Form) -> list[Row]:
    rows: list[Row] = []
    for row in range(form.rowCount()):
        caption_item, field_item = form.itemAtPosition(row, 0), form.itemAtPosition(row, 1)
        assert caption_item is not None and field_item is not None
        caption, field = caption_item.widget(), field_item.widget()
        assert isinstance(caption, QLabel)
        assert caption.buddy() is field
        rows.append((caption.text(), field_of(field)))
    return rows


def column_items(dialog: ApprovalDialog) -> list[object]:
    """The details column: ("code", …), ("title", …), ("form", rows), ("box", …), ("stretch",)."""
    items: list[object] = []
    for item in column_of(dialog)[1]:
        widget, layout = item.widget(), item.layout()
        if isinstance(widget, CodeSection):
            assert widget is dialog.code_section
            assert dialog.code_box is widget.box
            items.append(("code", widget.box.toPlainText()))
        elif isinstance(widget, QLabel):
            items.append(("title", widget.text(), widget.accessibleName()))
        elif isinstance(layout, c.Form):
            items.append(("form", form_rows(layout)))
        elif isinstance(widget, t.MonoBox):
            assert widget is dialog.args_box
            items.append(field_of(widget))
        else:
            assert item.spacerItem() is not None, item
            items.append(("stretch",))
    return items


def assert_packed(dialog: ApprovalDialog) -> None:
    """No margin around the column, exactly 4 pixels between its items, full width."""
    content, items = column_of(dialog)
    boxes = [item.geometry() for item in items if not item.isEmpty()]
    assert boxes[0].top() == 0
    for rect in boxes:
        assert (rect.left(), rect.right()) == (0, content.width() - 1)
    for above, below in itertools.pairwise(boxes):
        assert below.top() - above.bottom() - 1 == 4, (above, below)
    assert items[-1].geometry().bottom() == content.height() - 1


def requester(**overrides: object) -> Requester:
    fields: dict[str, object] = {
        "pid": 4242,
        "uid": 1000,
        "gid": 1000,
        "exe": "/usr/bin/python3.11",
        "cmdline": ("python3", "agent.py"),
        "parents": (ProcessInfo(4200, "/usr/bin/bash", ("bash", "-l")),),
        "host": "laptop",
    }
    fields.update(overrides)
    return Requester(**fields)  # type: ignore[arg-type]


SHA = "0123456789abcdef" * 4


def tool_rows(
    *, variant: str, exe: str, sha: tuple[str, str], command: str, host: str
) -> list[Row]:
    return [
        ("Tool", ("label", "Tool: system_logs", "system_logs", "", False)),
        ("Variant", ("label", f"Variant: {variant}", variant, "", False)),
        ("Executable", ("box", "Executable", exe, True, False, 8)),
        ("SHA-256", ("label", f"SHA-256: {sha[0]}", sha[0], sha[1], True)),
        ("Command", ("box", "Command", command, True, True, 4)),
        ("Working dir", ("box", "Working directory", "/home/alice/project", True, False, 3)),
        ("Host", ("label", f"Host: {host}", host, "", False)),
    ]


def requester_rows(*, process: str, cmdline: str, chain: str) -> list[Row]:
    return [
        ("Process", ("box", "Process", process, False, False, 8)),
        ("Command line", ("box", "Requester command line", cmdline, True, True, 3)),
        ("Started by", ("box", "Process chain, nearest first", chain, True, True, 6)),
    ]


ARGS = ("box", "Arguments", '{\n  "lines": 50\n}', True, True, 8)


def test_a_plain_requests_details_in_order(qtbot: QtBot, approval_request: Factory) -> None:
    request = approval_request(sha256=SHA, requester=requester(), args={"lines": 50})
    dialog = built(qtbot, request)
    assert dialog.action_view is None
    assert dialog.code_section is None and dialog.code_box is None
    title = "Requested by (as reported by the system for pid 4242)"
    assert column_items(dialog) == [
        ("title", "Tool (from this computer's registry)", "Tool (from this computer's registry)"),
        (
            "form",
            tool_rows(
                variant="variant 0",
                exe=EXE,
                sha=(SHA[:12], SHA),
                command=f"sudo -A -- {EXE}",
                host="laptop  (this computer)",
            ),
        ),
        ("title", title, title),
        (
            "form",
            requester_rows(
                process="pid 4242 · /usr/bin/python3.11",
                cmdline="python3 agent.py",
                chain="4242 python3 agent.py   ← requester\n↑ started by 4200 bash -l",
            ),
        ),
        ("title", "Arguments", "Arguments"),
        ARGS,
        ("stretch",),
    ]
    assert_packed(dialog)


def test_code_first_and_every_optional_row(qtbot: QtBot, approval_request: Factory) -> None:
    """Code, a remote host that names itself otherwise, a sandboxed requester, a client."""
    who = requester(
        pid=77,
        exe="",
        cmdline=("bash", "-c", CODE),
        parents=(ProcessInfo(70, "/usr/bin/sh", ("sh", "-c", f"bash -c '{CODE}'")),),
        sandboxed=True,
    )
    request = approval_request(
        kind=Kind.SANDBOX,
        variant=None,
        executable=None,
        sha256=None,
        remote=True,
        host="build",
        claimed_host="laptop2",
        client="mcp-x",
        requester=who,
        code=CODE,
        argv=("bash", "-c", CODE),
        args={"lines": 50},
    )
    dialog = built(qtbot, request)
    assert dialog.action_view is None
    title = "Requested by (as reported by the system for pid 77, from inside the sandbox)"
    see = "[the code above]"
    client = "mcp-x  (as the requester says)"
    assert column_items(dialog) == [
        ("code", CODE),
        ("title", "Tool (from this computer's registry)", "Tool (from this computer's registry)"),
        (
            "form",
            tool_rows(
                variant="none (the tool has no variants)",
                exe="(not found)",
                sha=("(unknown)", ""),
                command=f"bash -c '{see}'",
                host="build  (remote host; it calls itself laptop2)",
            ),
        ),
        ("title", title, title),
        (
            "form",
            [
                *requester_rows(
                    process="pid 77 · ?",
                    cmdline=f"bash -c '{see}'",
                    chain=f"77 bash -c {see}   ← requester\n↑ started by 70 sh -c bash -c '{see}'",
                ),
                ("Via client", ("label", f"Via client: {client}", client, "", False)),
            ],
        ),
        ("title", "Arguments", "Arguments"),
        ARGS,
        ("stretch",),
    ]
    assert_packed(dialog)


def test_the_host_row_for_each_place(qtbot: QtBot, approval_request: Factory) -> None:
    def host_value(**fields: object) -> object:
        dialog = built(qtbot, approval_request(**fields))
        form = column_items(dialog)[1]
        assert isinstance(form, tuple)
        rows = form[1]
        assert isinstance(rows, list)
        [value] = [field[2] for caption, field in rows if caption == "Host"]
        return value

    assert host_value(remote=True, host="build") == "build  (remote host)"
    assert host_value(host="laptop", claimed_host="other") == (
        "laptop  (this computer; it calls itself other)"
    )
    assert host_value(host="laptop", claimed_host="") == "laptop  (this computer)"


def test_an_unknown_command_line_and_an_empty_client_name(
    qtbot: QtBot, approval_request: Factory
) -> None:
    """No command line: "(unknown)"; a client that gave an empty name still gets its row."""
    who = requester(cmdline=(), exe="/usr/bin/node", parents=())
    dialog = built(qtbot, approval_request(requester=who, client="", variant=3))
    items = column_items(dialog)
    tool_form, requester_form = items[1], items[3]
    assert isinstance(tool_form, tuple) and isinstance(requester_form, tuple)
    assert ("Variant", ("label", "Variant: variant 3", "variant 3", "", False)) in tool_form[1]
    assert requester_form[1] == [
        *requester_rows(
            process="pid 4242 · /usr/bin/node",
            cmdline="(unknown)",
            chain="4242 /usr/bin/node   ← requester",
        ),
        (
            "Via client",
            (
                "label",
                "Via client:   (as the requester says)",
                "  (as the requester says)",
                "",
                False,
            ),
        ),
    ]


def test_an_agent_action_has_its_own_view(qtbot: QtBot, approval_request: Factory) -> None:
    action = ActionDetails(
        agent="claude-code",
        tool="Bash",
        summary="ls -la",
        detail="ls -la",
        display=ActionDisplay.COMMAND,
        command="ls -la",
        path=None,
        pattern_kind=PatternKind.PROGRAM,
        pattern="ls",
    )
    dialog = built(qtbot, approval_request(kind=Kind.SANDBOX, action=action))
    view = dialog.action_view
    assert isinstance(view, ActionDetailsView)
    assert details_area(dialog).widget() is view
    titles = [w.text() for w in view.findChildren(QLabel) if w.font().bold()]
    assert "Arguments" not in [w.text() for w in dialog.findChildren(QLabel)]
    assert titles[0] == "Action (as the agent describes it)"
