"""What a newcomer sees first in the Tool Browser: an available tool selected, the terms
explained, plurals right, the bundled examples marked "Demo tools", Close and Esc."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from ollie_tray.browser.model import Column, RowStatus
from ollie_tray.main import demo_tool_dirs
from registry_core.registry import RegistryLoader

MakeWindow = Callable[..., BrowserWindow]


def one_tool_dir(tmp_path: Path, **meta: Any) -> Path:
    tools = tmp_path / "mine"
    tools.mkdir()
    (tools / "solo.meta").write_text(json.dumps({"description": "d", **meta}))
    (tools / "solo").write_text("#!/bin/sh\n")
    (tools / "solo").chmod(0o755)
    return tools


def tip(window: BrowserWindow, name: str, column: int) -> str:
    for row in range(window.proxy.rowCount()):
        index = window.proxy.index(row, 0)
        if index.data() == name:
            return str(window.proxy.index(row, column).data(Qt.ItemDataRole.ToolTipRole))
    raise AssertionError(name)


def test_first_start_selects_an_available_tool_not_a_broken_one(make_window: MakeWindow) -> None:
    window = make_window()
    first = window.model.row(window.proxy.mapToSource(window.proxy.index(0, 0)).row())
    assert first.status is RowStatus.BROKEN  # sorted by name, a broken example comes first
    row = window.selected_row()
    assert row is not None and row.status is RowStatus.AVAILABLE


def test_plurals(make_window: MakeWindow, tmp_path: Path, host_env: dict[str, str]) -> None:
    loader = RegistryLoader([one_tool_dir(tmp_path)], env=host_env)
    window = make_window(loader=loader, live=True)
    assert window.count_label.text() == "1 tool: 1 available"
    assert window.live_label.text().startswith("Live: watching 1 directory")


def test_tier_and_variant_are_explained_in_tooltips(make_window: MakeWindow) -> None:
    window = make_window()
    assert tip(window, "greet", Column.TIER).startswith("tier cold: the agent loads")
    status = tip(window, "system_logs", Column.STATUS)
    assert status.startswith('v0: variant 0 of the .meta file\'s "variants"')
    header = window.proxy.headerData(
        Column.TIER, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole
    )
    assert "context retention tier" in header


def test_the_bundled_examples_are_marked_demo_tools(
    make_window: MakeWindow, tmp_path: Path, host_env: dict[str, str]
) -> None:
    loader = RegistryLoader([one_tool_dir(tmp_path), *demo_tool_dirs()], env=host_env)
    window = make_window(loader=loader)
    rows = {r.key: r for r in window.model.rows()}
    assert "demo" in rows[("greet", 0)].badges
    assert "demo" not in rows[("solo", 0)].badges
    assert "Demo tools" in tip(window, "greet", Column.NAME)
    assert "demo tools: bundled examples, read-only" in window.count_label.text()


def test_escape_and_close_close_the_browser(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window()
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=2000)
    window.show()
    window.filter_edit.setText("gre")
    qtbot.keyClick(window.filter_edit, Qt.Key.Key_Escape)  # first Esc clears the filter
    assert window.filter_edit.text() == "" and window.isVisible()
    qtbot.mouseClick(window.close_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=2000)
