"""What the tray's table windows (Policies, Audit) share.

:class:`DecisionTableModel` is a read-only table model over a snapshot list
of rows that each carry a :class:`~registry_core.broker.wire.messages.Decision`
(the decision column is coloured green or red); :func:`decision_table` and
:func:`status_label` build the view and the status line the same way in both
windows, and :func:`window_layout` gives them the same margins.  All of it
runs in the GUI thread only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from PySide6.QtCore import (
    QAbstractItemModel,
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.dialogs import common as c
from registry_core.broker.question import Remember
from registry_core.broker.wire.messages import Decision

Index = QModelIndex | QPersistentModelIndex


class HasDecision(Protocol):
    """A row the table can colour: a policy or an audit record."""

    @property
    def decision(self) -> Decision: ...


RowT = TypeVar("RowT", bound=HasDecision)


class DecisionTableModel(QAbstractTableModel, Generic[RowT]):
    """A read-only table over a snapshot of rows; ``UserRole`` gives the row itself.

    Subclasses set :attr:`columns` and :attr:`decision_column` and say what a
    cell shows (:meth:`text`) and what its tooltip is (:meth:`tooltip`).
    """

    columns: ClassVar[Sequence[str]]
    decision_column: ClassVar[int]

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[RowT] = []

    def set_rows(self, rows: Sequence[RowT]) -> None:
        """Show ``rows`` (in this order) instead of the current snapshot."""
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def row_item(self, row: int) -> RowT:
        return self._rows[row]

    def text(self, item: RowT, column: int) -> str:
        raise NotImplementedError

    def tooltip(self, item: RowT, column: int) -> str:
        raise NotImplementedError

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        item = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return c.visible(self.text(item, column))
        if role == Qt.ItemDataRole.UserRole:
            return item
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tooltip(item, column)
        if role == Qt.ItemDataRole.ForegroundRole and column == self.decision_column:
            return QColor(c.GREEN if item.decision is Decision.ALLOW else c.RED)
        return None


def decision_table(model: QAbstractItemModel, accessible_name: str) -> QTableView:
    """A read-only, whole-row-selecting table over ``model``; columns fit their contents
    and the last one stretches."""
    table = QTableView()
    table.setModel(model)
    table.setAccessibleName(accessible_name)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().setVisible(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    return table


def status_label() -> QLabel:
    """The plain-text status line under a table."""
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setAccessibleName("Status")
    return label


def window_layout(window: QWidget) -> QVBoxLayout:
    """The window's top-level vertical layout, with the windows' common margins."""
    layout = QVBoxLayout(window)
    layout.setContentsMargins(14, 12, 14, 12)
    layout.setSpacing(8)
    return layout


def count_text(count: int, singular: str, plural: str | None = None) -> str:
    """``1 tool``, ``2 tools``, ``0 tools``; ``plural`` for irregular words (``1 policy``)."""
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


class _EscapeCloses(QObject):
    """Esc pressed anywhere in the window (and not used by the focused widget) closes it."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and event.modifiers() == Qt.KeyboardModifier.NoModifier
        ):
            self._window.close()
            return True
        return False


def closable(window: QWidget) -> QPushButton:
    """Esc closes ``window``; returns its Close button (the caller places it).

    The key reaches the window when the focused widget does not use it (a key
    event travels up to the parents), so a filter that clears itself on Esc
    keeps working.
    """
    window.installEventFilter(_EscapeCloses(window))
    button = QPushButton("&Close")
    button.setAccessibleName("Close this window")
    button.clicked.connect(window.close)
    return button


def close_row(window: QWidget) -> QHBoxLayout:
    """A bottom row with the window's Close button on the right (see :func:`closable`)."""
    row = QHBoxLayout()
    row.addStretch(1)
    row.addWidget(closable(window))
    return row


class Expiring(Protocol):
    """A remembered decision that may end: a tool policy or an action rule."""

    @property
    def remember(self) -> Remember: ...

    @property
    def expires(self) -> float | None: ...


def expires_text(policy: Expiring, now: float) -> str:
    """When a remembered decision ends, for people: ``never``, ``this session``, ``in 14 min``."""
    if policy.remember is Remember.SESSION:
        return "this session"
    if policy.expires is None:
        return "never"
    left = policy.expires - now
    if left <= 0:
        return "expired"
    minutes = math.ceil(left / 60)
    if minutes < 60:
        return f"in {minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"
