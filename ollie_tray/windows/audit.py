"""The Audit window: recent elevation decisions from the audit log, newest first.

A table model over a snapshot of ``AuditLog.tail(limit)``, behind a filter
proxy: the text filter matches any column (case-insensitive), the decision
combo keeps all, allowed or denied rows.  :meth:`AuditWindow.refresh`
re-reads the log (the app calls it when a decision is recorded; the window
also re-reads when shown and on its Refresh button).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any, Protocol

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from registry_core.elevation.audit import AuditError, AuditRecord
from registry_core.elevation.messages import Decision

COLUMNS = ("Time", "Tool", "Kind", "Host", "Decision", "By", "Requester", "Reason")
DECISION_COLUMN = 4
DECISION_FILTERS = (("All decisions", None), ("Allowed", Decision.ALLOW), ("Denied", Decision.DENY))
_Index = QModelIndex | QPersistentModelIndex


class AuditSource(Protocol):
    """What the window needs of the audit log (``AuditLog`` has it)."""

    def tail(self, n: int) -> Sequence[AuditRecord]: ...


def local_time(ts: float) -> str:
    """Epoch seconds as local date and time, to the second."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def requester_text(record: AuditRecord) -> str:
    exe = os.path.basename(record.requester.exe) or "?"
    return f"{record.requester.pid} {exe}"


class AuditTableModel(QAbstractTableModel):
    """Records newest first; ``UserRole`` gives the :class:`AuditRecord` (or the sort key)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._records: list[AuditRecord] = []

    def set_records(self, records: Sequence[AuditRecord]) -> None:
        """``records`` oldest first (as the log gives them); shown newest first."""
        self.beginResetModel()
        self._records = sorted(records, key=lambda r: r.time, reverse=True)
        self.endResetModel()

    def record(self, row: int) -> AuditRecord:
        return self._records[row]

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._records)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._records):
            return None
        record = self._records[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return c.visible(self._text(record, column))
        if role == Qt.ItemDataRole.UserRole:
            return record
        if role == Qt.ItemDataRole.ToolTipRole:
            return _details(record)
        if role == Qt.ItemDataRole.ForegroundRole and column == DECISION_COLUMN:
            return QColor(c.GREEN if record.decision is Decision.ALLOW else c.RED)
        return None

    def _text(self, record: AuditRecord, column: int) -> str:
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

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:
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

        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setAccessibleName("Recent decisions table")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)

        self.status_label = QLabel()
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setAccessibleName("Status")
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

        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(8)
        layout.addLayout(controls)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status_label)
        self.refresh()

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
            self.status_label.setText(f"{total} most recent decision(s).")
        else:
            self.status_label.setText(f"{shown} of {total} most recent decision(s) match.")
