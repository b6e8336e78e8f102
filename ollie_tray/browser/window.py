"""The Tool Browser window: every tool on the left, everything about one on the right.

Wiring: a :class:`~registry_core.registry.RegistryLoader` feeds a
:class:`ToolTableModel` through a :class:`ToolFilterProxy` into a
``QTableView``; selection changes show the row in the :class:`DetailsPanel`.
With ``live=True`` a :class:`LiveRegistry` refreshes the loader when a tools
directory changes (only while the window is open; reopening catches up with a
full reload).  "What if…" swaps in a second, simulated loader; the real one
keeps being refreshed underneath.  Every change of the registry shown emits
:attr:`BrowserWindow.registry_changed`, after the selection was restored.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QEvent, QItemSelectionModel, QModelIndex, QObject, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeyEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QSizePolicy,
    QSplitter,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.browser.arg_editors import box
from ollie_tray.browser.details import DetailsPanel
from ollie_tray.browser.hosts import RemoteHostView, remote_file_tool
from ollie_tray.browser.live import LiveRegistry
from ollie_tray.browser.model import (
    Column,
    RowKey,
    RowStatus,
    ToolFilterProxy,
    ToolRow,
    ToolTableModel,
)
from ollie_tray.browser.run_form import RunForm
from ollie_tray.browser.whatif import (
    BANNER_STYLE,
    WhatIf,
    WhatIfPanel,
    evaluate_meta_file,
    simulated_loader,
)
from ollie_tray.icons import app_icon
from ollie_tray.windows.common import closable, count_text
from registry_core.broker.remember.policies import PolicyStore
from registry_core.dispatch import Dispatcher
from registry_core.errors import ToolChangedError
from registry_core.registry import Registry, RegistryLoader, Tool

_WIDTHS = {Column.NAME: 168, Column.STATUS: 108, Column.TIER: 50, Column.FLAGS: 128}


class BrowserWindow(QMainWindow):
    """The Tool Browser (see the module docstring)."""

    #: the Registry now shown (real or simulated), after every change
    registry_changed = Signal(object)

    def __init__(
        self,
        loader: RegistryLoader,
        *,
        dispatcher: Dispatcher | None = None,
        policies: PolicyStore | None = None,
        live: bool = True,
        env: Mapping[str, str] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.loader = loader
        self.dispatcher = dispatcher
        self.what_if: WhatIf | None = None
        # The remote host shown instead of this computer (hosts.py), or None.
        self.remote_host: str | None = None
        self._sim_loader: RegistryLoader | None = None
        self._selected: RowKey | None = None
        self._forms: list[RunForm] = []
        self._live_wanted = live
        self.live: LiveRegistry | None = None
        self.setWindowTitle("Ollie Tool Browser")
        self.setWindowIcon(app_icon())
        self.resize(1200, 760)
        if not loader.current.tools:
            loader.load()

        self.model = ToolTableModel(self)
        self.proxy = ToolFilterProxy(self.model, self)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name or description…  (Ctrl+F)")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.setAccessibleName("Filter tools")
        self.filter_edit.textChanged.connect(self._filter_changed)
        self.filter_edit.installEventFilter(self)
        # A table, not a tree: QTreeView lays out every row (two Python calls per
        # row) before its first paint; QTableView with fixed rows asks for none.
        self.view = QTableView()
        self.view.setAccessibleName("Tools")
        self.view.setModel(self.proxy)
        self.view.setShowGrid(False)
        self.view.setWordWrap(False)
        self.view.setAlternatingRowColors(True)
        self.view.setTabKeyNavigation(False)
        self.view.installEventFilter(self)
        self.view.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        rows = self.view.verticalHeader()
        rows.hide()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows.setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.view.horizontalHeader()
        header.setHighlightSections(False)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        header.setStretchLastSection(True)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column, width in _WIDTHS.items():
            header.resizeSection(column, width)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(Column.NAME, Qt.SortOrder.AscendingOrder)
        selection = self.view.selectionModel()
        selection.currentRowChanged.connect(self._current_changed)
        self.count_label = QLabel()
        self.count_label.setStyleSheet("color: #6b7280;")
        left = QWidget()
        box(QVBoxLayout(left), self.filter_edit, self.view, self.count_label, margins=6)

        self.details = DetailsPanel(policies)
        self.details.evaluate_file = self._evaluate_file
        self.details.run_requested.connect(lambda _name: self.open_run_form())
        self.details.policy.changed.connect(self._policies_changed)
        self.splitter = QSplitter()
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.details)
        self.splitter.setStretchFactor(0, 5)
        self.splitter.setStretchFactor(1, 6)
        self.splitter.setSizes([600, 600])
        self.splitter.setChildrenCollapsible(False)
        self.banner = QLabel()
        self.banner.setStyleSheet(BANNER_STYLE + " font-weight: bold;")
        self.banner.setWordWrap(True)
        self.banner.setAccessibleName("Simulation banner")
        self.banner.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.banner.hide()
        central = QWidget()
        box(QVBoxLayout(central), self.banner, self.splitter, margins=4)
        self.setCentralWidget(central)

        self.whatif_panel = WhatIfPanel(loader.facts)
        self.whatif_panel.changed.connect(self.simulate)
        self.whatif_dock = QDockWidget("What if…", self)
        self.whatif_dock.setObjectName("whatif")
        self.whatif_dock.setWidget(self.whatif_panel)
        self.whatif_dock.hide()
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.whatif_dock)
        self._build_actions()
        self.hosts = RemoteHostView(
            self, dict(os.environ) if env is None else env, socket.gethostname()
        )
        self.live_label = QLabel()
        self.statusBar().addPermanentWidget(self.live_label)
        self.close_button = closable(self)  # and Esc (after the filter's own use of it)
        self.statusBar().addPermanentWidget(self.close_button)
        if live:
            self._start_live()
        self._show_registry(loader.current)
        first = self.first_available_row()
        if first is not None:
            self.view.setCurrentIndex(first)

    # --- public API -----------------------------------------------------------------

    def first_available_row(self) -> QModelIndex | None:
        """The first row shown that is an available tool (else the first row): where a
        first look should land, not on a broken or hidden example."""
        count = self.proxy.rowCount()
        for row in range(count):
            index = self.proxy.index(row, 0)
            item = self.model.row(self.proxy.mapToSource(index).row())
            if item is not None and item.status is RowStatus.AVAILABLE:
                return index
        return self.proxy.index(0, 0) if count else None

    def select_tool(self, name: str) -> bool:
        """Select the tool ``name`` (clearing a filter that hides it); False if unknown."""
        row = self.model.find((name, 0))
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            self.filter_edit.clear()
            index = self.proxy.mapFromSource(self.model.index(row, 0))
        self._select_index(index)
        return True

    def selected_tool(self) -> str | None:
        row = self.selected_row()
        return row.name if row is not None else None

    def selected_row(self) -> ToolRow | None:
        index = self.view.currentIndex()
        if not index.isValid() or not self.view.selectionModel().isSelected(index):
            return None
        return self.model.row(self.proxy.mapToSource(index).row())

    def refresh(self) -> Registry:
        """Full rescan of every tools directory (F5); a remote host is fetched again."""
        if self.remote_host is not None:
            self.hosts.show_host(self.remote_host)
            return self.hosts.registry or Registry()
        registry = self.loader.load()
        if self._sim_loader is not None:
            registry = self._sim_loader.load()
        self._show_registry(registry)
        return registry

    def simulate(self, what_if: WhatIf | None) -> None:
        """Show the registry as another host would see it (``None``: this host again)."""
        self.what_if = what_if
        if what_if is None:
            self._sim_loader = None
            self.banner.hide()
            self._show_registry(self.loader.current)
            return
        self._sim_loader = simulated_loader(self.loader, what_if)
        self.banner.setText(
            f"SIMULATED host — {what_if.describe()}. The list shows what such a host would"
            " get, not this machine. Clear “What if…” to return."
        )
        self.banner.show()
        self._show_registry(self._sim_loader.load())

    def open_run_form(self) -> RunForm | None:
        """Open "Run…" for the selected tool (real registry, real dispatcher)."""
        name = self.selected_tool()
        if name is None or self.dispatcher is None or self.what_if is not None or self.remote_host:
            return None
        tool = self.loader.current.tools.get(name)
        if tool is None or not tool.available:
            return None
        try:
            form = RunForm(tool, self.dispatcher, parent=self)
        except ToolChangedError as exc:  # changed on disk since the last scan
            self.statusBar().showMessage(f"{exc}; the list was reloaded.", 6000)
            self.refresh()
            return None
        form.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        form.destroyed.connect(lambda *_: self._forms.remove(form) if form in self._forms else None)
        self._forms.append(form)
        form.show()
        return form

    # --- internals ------------------------------------------------------------------

    def _build_actions(self) -> None:
        toolbar = QToolBar("Tool Browser")
        toolbar.setObjectName("toolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.addToolBar(toolbar)
        self.reload_action = QAction("&Reload", self, shortcut=QKeySequence("F5"))
        self.reload_action.setToolTip("Rescan every tools directory (F5)")
        self.reload_action.triggered.connect(self.refresh)
        self.run_action = QAction("R&un…", self, shortcut=QKeySequence("Ctrl+R"))
        self.run_action.triggered.connect(self.open_run_form)
        self.whatif_action = self.whatif_dock.toggleViewAction()
        self.whatif_action.setText("&What if…")
        self.whatif_action.setToolTip("Evaluate the tools for another host (simulation)")
        find = QAction("Find", self, shortcut=QKeySequence(QKeySequence.StandardKey.Find))
        find.triggered.connect(self._focus_filter)
        for action in (self.reload_action, self.run_action, self.whatif_action):
            toolbar.addAction(action)
        self.addAction(find)

    def _start_live(self) -> None:
        self.live = LiveRegistry(self.loader, parent=self)
        self.live.refreshed.connect(self._live_refreshed)
        if self.live.error:
            self.live_label.setText(self.live.error)
        else:
            waiting = len(self.live.waiting_for)
            note = f", {waiting} not created yet" if waiting else ""
            watching = count_text(len(self.loader.dirs), "directory", "directories")
            self.live_label.setText(f"Live: watching {watching}{note}")

    def _live_refreshed(self, registry: Registry, changed: frozenset[Path]) -> None:
        if self.remote_host is not None:
            return  # the local loader stays current; a remote view is not replaced
        if self._sim_loader is not None:
            registry = self._sim_loader.refresh(changed)
        self._show_registry(registry)

    def _show_registry(self, registry: Registry) -> None:
        keep = self._selected
        reset = self.model.set_registry(registry)
        if keep is not None:
            row = self.model.find(keep)
            if row is None:
                row = self.model.find((keep[0], 0))
            current = self.selected_row()
            if row is not None and (reset or current is None or current.key != keep):
                self._select_index(self.proxy.mapFromSource(self.model.index(row, 0)))
        selected = self.selected_row()
        if selected is None or self.details.row is None or not selected.same_as(self.details.row):
            self._show_details(selected)
        self._update_counts()
        self.registry_changed.emit(registry)

    def _select_index(self, index: QModelIndex) -> None:
        if not index.isValid():
            return
        flags = (
            QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows
        )
        self.view.selectionModel().setCurrentIndex(index, flags)
        self.view.scrollTo(index)

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        row = self.model.row(self.proxy.mapToSource(current).row()) if current.isValid() else None
        if row is not None:
            self._selected = row.key
        self._show_details(row)

    def _show_details(self, row: ToolRow | None) -> None:
        can_run = self.dispatcher is not None and self.what_if is None and not self.remote_host
        self.details.show_row(row, can_run=can_run, simulated=self.what_if is not None)
        self.run_action.setEnabled(self.details.run_button.isEnabled() and row is not None)
        if row is None and self.model.rowCount() == 0:
            dirs = ", ".join(str(d) for d in self.loader.dirs) or "(none)"
            self.details.placeholder.setText(
                f"No tools found in {dirs}.\n\nA tool is an executable with a NAME.meta"
                " sidecar: drop both into a tools directory and it appears here at once."
            )

    def _evaluate_file(self, path: Path) -> Tool:
        if self.remote_host is not None:
            return remote_file_tool(path, self.remote_host)
        loader = self._sim_loader or self.loader
        return evaluate_meta_file(path, loader.facts)

    def _focus_filter(self) -> None:
        self.filter_edit.setFocus()
        self.filter_edit.selectAll()

    def _policies_changed(self, _count: int) -> None:
        self.statusBar().showMessage("Policy updated.", 4000)

    def _filter_changed(self, text: str) -> None:
        self.proxy.set_filter_text(text)
        if not self.view.currentIndex().isValid():
            if self.proxy.rowCount():
                self._select_index(self.proxy.index(0, 0))
            else:
                self._show_details(None)
                self.details.placeholder.setText(f"No tool matches “{text.strip()}”.")
        self._update_counts()

    def _update_counts(self) -> None:
        counts = self.model.counts()
        tools = self.model.rowCount() - counts[RowStatus.SHADOWED]
        parts = [f"{counts[s]} {s.value}" for s in RowStatus if counts[s]]
        text = f"{count_text(tools, 'tool')}: " + ", ".join(parts) if parts else "No tools"
        demo = sum(1 for r in range(self.model.rowCount()) if self.model.row(r).is_demo)
        if demo:
            text += f" ({count_text(demo, 'demo tool')}: bundled examples, read-only)"
        if self.proxy.filter_text:
            text += f" — showing {self.proxy.rowCount()}"
        if self.what_if is not None:
            text += " (SIMULATED)"
        if self.remote_host is not None:
            text += f" (on {self.remote_host})"
        self.count_label.setText(text)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Down/Enter in the filter go to the list; Escape clears it; Home/End: first/last row."""
        if not isinstance(event, QKeyEvent) or event.type() != QEvent.Type.KeyPress:
            return super().eventFilter(watched, event)
        key = event.key()
        if watched is self.view and key in (Qt.Key.Key_Home, Qt.Key.Key_End):
            last = key == Qt.Key.Key_End
            self._select_index(self.proxy.index(self.proxy.rowCount() - 1 if last else 0, 0))
            return True
        if watched is self.filter_edit:
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.view.setFocus()
                if not self.view.currentIndex().isValid():
                    self._select_index(self.proxy.index(0, 0))
                return True
            if key == Qt.Key.Key_Escape and self.filter_edit.text():
                self.filter_edit.clear()
                return True
        return super().eventFilter(watched, event)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._live_wanted and self.live is None:
            self._start_live()  # closed earlier: watch again and catch up
            self.refresh()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.live is not None:
            self.live.close()
            self.live.deleteLater()
            self.live = None
        super().closeEvent(event)
