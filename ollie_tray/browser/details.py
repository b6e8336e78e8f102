"""The right-hand panel of the Tool Browser: everything about the selected tool.

Tabs: Overview (source, status, executable and how it was resolved, shadowed
definitions, every variant with every condition and its result), Arguments
(schema table + raw JSON), Prompt (rendered Markdown), Policy (remembered
elevation decisions: revoke / change) and Problems (errors and warnings with
line:column).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QColor, QDesktopServices, QFont, QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.browser.arg_editors import arg_specs, box
from ollie_tray.browser.model import BADGE_COLORS, RowStatus, ToolRow
from ollie_tray.icons import icon
from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.errors import PolicyError, ToolChangedError
from registry_core.registry import ConditionResult, Resolution, Tool

RESOLUTION_LABELS = {
    Resolution.TOOLS_DIR: "tools directory",
    Resolution.CMD: "cmd field",
    Resolution.PATH: "$PATH lookup",
}
_PROBLEM_ICONS = {
    "error": QStyle.StandardPixmap.SP_MessageBoxCritical,
    "warning": QStyle.StandardPixmap.SP_MessageBoxWarning,
}
# The status icons' colours, in RowStatus order: available, hidden, broken, shadowed.
STATUS_COLORS = dict(zip(RowStatus, ("#1e9e4a", "#6b7280", "#d93025", "#7a5bd6"), strict=True))


def condition_text(cond: ConditionResult) -> str:
    """``binary journalctl → found at /usr/bin/journalctl``."""
    return f"{cond.key} {cond.value} → {cond.detail}"


def _label(mono: bool = False) -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if mono:
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return label


def _button(text: str, slot: Callable[[], object], tip: str = "") -> QPushButton:
    button = QPushButton(text)
    button.clicked.connect(slot)
    button.setToolTip(tip)
    return button


def _tree(headers: list[str]) -> QTreeWidget:
    tree = QTreeWidget()
    tree.setHeaderLabels(headers)
    tree.setRootIsDecorated(False)
    tree.setAlternatingRowColors(True)
    tree.setUniformRowHeights(True)
    return tree


class PolicySection(QWidget):
    """Remembered elevation decisions of one tool, with revoke and change-duration."""

    changed = Signal(int)  # how many policies the tool has now

    def __init__(self, store: PolicyStore | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.tool = ""
        self.tree = _tree(["Kind", "Host", "Decision", "Remembered", "Expires", "Executable"])
        self.tree.itemSelectionChanged.connect(self._selection_changed)
        self.note = _label()
        self.duration = QComboBox()
        for choice in (c for c in Remember if c is not Remember.ONCE):
            self.duration.addItem(choice.label, choice)
        self.duration.setAccessibleName("New duration")
        self.change_button = _button("C&hange", self.change_selected)
        self.revoke_button = _button("&Revoke", self.revoke_selected)
        buttons = box(QHBoxLayout(), QLabel("Remember:"), self.duration, self.change_button)
        box(buttons, None, self.revoke_button)
        box(QVBoxLayout(self), self.note, self.tree, buttons)
        self._policies: list[Policy] = []

    def show_tool(self, name: str) -> int:
        self.tool = name
        self.tree.clear()
        if self.store is None:
            self._policies = []
            self.note.setText("No policy store: remembered decisions live in the broker.")
        else:
            self._policies = [p for p in self.store.list() if p.tool == name]
            self.note.setText(
                f"Remembered decisions for <b>{name}</b> ({self.store.path})."
                if self._policies
                else f"No remembered decision for <b>{name}</b>: every elevation asks."
            )
        for policy in self._policies:
            until = policy.expires
            expires = (
                dt.datetime.fromtimestamp(until).strftime("%Y-%m-%d %H:%M") if until else "never"
            )
            cells = [policy.kind.value, policy.host, policy.decision.value, policy.remember.label]
            item = QTreeWidgetItem([*cells, expires, policy.executable or "any"])
            item.setToolTip(0, policy.describe())
            self.tree.addTopLevelItem(item)
        first = self.tree.topLevelItem(0)
        if first is not None:
            self.tree.setCurrentItem(first)
        self._selection_changed()
        return len(self._policies)

    def _selected(self) -> Policy | None:
        item = self.tree.currentItem()
        if item is None or not item.isSelected():
            return None
        return self._policies[self.tree.indexOfTopLevelItem(item)]

    def _selection_changed(self) -> None:
        on = self._selected() is not None and self.store is not None
        for widget in (self.revoke_button, self.change_button, self.duration):
            widget.setEnabled(on)

    def revoke_selected(self) -> None:
        self._act(lambda store, p: store.revoke(p.tool, p.kind, p.host))

    def change_selected(self) -> None:
        choice = Remember(self.duration.currentData())
        self._act(lambda store, p: store.change_duration(p.tool, p.kind, p.host, choice))

    def _act(self, action: Callable[[PolicyStore, Policy], object]) -> None:
        policy = self._selected()
        if policy is None or self.store is None:
            return
        try:
            action(self.store, policy)
        except PolicyError as exc:
            self.note.setText(f"<span style='color:#b3261e'>{exc}</span>")
            return
        self.changed.emit(self.show_tool(self.tool))


class DetailsPanel(QWidget):
    """Shows one :class:`ToolRow`; emits :attr:`run_requested` with the tool name."""

    run_requested = Signal(str)

    def __init__(self, policies: PolicyStore | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row: ToolRow | None = None
        self.tool: Tool | None = None  # what the tabs show (a shadowed row: its own file)
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl
        #: For shadowed rows: evaluate that file on this host (set by the window).
        self.evaluate_file: Callable[[Path], Tool] | None = None
        self._conditions: list[str] = []
        # --- header
        self.icon_label = QLabel()
        self.title = QLabel()
        self.title.setStyleSheet("font-size: 15pt; font-weight: bold;")
        self.status_chip = QLabel()
        run = lambda: self.run_requested.emit(self.row.name if self.row else "")  # noqa: E731
        self.run_button = _button("&Run…", run, "Run this tool with arguments (Ctrl+R)")
        header = box(QHBoxLayout(), self.icon_label, self.title, self.status_chip, None)
        header.addWidget(self.run_button)
        self.description = _label()
        self.notice = _label()
        # --- overview
        self.source_label = _label(mono=True)
        self.open_button = _button("Open in &editor", lambda: self._open(False))
        self.reveal_button = _button("Reveal in file &manager", lambda: self._open(True))
        source_buttons = box(QHBoxLayout(), self.open_button, self.reveal_button, None)
        source_box = box(QVBoxLayout(), self.source_label, source_buttons, margins=0)
        self.status_label, self.resolution_label, self.traits_label, self.shadowed_label = (
            _label() for _ in range(4)
        )
        self.executable_label = _label(mono=True)
        form = QFormLayout()
        form.addRow("<b>Source</b>", source_box)
        form.addRow("<b>Status</b>", self.status_label)
        form.addRow("<b>Executable</b>", self.executable_label)
        form.addRow("<b>Resolved by</b>", self.resolution_label)
        form.addRow("<b>Tier, flags</b>", self.traits_label)
        form.addRow("<b>Shadows</b>", self.shadowed_label)
        self.variants = QTreeWidget()
        self.variants.setHeaderLabels(["Condition", "Value", "Result"])
        self.variants.setUniformRowHeights(True)
        self.variants.setAccessibleName("Variants and match conditions")
        self.variants.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        overview = QWidget()
        variants_title = QLabel("<b>Variants</b> (the first whose conditions all pass wins)")
        box(QVBoxLayout(overview), form, variants_title, self.variants)
        # --- arguments, prompt, policy, problems
        self.args_table = QTableWidget(0, 4)
        self.args_table.setHorizontalHeaderLabels(["Name", "Type", "Required", "Description"])
        self.args_table.horizontalHeader().setStretchLastSection(True)
        self.args_table.verticalHeader().hide()
        self.args_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.args_json = QPlainTextEdit()
        self.args_json.setReadOnly(True)
        self.args_json.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        args_split = QSplitter(Qt.Orientation.Vertical)
        args_split.addWidget(self.args_table)
        args_split.addWidget(self.args_json)
        self.prompt = QTextBrowser()
        self.prompt.setOpenExternalLinks(True)
        self.policy = PolicySection(policies)
        self.policy.changed.connect(self._policy_changed)
        self.problems = _tree(["", "Line:col", "Message"])
        self.problems.itemDoubleClicked.connect(lambda *_: self._open(False))
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for widget, title in (
            (overview, "Overview"),
            (args_split, "Arguments"),
            (self.prompt, "Prompt"),
            (self.policy, "Policy"),
            (self.problems, "Problems"),
        ):
            self.tabs.addTab(widget, title)
        page = QWidget()
        box(QVBoxLayout(page), header, self.description, self.notice, self.tabs, margins=10)
        self.placeholder = _label()
        self.placeholder.setText(
            "Select a tool on the left to see why it is (or is not) available."
        )
        self.placeholder.setStyleSheet("color: #6b7280; padding: 24px;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(page)
        box(QVBoxLayout(self), self.stack, margins=0)

    # --- public ------------------------------------------------------------------

    def show_row(
        self, row: ToolRow | None, *, can_run: bool = False, simulated: bool = False
    ) -> None:
        self.row = row
        if row is None:
            self.tool = None
            self.stack.setCurrentIndex(0)
            return
        tool = row.tool
        if row.shadowed and self.evaluate_file is not None:
            tool = self.evaluate_file(row.source)
        self.tool = tool
        self.stack.setCurrentIndex(1)
        status = row.status
        self.icon_label.setPixmap(icon(f"status-{status.value}").pixmap(28, 28))
        self.title.setText(row.name)
        chip = "SIMULATED · " + status.value if simulated else status.value
        self.status_chip.setText(chip.upper())
        self.status_chip.setStyleSheet(
            f"background:{'#e0b000' if simulated else STATUS_COLORS[status]}; color:white;"
            " border-radius:9px; padding:2px 9px; font-weight:bold;"
        )
        self.run_button.setEnabled(can_run and not row.shadowed and tool.available)
        self.description.setText(tool.description or "<i>no description</i>")
        self._show_notice(row, tool, simulated)
        self._show_overview(row, tool)
        self._show_variants(tool)
        try:
            prompt, args = tool.prompt, tool.args
        except ToolChangedError as exc:  # the watcher is about to show the new version
            prompt, args = f"*{exc}*", {}
        self._show_args(args)
        self.prompt.setMarkdown(prompt or "*This tool has no prompt.*")
        self._policy_changed(self.policy.show_tool(row.name))
        problems = self._show_problems(tool)
        self.tabs.setTabText(4, f"Problems ({problems})" if problems else "Problems")

    def _policy_changed(self, count: int) -> None:
        self.tabs.setTabText(3, f"Policy ({count})" if count else "Policy")

    def condition_texts(self) -> list[str]:
        """Every condition line of the variants tree, in order (tests, accessibility)."""
        return list(self._conditions)

    # --- sections ----------------------------------------------------------------

    def _show_notice(self, row: ToolRow, tool: Tool, simulated: bool) -> None:
        notes = []
        if row.shadowed:
            notes.append(f"<b>Shadowed</b> (not used): {row.tool.source} comes first on the path.")
        if simulated:
            notes.append("<b>SIMULATED</b>: results are for the host in “What if…”, not this one.")
        if tool.problem and not row.shadowed:
            notes.append(tool.problem)
        self.notice.setText("<br>".join(notes))
        self.notice.setVisible(bool(notes))
        color = "#fff4ce" if simulated else "#f3f4f6"
        self.notice.setStyleSheet(f"background:{color}; border-radius:4px; padding:6px;")

    def _show_overview(self, row: ToolRow, tool: Tool) -> None:
        self.source_label.setText(str(row.source))
        self.status_label.setText(
            {
                RowStatus.AVAILABLE: "available"
                + (f" — variant {tool.variant} selected" if tool.variant is not None else ""),
                RowStatus.HIDDEN: "hidden — no variant matches this host",
                RowStatus.BROKEN: "broken — the .meta cannot be used",
                RowStatus.SHADOWED: f"shadowed by {row.tool.source}",
            }[row.status]
        )
        self.executable_label.setText(str(tool.executable) if tool.executable else "—")
        how = RESOLUTION_LABELS.get(tool.resolution) if tool.resolution else None
        detail = tool.resolution_detail or "—"
        self.resolution_label.setText(f"<b>{how}</b>: {detail}" if how else detail)
        badges = [
            f"<span style='color:{BADGE_COLORS[b]}'><b>{b}</b></span>"
            for b in ToolRow(tool, tool.source_file).badges
        ]
        self.traits_label.setText(" · ".join([f"tier {tool.tier.value}", *badges]))
        shadows = "<br>".join(str(p) for p in row.tool.shadowed) if not row.shadowed else ""
        self.shadowed_label.setText(shadows or "—")

    def _show_variants(self, tool: Tool) -> None:
        self.variants.clear()
        self._conditions = []
        pass_icon, fail_icon = icon("status-available"), icon("status-broken")
        if not tool.variants:
            item = QTreeWidgetItem(["No variants: the top-level definition always applies."])
            self.variants.addTopLevelItem(item)
            item.setFirstColumnSpanned(True)
            return
        for variant in tool.variants:
            selected = variant.index == tool.variant
            state = "selected" if selected else ("matches" if variant.matched else "no match")
            sets = ", ".join(variant.fields) or "nothing"
            top = QTreeWidgetItem([f"Variant {variant.index} — {state} · sets {sets}"])
            top.setIcon(0, pass_icon if variant.matched else fail_icon)
            font = QFont(top.font(0))
            font.setBold(selected)
            top.setFont(0, font)
            if selected:
                top.setBackground(0, QColor("#e6f4ea"))
            self.variants.addTopLevelItem(top)
            top.setFirstColumnSpanned(True)
            for cond in variant.conditions:
                child = QTreeWidgetItem([cond.key, cond.value, cond.detail])
                child.setIcon(0, pass_icon if cond.passed else fail_icon)
                self._conditions.append(condition_text(cond))
                child.setToolTip(2, condition_text(cond))
                top.addChild(child)
        self.variants.expandAll()

    def _show_args(self, args: Mapping[str, Any]) -> None:
        specs = arg_specs(args)
        self.args_table.setRowCount(len(specs))
        for row, spec in enumerate(specs):
            cells = (spec.name, spec.type_text, "yes" if spec.required else "", spec.description)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.args_table.setItem(row, column, item)
        self.args_table.resizeColumnsToContents()
        self.args_json.setPlainText(json.dumps(dict(args), indent=2, ensure_ascii=False))
        self.tabs.setTabText(1, f"Arguments ({len(specs)})")

    def _show_problems(self, tool: Tool) -> int:
        self.problems.clear()
        for severity, entries in (("error", tool.errors), ("warning", tool.warnings)):
            for entry in entries:
                where = f"{entry.line}:{entry.column or 1}" if entry.line is not None else "—"
                item = QTreeWidgetItem([severity, where, entry.message])
                item.setIcon(0, self.style().standardIcon(_PROBLEM_ICONS[severity]))
                item.setToolTip(2, str(entry))
                self.problems.addTopLevelItem(item)
        return self.problems.topLevelItemCount()

    def _open(self, directory: bool) -> None:
        if self.row is None:
            return
        target = self.row.source.parent if directory else self.row.source
        self.open_url(QUrl.fromLocalFile(str(target)))
