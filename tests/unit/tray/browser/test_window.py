"""The Tool Browser window on the demo tools: list, details, filter, keyboard, policies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from ollie_tray.browser.model import Column, RowStatus
from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.wire.messages import Kind
from registry_core.dispatch import Dispatcher
from registry_core.registry import RegistryLoader, scan_cache

MakeWindow = Callable[..., BrowserWindow]


def _statuses(window: BrowserWindow) -> dict[tuple[str, int], RowStatus]:
    return {row.key: row.status for row in window.model.rows()}


def _visible_names(window: BrowserWindow) -> list[str]:
    return [window.proxy.index(r, 0).data() for r in range(window.proxy.rowCount())]


def test_lists_every_tool_with_its_status(make_window: MakeWindow) -> None:
    window = make_window()
    statuses = _statuses(window)
    assert statuses[("gpu_status", 0)] is RowStatus.HIDDEN
    assert statuses[("broken_example", 0)] is RowStatus.BROKEN
    assert statuses[("bad_tier", 0)] is RowStatus.BROKEN
    assert statuses[("greet", 0)] is RowStatus.AVAILABLE
    assert statuses[("greet", 1)] is RowStatus.SHADOWED
    assert statuses[("system_logs", 0)] is RowStatus.AVAILABLE
    assert window.view.model().rowCount() == 12
    assert window.count_label.text() == "11 tools: 8 available, 1 hidden, 2 broken, 1 shadowed"
    # The first available tool is selected on open, not the first (broken) row.
    assert window.selected_tool() == "desktop_notify"
    window.view.grab()  # paints every column, badges included, without errors


def test_loads_the_registry_when_the_loader_has_not(
    make_window: MakeWindow, loader: RegistryLoader
) -> None:
    assert len(loader.current) == 0
    window = make_window()
    assert len(loader.current) == 11
    assert window.model.rowCount() == 12


def test_selecting_a_tool_shows_each_condition_result(
    make_window: MakeWindow, fake_bin: Path, demo_dirs: list[Path]
) -> None:
    window = make_window()
    assert window.select_tool("system_logs")
    assert window.selected_tool() == "system_logs"
    details = window.details
    texts = details.condition_texts()
    assert texts[0] == f"binary journalctl → found at {fake_bin}/journalctl"
    syslog = "exists" if Path("/var/log/syslog").exists() else "missing"
    assert texts[1] == f"file /var/log/syslog → {syslog}"
    first = details.variants.topLevelItem(0)
    assert first is not None
    assert "Variant 0 — selected · sets description, prompt, args, cmd" in first.text(0)
    assert first.font(0).bold()
    assert details.title.text() == "system_logs"
    assert details.status_chip.text() == "AVAILABLE"
    assert details.source_label.text() == str(demo_dirs[0] / "system_logs.meta")
    assert details.executable_label.text() == str(demo_dirs[0] / "system_logs_journald")
    assert "cmd field" in details.resolution_label.text()
    assert "in the tools directory" in details.resolution_label.text()
    assert "Read the systemd journal" in details.prompt.toPlainText()
    assert details.tabs.tabText(1) == "Arguments (4)"
    table = details.args_table
    cells = [[table.item(r, c) for c in range(4)] for r in range(table.rowCount())]
    grid = [[c.text() if c is not None else "" for c in row] for row in cells]
    assert [row[0] for row in grid] == ["unit", "since", "lines", "grep"]
    assert grid[2][1] == "string (matches ^[0-9]+$)"
    assert grid[0][3] == "Systemd unit name"
    tool = window.loader.current.tools["system_logs"]
    assert json.loads(details.args_json.toPlainText()) == tool.args


def test_hidden_tool_explains_every_failed_condition(make_window: MakeWindow) -> None:
    window = make_window()
    window.select_tool("gpu_status")
    details = window.details
    assert details.condition_texts() == [
        "binary nvidia-smi → not found on PATH",
        "os darwin → host os is linux",
        "binary system_profiler → not found on PATH",
    ]
    assert details.status_chip.text() == "HIDDEN"
    assert details.notice.isVisible()
    assert "no variant matches this host" in details.notice.text()
    assert details.executable_label.text() == "—"
    assert not details.run_button.isEnabled()


def test_broken_tool_lists_errors_with_line_and_column(make_window: MakeWindow) -> None:
    window = make_window()
    window.select_tool("broken_example")
    details = window.details
    assert details.tabs.tabText(4) == "Problems (1)"
    item = details.problems.topLevelItem(0)
    assert item is not None
    assert (item.text(0), item.text(1)) == ("error", "5:3")
    assert item.text(2).startswith("invalid JSON")
    assert details.status_chip.text() == "BROKEN"


def test_shadowed_definition_is_shown_on_its_own(
    make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = make_window()
    window.select_tool("greet")
    assert window.details.shadowed_label.text() == str(demo_dirs[2] / "greet.meta")
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_Down)  # the shadowed definition follows
    row = window.selected_row()
    assert row is not None
    assert row.key == ("greet", 1)
    details = window.details
    assert details.status_chip.text() == "SHADOWED"
    assert "shadowed" in details.notice.text()
    assert details.source_label.text() == str(demo_dirs[2] / "greet.meta")
    # Its own file, evaluated: the older copy points cmd at /usr/bin/cat.
    assert details.description.text() == "Say hello (an older copy, shadowed by tools/greet)."
    assert details.tool is not None
    assert details.tool.cmd == "/usr/bin/cat"
    assert not details.run_button.isEnabled()


def test_filter_narrows_rows_as_you_type(make_window: MakeWindow) -> None:
    window = make_window()
    QTest.keyClicks(window.filter_edit, "GPU")
    assert _visible_names(window) == ["gpu_status"]
    assert window.selected_tool() == "gpu_status"
    assert window.count_label.text().endswith("— showing 1")
    QTest.keyClick(window.filter_edit, Qt.Key.Key_Escape)
    assert window.filter_edit.text() == ""
    assert window.proxy.rowCount() == 12
    QTest.keyClicks(window.filter_edit, "system logs")
    assert _visible_names(window) == ["system_logs"]
    QTest.keyClicks(window.filter_edit, " nothing")
    assert window.proxy.rowCount() == 0
    assert window.selected_tool() is None
    assert window.details.stack.currentIndex() == 0
    assert window.details.placeholder.text() == "No tool matches “system logs nothing”."


def test_select_tool_clears_a_filter_that_hides_it(make_window: MakeWindow) -> None:
    window = make_window()
    window.filter_edit.setText("gpu")
    assert window.select_tool("uname")
    assert window.filter_edit.text() == ""
    assert window.selected_tool() == "uname"
    assert not window.select_tool("no_such_tool")
    assert window.selected_tool() == "uname"


def test_keyboard_navigation_moves_the_selection_and_details_follow(
    make_window: MakeWindow,
) -> None:
    window = make_window()
    window.select_tool("bad_tier")
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_Down)
    assert window.selected_tool() == "broken_example"
    assert window.details.title.text() == "broken_example"
    QTest.keyClick(window.view, Qt.Key.Key_Down)
    assert window.selected_tool() == "desktop_notify"
    QTest.keyClick(window.view, Qt.Key.Key_End)
    assert window.selected_tool() == "write_protected_note"
    QTest.keyClick(window.view, Qt.Key.Key_Up)
    assert window.selected_tool() == "whoami_root"
    assert window.details.title.text() == "whoami_root"
    # From the filter, Down goes to the list.
    window.filter_edit.setFocus()
    QTest.keyClicks(window.filter_edit, "u")
    QTest.keyClick(window.filter_edit, Qt.Key.Key_Down)
    assert window.focusWidget() is window.view


def test_sorting_by_a_column_keeps_the_selection(make_window: MakeWindow) -> None:
    window = make_window()
    window.select_tool("uname")
    window.view.sortByColumn(Column.STATUS, Qt.SortOrder.DescendingOrder)
    assert window.selected_tool() == "uname"
    assert window.proxy.index(0, Column.STATUS).data() == "shadowed"
    window.view.sortByColumn(Column.NAME, Qt.SortOrder.AscendingOrder)
    assert window.selected_tool() == "uname"


def test_open_in_editor_and_reveal_in_file_manager(
    make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = make_window()
    opened: list[QUrl] = []
    window.details.open_url = opened.append
    window.select_tool("uname")
    window.details.open_button.click()
    window.details.reveal_button.click()
    assert [u.toLocalFile() for u in opened] == [
        str(demo_dirs[0] / "uname.meta"),
        str(demo_dirs[0]),
    ]


def test_policy_tab_lists_revokes_and_changes_remembered_decisions(
    qtbot: QtBot, tmp_path: Path, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    store = PolicyStore(tmp_path / "policies.yaml")
    exe = demo_dirs[0] / "write_protected_note"
    sha = file_sha256(exe)
    store.remember("write_protected_note", Kind.SANDBOX, "laptop", Remember.HOUR, exe, sha)
    store.remember("whoami_root", Kind.SUDO, "laptop", Remember.DENY_ALWAYS, None, None)
    window = make_window(policies=store)
    window.select_tool("write_protected_note")
    policy = window.details.policy
    assert window.details.tabs.tabText(3) == "Policy (1)"
    item = policy.tree.topLevelItem(0)
    assert item is not None
    assert [item.text(c) for c in range(4)] == ["sandbox", "laptop", "allow", "For 1 hour"]
    assert item.text(5) == str(exe)
    policy.duration.setCurrentIndex(policy.duration.findData(Remember.ALWAYS))
    policy.change_button.click()
    assert {p.tool: p.remember for p in store.list()} == {
        "write_protected_note": Remember.ALWAYS,
        "whoami_root": Remember.DENY_ALWAYS,
    }
    assert policy.tree.topLevelItem(0).text(4) == "never"  # type: ignore[union-attr]
    with qtbot.waitSignal(policy.changed) as blocker:
        policy.revoke_button.click()
    assert blocker.args == [0]
    assert [p.tool for p in store.list()] == ["whoami_root"]
    assert policy.tree.topLevelItemCount() == 0
    assert window.details.tabs.tabText(3) == "Policy"
    window.select_tool("whoami_root")
    assert window.details.tabs.tabText(3) == "Policy (1)"


def test_policy_tab_without_a_store(make_window: MakeWindow) -> None:
    window = make_window()
    window.select_tool("whoami_root")
    assert "No policy store" in window.details.policy.note.text()
    assert not window.details.policy.revoke_button.isEnabled()


def test_refresh_rescans_and_keeps_the_selection(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = make_window()
    window.select_tool("uname")
    (demo_dirs[0] / "zz_new.meta").write_text('{"description": "new", "cmd": "/usr/bin/cat"}')
    with qtbot.waitSignal(window.registry_changed) as blocker:
        window.reload_action.trigger()
    assert "zz_new" in blocker.args[0].tools
    assert window.selected_tool() == "uname"


def test_empty_registry_explains_what_to_do(
    tmp_path: Path, make_window: MakeWindow, host_env: dict[str, str]
) -> None:
    empty = RegistryLoader([tmp_path / "nothing"], env=host_env)
    window = make_window(loader=empty)
    assert window.model.rowCount() == 0
    assert window.selected_tool() is None
    placeholder: QLabel = window.details.placeholder
    assert "No tools found in" in placeholder.text()
    assert window.count_label.text() == "No tools"


def test_a_tool_file_changed_after_the_scan_is_explained_then_reloaded(
    make_window: MakeWindow,
    demo_dirs: list[Path],
    host_env: dict[str, str],
    tmp_path: Path,
    dispatcher: Dispatcher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scan_cache, "SETTLE_NS", 0)
    cache = tmp_path / "scan-cache"
    RegistryLoader(demo_dirs, env=host_env, cache_dir=cache).load()  # fills the cache
    loader = RegistryLoader(demo_dirs, env=host_env, cache_dir=cache)
    window = make_window(loader=loader, dispatcher=dispatcher)
    greet = demo_dirs[0] / "greet.meta"
    doc = json.loads(greet.read_text())
    greet.write_text(json.dumps({**doc, "prompt": "## greet, version 2"}))  # no watcher here

    assert window.select_tool("greet")
    shown = window.details.prompt.toPlainText()
    assert "greet.meta changed since the tool registry was loaded" in shown
    assert window.details.args_table.rowCount() == 0

    assert window.open_run_form() is None  # the stale snapshot is not run: it is reloaded
    assert "changed since" in window.statusBar().currentMessage()
    assert window.select_tool("greet")
    assert "version 2" in window.details.prompt.toPlainText()
