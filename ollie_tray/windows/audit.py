"""The Audit window: recent elevation decisions from the audit log, newest first.

A table model over a snapshot of ``AuditLog.tail(limit)``, behind a filter
proxy: the text filter matches any column (case-insensitive), the decision
combo keeps all, allowed or denied rows.  :meth:`AuditWindow.refresh`
re-reads the log (the app calls it when a decision is recorded; the window
also re-reads when shown and on its Refresh button).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Protocol

from PySide6.QtCore import QObject, QSortFilterProxyModel, Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from ollie_tray.windows.common import (
    DecisionTableModel,
    Index,
    close_row,
    count_text,
    decision_table,
    status_label,
    window_layout,
)
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.record.audit import AuditError, AuditRecord
from registry_core.broker.wire.messages import Decision

COLUMNS = ("Time", "Tool", "Kind", "Host", "Decision", "By", "Requester", "Reason")
DECISION_COLUMN = 4
DECISION_FILTERS = (("All decisions", None), ("Allowed", Decision.ALLOW), ("Denied", Decision.DENY))


class AuditSource(Protocol):
    """What the window needs of the audit log (``AuditLog`` has it)."""

    def tail(self, n: int) -> Sequence[AuditRecord]: ...


def local_time(ts: float) -> str:
    """Epoch seconds as local date and time, to the second."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def requester_text(record: AuditRecord) -> str:
    """As ``ollie-tools audit`` prints it: pid and executable."""
    return record.requester.label()


def detail_text(record: AuditRecord) -> str:
    """Every recorded field of ``record``: the code in full first, then the whole JSON line.

    Control and bidi characters are made visible (``c.visible``): what is shown
    is what was recorded, with nothing able to hide or reorder text.
    """
    parts = [f"{local_time(record.time)}  {record.decision.value} by {record.by.value}"]
    parts.append(f"reason: {record.reason}")
    if record.code:
        parts.append("code (in full):\n" + record.code)
    if record.argv:
        parts.append("argv: " + c.shell_join(record.argv))
    parts.append("record:\n" + json.dumps(record.to_json(), indent=2, ensure_ascii=False))
    return c.visible("\n\n".join(parts), multiline=True)


class AuditTableModel(DecisionTableModel[AuditRecord]):
    """Records newest first; ``UserRole`` gives the :class:`AuditRecord` (or the sort key)."""

    columns = COLUMNS
    decision_column = DECISION_COLUMN

    def set_records(self, records: Sequence[AuditRecord]) -> None:
        """``records`` oldest first (as the log gives them); shown newest first."""
        self.set_rows(sorted(records, key=lambda r: r.time, reverse=True))

    def record(self, row: int) -> AuditRecord:
        return self.row_item(row)

    def tooltip(self, record: AuditRecord, column: int) -> str:
        return _details(record)

    def text(self, record: AuditRecord, column: int) -> str:
        texts = (
            local_time(record.time),
            record.tool,
            record.kind.value,
            record.host + (" (remote)" if record.remote else ""),
            record.decision.value,
            record.by.value,
            requester_text(record),
            record.reason,
        )
        return texts[column]


def _details(record: AuditRecord) -> str:
    lines = [
        f"{record.decision.value} by {record.by.value}: {record.reason}",
        f"executable: {record.executable or '?'}",
    ]
    if record.sha256:
        lines.append(f"sha256: {record.sha256}")
    if record.argv:
        lines.append("argv: " + c.shell_join(record.argv))
    lines.append(f"requester: pid {record.requester.pid} {record.requester.exe}")
    if record.requester.sandboxed:
        lines.append(f"requested {SANDBOX_LABEL}")
    if record.requester.cmdline:
        lines.append("command line: " + c.shell_join(record.requester.cmdline))
    if record.remember is not None:
        lines.append(f"remember: {record.remember.label}")
    return c.visible("\n".join(lines), multiline=True)


class AuditFilterProxy(QSortFilterProxyModel):
    """Text in any column (case-insensitive) and, optionally, one decision."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._decision: Decision | None = None
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)

    def set_decision(self, decision: Decision | None) -> None:
        if hasattr(self, "endFilterChange"):  # Qt >= 6.10 deprecates invalidateRowsFilter
            self.beginFilterChange()
            self._decision = decision
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._decision = decision
            self.invalidateRowsFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        if self._decision is not None:
            model = self.sourceModel()
            assert isinstance(model, AuditTableModel)
            if model.record(source_row).decision is not self._decision:
                return False
        return super().filterAcceptsRow(source_row, source_parent)


class AuditWindow(QWidget):
    """The recent decisions, filterable.  ``limit`` is how many records are read."""

    def __init__(
        self, log: AuditSource, *, limit: int = 500, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._log = log
        self._limit = limit
        self.setWindowTitle("Ollie — audit log")
        self.setAccessibleName("Audit log")
        self.resize(1040, 480)

        self.model = AuditTableModel(self)
        self.proxy = AuditFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter: tool, host, requester, reason…")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.setAccessibleName("Filter the decisions")
        self.filter_edit.textChanged.connect(self.proxy.setFilterFixedString)
        filter_label = QLabel("&Filter:")
        filter_label.setBuddy(self.filter_edit)
        self.decision_combo = QComboBox()
        self.decision_combo.setAccessibleName("Show decisions")
        for label, decision in DECISION_FILTERS:
            self.decision_combo.addItem(label, None if decision is None else decision.value)
        self.decision_combo.currentIndexChanged.connect(self._decision_changed)
        self.refresh_button = QPushButton("&Refresh")
        self.refresh_button.setAccessibleName("Reload the audit log")
        self.refresh_button.clicked.connect(self.refresh)

        self.table = decision_table(self.proxy, "Recent decisions table")
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setAccessibleName("Everything recorded about the selected decision")
        self.detail.setPlaceholderText("Select a decision to see everything recorded about it.")
        self.detail.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.detail.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.copy_button = QPushButton("Co&py details")
        self.copy_button.setAccessibleName("Copy the selected decision's details")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self.copy_details)
        self.table.selectionModel().selectionChanged.connect(self._show_selected)
        self.proxy.modelReset.connect(self._show_selected)

        self.status_label = status_label()
        self.proxy.rowsInserted.connect(self._update_status)
        self.proxy.rowsRemoved.connect(self._update_status)
        self.proxy.modelReset.connect(self._update_status)
        self.proxy.layoutChanged.connect(self._update_status)
        self._error = ""

        controls = QHBoxLayout()
        controls.setSpacing(8)
        controls.addWidget(filter_label)
        controls.addWidget(self.filter_edit, 1)
        controls.addWidget(self.decision_combo)
        controls.addWidget(self.refresh_button)

        pane = QWidget()
        pane_layout = QVBoxLayout(pane)
        pane_layout.setContentsMargins(0, 0, 0, 0)
        pane_layout.addWidget(self.detail, 1)
        copy_row = QHBoxLayout()
        copy_row.addStretch(1)
        copy_row.addWidget(self.copy_button)
        pane_layout.addLayout(copy_row)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(pane)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)

        layout = window_layout(self)
        layout.addLayout(controls)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.status_label)
        layout.addLayout(close_row(self))
        self.refresh()

    def selected_record(self) -> AuditRecord | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        source = self.proxy.mapToSource(rows[0])
        return self.model.record(source.row()) if source.isValid() else None

    def copy_details(self) -> None:
        QGuiApplication.clipboard().setText(self.detail.toPlainText())

    def _show_selected(self) -> None:
        record = self.selected_record()
        self.detail.setPlainText("" if record is None else detail_text(record))
        self.copy_button.setEnabled(record is not None)

    def refresh(self) -> None:
        """Re-read the last ``limit`` records."""
        try:
            records = list(self._log.tail(self._limit))
            self._error = ""
        except AuditError as exc:
            records = []
            self._error = f"Could not read the audit log: {exc}"
        self.model.set_records(records)
        self._update_status()

    def visible_records(self) -> list[AuditRecord]:
        """The records the table shows, top to bottom (for tests and the app)."""
        out = []
        for row in range(self.proxy.rowCount()):
            source = self.proxy.mapToSource(self.proxy.index(row, 0))
            out.append(self.model.record(source.row()))
        return out

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()

    def _decision_changed(self) -> None:
        value = self.decision_combo.currentData()  # Qt hands a StrEnum back as str
        self.proxy.set_decision(None if value is None else Decision(value))
        self._update_status()

    def _update_status(self) -> None:
        if self._error:
            self.status_label.setText(c.visible(self._error))
            self.status_label.setStyleSheet(f"color: {c.RED_DARK};")
            return
        self.status_label.setStyleSheet("")
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        if total == 0:
            self.status_label.setText("No decisions recorded yet.")
        elif shown == total:
            self.status_label.setText(f"{count_text(total, 'most recent decision')}.")
        else:
            verb = "matches" if shown == 1 else "match"
            self.status_label.setText(
                f"{shown} of {count_text(total, 'most recent decision')} {verb}."
            )
