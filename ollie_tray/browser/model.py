"""The Tool Browser's list: a table model of every tool definition and its filter proxy.

One row per tool name (the definition that wins) plus one row per *shadowed*
definition (a ``.meta`` of the same name in a later tools directory), so the
list shows every file the registry looked at.

Performance (10,000 tools must stay responsive):

* rows are plain objects with their key, status and filter text precomputed;
* the filter matches once in Python per keystroke; big changes relayout once;
* sorting happens in the source model (one Python ``list.sort``) instead of
  the proxy's ``lessThan`` (one Python call per comparison, ~130,000 for
  10,000 rows), so :class:`ToolFilterProxy` forwards ``sort`` to the source;
* a refresh that changes a few tools becomes row removals, insertions and
  ``dataChanged`` for those rows only (:func:`~ollie_tray.browser.live.plan_row_update`),
  so the view keeps its selection and scroll position.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum, StrEnum
from functools import cache
from operator import attrgetter
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRectF,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPixmap

from ollie_tray.browser.live import plan_row_update, ranges
from ollie_tray.icons import icon
from registry_core import paths
from registry_core.registry import Registry, Status, Tool

_Index = QModelIndex | QPersistentModelIndex
RowKey = tuple[str, int]  # (tool name, 0 for the winner / n for the n-th shadowed definition)

TOOL_ROLE = Qt.ItemDataRole.UserRole + 1  # the ToolRow of an index
_R = Qt.ItemDataRole
# Views ask ~10 roles per painted cell: data() answers the others at once.
_ROLES = frozenset(
    {_R.DisplayRole, _R.DecorationRole, _R.ToolTipRole, _R.ForegroundRole, _R.FontRole}
)

# Above this many rows shown/hidden by one filter change, the proxy relayouts.
_RELAYOUT_THRESHOLD = 300


class RowStatus(StrEnum):
    AVAILABLE = "available"
    HIDDEN = "hidden"
    BROKEN = "broken"
    SHADOWED = "shadowed"


class Column(IntEnum):
    NAME = 0
    STATUS = 1
    TIER = 2
    FLAGS = 3
    DESCRIPTION = 4


_HEADERS = ("Name", "Status", "Tier", "Flags", "Description")
_STATUS_ORDER = {s: i for i, s in enumerate(RowStatus)}
_TIER_ORDER = {"hot": 0, "warm": 1, "cold": 2}
_DIM = {
    RowStatus.BROKEN: QColor("#b3261e"),
    RowStatus.HIDDEN: QColor("#6b7280"),
    RowStatus.SHADOWED: QColor("#6b7280"),
}
BADGE_COLORS = {
    "read-only": "#2f6f9f",
    "elevated": "#b8610a",
    "sudo": "#c62828",
    "demo": "#6d4c9f",
}
# Explanations of the terms the list uses (tooltips; the README says the same).
TIER_HELP = {
    "hot": "tier hot: the agent keeps this tool's documentation in its context (the default)",
    "warm": "tier warm: the agent keeps this tool's documentation for a while after using it",
    "cold": "tier cold: the agent loads this tool's documentation only when it uses the tool",
}
VARIANT_HELP = (
    'v{n}: variant {n} of the .meta file\'s "variants" (counting from 0) is the first '
    "whose match conditions hold on this host, so its settings are used"
)
HEADER_HELP = {
    1: "available, hidden (no variant matches this host), broken (the .meta has an error) "
    "or shadowed (an earlier tools directory has a tool of that name); vN: the variant used",
    2: "context retention tier: how long an agent keeps the tool's documentation loaded "
    "(hot: always · warm: a while after use · cold: only when used)",
    3: "read-only: may run in parallel · elevated: leaves the sandbox · sudo: runs as root · "
    "demo: a bundled example (Demo tools, read-only)",
}


def demo_tools_root() -> str:
    """Where the bundled examples live: tools under it are the "Demo tools"."""
    return os.fspath(paths.resources_dir() / "examples") + os.sep


_STATUS = {
    Status.AVAILABLE: RowStatus.AVAILABLE,
    Status.HIDDEN: RowStatus.HIDDEN,
    Status.BROKEN: RowStatus.BROKEN,
}


class ToolRow:
    """One line of the list: a tool, or a shadowed definition of it (``rank`` > 0).

    Immutable; ``key``, ``status`` and the filter's ``haystack`` are computed
    once, because the filter and the counts read them for every row.
    """

    __slots__ = ("haystack", "key", "rank", "source_file", "status", "tool")

    def __init__(self, tool: Tool, source: Path | str, rank: int = 0) -> None:
        self.tool = tool
        self.source_file = os.fspath(source)  # a string: ten thousand Paths cost ~40 ms
        self.rank = rank
        self.key: RowKey = (tool.name, rank)
        self.status = RowStatus.SHADOWED if rank else _STATUS[tool.status]
        self.haystack = f"{tool.name}\n{tool.description}".lower()

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def source(self) -> Path:
        """The ``.meta`` file of this row (the tool's own, or a shadowed one)."""
        return Path(self.source_file)

    @property
    def shadowed(self) -> bool:
        return self.rank > 0

    @property
    def badges(self) -> tuple[str, ...]:
        if self.rank or self.tool.status is Status.BROKEN:
            return ()
        tool = self.tool
        flags = (
            ("read-only", tool.read_only),
            ("elevated", tool.elevated),
            ("sudo", tool.sudo),
            ("demo", self.is_demo),
        )
        return tuple(name for name, on in flags if on)

    @property
    def is_demo(self) -> bool:
        """One of the bundled examples ``--demo`` adds ("Demo tools")."""
        return self.source_file.startswith(demo_tools_root())

    @property
    def status_text(self) -> str:
        if self.rank:
            return "shadowed"
        if self.tool.status is Status.AVAILABLE and self.tool.variant is not None:
            return f"available · v{self.tool.variant}"
        return self.tool.status.value

    @property
    def summary(self) -> str:
        """The description column: description, or why the row is not usable."""
        if self.rank:
            return f"shadowed by {self.tool.source_file}"
        if self.tool.status is Status.BROKEN:
            first = self.tool.errors[0] if self.tool.errors else None
            return f"broken: {first.message}" if first is not None else "broken"
        return self.tool.description

    def same_as(self, other: ToolRow) -> bool:
        return self.tool is other.tool and self.source_file == other.source_file


def rows_of(registry: Registry, previous: Mapping[RowKey, ToolRow] | None = None) -> list[ToolRow]:
    """Every row for ``registry``: each tool, then its shadowed definitions.

    Rows of ``previous`` whose tool is unchanged are reused (a refresh of a
    few files allocates a few rows, not 10,000).
    """
    old = previous or {}
    rows: list[ToolRow] = []
    for name in sorted(registry.tools):
        tool = registry.tools[name]
        sources = (tool.source_file, *tool.shadowed_files)
        for rank, source in enumerate(sources):
            row = old.get((name, rank))
            if row is None or row.tool is not tool or row.source_file != source:
                row = ToolRow(tool, source, rank)
            rows.append(row)
    return rows


def _sort_key(column: int) -> Callable[[ToolRow], Any]:
    if column == Column.STATUS:
        return lambda r: (_STATUS_ORDER[r.status], r.tool.variant or 0, r.name, r.rank)
    if column == Column.TIER:
        return lambda r: (_TIER_ORDER.get(r.tool.tier.value, 9) if not r.rank else 9, r.key)
    if column == Column.FLAGS:
        return lambda r: (tuple(sorted(r.badges, reverse=True)), r.key)
    if column == Column.DESCRIPTION:
        return lambda r: (r.summary.lower(), r.key)
    return attrgetter("key")


@cache
def badge_pixmap(badges: tuple[str, ...], height: int = 18) -> QPixmap:
    """Coloured pills ("read-only", "elevated", "sudo") for the Flags column, cached."""
    font = QFont()
    font.setPixelSize(height - 7)
    font.setBold(True)
    metrics = QFontMetrics(font)
    widths = [metrics.horizontalAdvance(b) + 12 for b in badges]
    ratio = 2.0  # drawn at twice the size: crisp on HiDPI screens too
    pixmap = QPixmap(int((sum(widths) + 4 * len(badges)) * ratio), int(height * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setFont(font)
    x = 0.0
    for badge, width in zip(badges, widths, strict=True):
        pill = QRectF(x, 1, width, height - 2)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(BADGE_COLORS.get(badge, "#555555")))
        painter.drawRoundedRect(pill, pill.height() / 2, pill.height() / 2)
        painter.setPen(QColor("white"))
        painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, badge)
        x += width + 4
    painter.end()
    return pixmap


class ToolTableModel(QAbstractTableModel):
    """The rows of a :class:`Registry`; :meth:`set_registry` applies a new snapshot."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[ToolRow] = []
        self._index: dict[RowKey, int] = {}
        #: Lower-cased "name\ndescription" per row, read by the filter proxy.
        self.haystacks: list[str] = []
        #: Bumped by every change of the rows (the proxy's filter cache checks it).
        self.generation = 0
        self._counts = dict.fromkeys(RowStatus, 0)
        self._sort_column = int(Column.NAME)
        self._sort_order = Qt.SortOrder.AscendingOrder
        self._italic = QFont()
        self._italic.setItalic(True)

    # --- Qt model API ------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(_HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return _HEADERS[section]
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_HELP.get(section)
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role not in _ROLES or not index.isValid():
            return self._rows[index.row()] if role == TOOL_ROLE and index.isValid() else None
        row = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, column)
        if role == Qt.ItemDataRole.DecorationRole:
            if column == Column.NAME:
                return icon(f"status-{row.status.value}")
            return badge_pixmap(row.badges) if column == Column.FLAGS and row.badges else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row, column)
        if role == Qt.ItemDataRole.ForegroundRole:
            return _DIM.get(row.status) if column == Column.DESCRIPTION else None
        if role == Qt.ItemDataRole.FontRole:
            return self._italic if row.shadowed else None
        return None

    @staticmethod
    def _display(row: ToolRow, column: int) -> str:
        if column == Column.NAME:
            return row.name
        if column == Column.STATUS:
            return row.status_text
        if column == Column.TIER:
            return "" if row.shadowed or row.status is RowStatus.BROKEN else row.tool.tier.value
        return "" if column == Column.FLAGS else row.summary  # flags: badge_pixmap

    @staticmethod
    def _tooltip(row: ToolRow, column: int) -> str:
        if column == Column.STATUS and row.tool.problem and not row.shadowed:
            return row.tool.problem
        if column == Column.STATUS and row.tool.variant is not None and not row.shadowed:
            return VARIANT_HELP.format(n=row.tool.variant)
        if column == Column.TIER and not row.shadowed:
            return TIER_HELP.get(row.tool.tier.value, row.tool.tier.value)
        if column == Column.FLAGS:
            return ", ".join(row.badges) or "no flags"
        if row.is_demo:
            return f"{row.source_file}\nDemo tools: a bundled example, read-only"
        return row.source_file

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Reorder the rows in Python; persistent indexes (selection) follow their rows."""
        self._sort_column, self._sort_order = column, order
        self.layoutAboutToBeChanged.emit()
        persistent = self.persistentIndexList()
        keys = [self._rows[p.row()].key for p in persistent]
        self._set_rows(self._sorted(self._rows))
        moved = [
            self.index(self._index[k], p.column()) for k, p in zip(keys, persistent, strict=True)
        ]
        self.changePersistentIndexList(persistent, moved)
        self.layoutChanged.emit()

    # --- our API -------------------------------------------------------------------

    def row(self, row: int) -> ToolRow:
        return self._rows[row]

    def rows(self) -> Sequence[ToolRow]:
        return self._rows

    def find(self, key: RowKey) -> int | None:
        return self._index.get(key)

    def counts(self) -> dict[RowStatus, int]:
        return dict(self._counts)

    def set_registry(self, registry: Registry) -> bool:
        """Show ``registry``; returns True when the model was reset (selection lost)."""
        return self.set_rows(rows_of(registry, {r.key: r for r in self._rows}))

    def set_rows(self, rows: list[ToolRow]) -> bool:
        """Show ``rows`` with the fewest signals (see :func:`plan_row_update`)."""
        new = self._sorted(rows)
        plan = plan_row_update([r.key for r in self._rows], [r.key for r in new])
        if plan.reset:
            self.beginResetModel()
            self._set_rows(new)
            self.endResetModel()
            return True
        for first, last in reversed(plan.removed):
            self.beginRemoveRows(QModelIndex(), first, last)
            del self._rows[first : last + 1], self.haystacks[first : last + 1]
            self.generation += 1
            self.endRemoveRows()
        for first, last in plan.added:
            self.beginInsertRows(QModelIndex(), first, last)
            self._rows[first:first] = new[first : last + 1]
            self.haystacks[first:first] = [r.haystack for r in new[first : last + 1]]
            self.generation += 1
            self.endInsertRows()
        changed = [i for i, (a, b) in enumerate(zip(self._rows, new, strict=True)) if a is not b]
        if changed or plan.removed or plan.added:
            self._set_rows(new)
        for first, last in ranges(changed):
            self.dataChanged.emit(self.index(first, 0), self.index(last, len(_HEADERS) - 1))
        return False

    # --- internals -------------------------------------------------------------------

    def _sorted(self, rows: list[ToolRow]) -> list[ToolRow]:
        descending = self._sort_order is Qt.SortOrder.DescendingOrder
        return sorted(rows, key=_sort_key(self._sort_column), reverse=descending)

    def _set_rows(self, rows: list[ToolRow]) -> None:
        self._rows = rows
        self._index = {r.key: i for i, r in enumerate(rows)}
        self.haystacks = [r.haystack for r in rows]
        self.generation += 1
        self._counts = dict.fromkeys(RowStatus, 0)
        for row in rows:
            self._counts[row.status] += 1


class ToolFilterProxy(QSortFilterProxyModel):
    """Instant, case-insensitive filter on name + description (every word must match).

    Sorting is delegated to :class:`ToolTableModel` (see the module docstring).
    """

    def __init__(self, source: ToolTableModel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._source = source
        self._words: tuple[str, ...] = ()
        self._accept: list[bool] = []
        self._generation = -1
        self.setSourceModel(source)

    @property
    def filter_text(self) -> str:
        return " ".join(self._words)

    def set_filter_text(self, text: str) -> None:
        words = tuple(text.lower().split())
        if words == self._words:
            return
        # One pass in Python; filterAcceptsRow then only indexes a list.
        hay = self._source.haystacks
        if len(words) == 1:
            word = words[0]
            accept = [word in h for h in hay]
        else:
            accept = [all(w in h for w in words) for h in hay] if words else [True] * len(hay)
        previous = self._accept if self._generation == self._source.generation else []
        self._accept, self._words = accept, words
        self._generation = self._source.generation
        if accept == previous:
            return  # typing on inside a word that already matches: nothing to do
        changed = sum(a != b for a, b in zip(accept, previous, strict=False))
        if len(previous) != len(accept) or changed > _RELAYOUT_THRESHOLD:
            # Thousands of scattered rows: one layout change beats as many
            # remove/insert notifications, each of which the view handles in O(rows).
            self.invalidate()
        else:
            self.beginFilterChange()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:
        if not self._words:
            return True
        if self._generation != self._source.generation:  # the source changed: start over
            self._generation = self._source.generation
            self._accept = [all(w in h for w in self._words) for h in self._source.haystacks]
        return self._accept[source_row]

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self._source.sort(column, order)
