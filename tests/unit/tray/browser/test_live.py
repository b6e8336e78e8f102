"""Live updates: inotify → debounce → loader.refresh → model, keeping the selection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from ollie_tray.browser.live import LiveRegistry, RowUpdate, plan_row_update, ranges
from ollie_tray.browser.model import RowStatus
from registry_core.registry import RegistryLoader, Status

MakeWindow = Callable[..., BrowserWindow]
TIMEOUT = 5000

NEW_META = {"description": "Count words.", "cmd": "/usr/bin/wc", "readOnly": True}


def _live_window(make_window: MakeWindow, select: str) -> BrowserWindow:
    window = make_window(live=True)
    assert window.live is not None
    assert window.live.active
    assert window.select_tool(select)
    return window


def test_adding_a_meta_adds_a_row_and_keeps_the_selection(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "system_logs")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT) as blocker:
        (demo_dirs[0] / "aaa_words.meta").write_text(json.dumps(NEW_META))
    assert "aaa_words" in blocker.args[0].tools
    assert window.model.find(("aaa_words", 0)) == 0
    assert window.selected_tool() == "system_logs"
    assert window.details.title.text() == "system_logs"
    assert window.count_label.text().startswith("12 tools")


def test_removing_a_meta_removes_its_row_and_keeps_the_selection(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "uname")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        (demo_dirs[0] / "file_info.meta").unlink()
    assert window.model.find(("file_info", 0)) is None
    assert "file_info" not in window.loader.current
    assert window.selected_tool() == "uname"


def test_breaking_the_selected_meta_updates_its_details(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "uname")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        (demo_dirs[0] / "uname.meta").write_text('{\n  "description": "oops",\n  "tier": }\n')
    row = window.selected_row()
    assert row is not None
    assert (row.name, row.status) == ("uname", RowStatus.BROKEN)
    assert window.details.status_chip.text() == "BROKEN"
    problem = window.details.problems.topLevelItem(0)
    assert problem is not None
    assert problem.text(1) == "3:11"


def test_chmod_minus_x_loses_the_executable(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "greet")
    assert window.details.executable_label.text() == str(demo_dirs[0] / "greet")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        (demo_dirs[0] / "greet").chmod(0o644)
    tool = window.loader.current.tools["greet"]
    assert tool.executable is None
    assert any("no executable" in w.message for w in tool.warnings)
    assert window.selected_tool() == "greet"
    assert window.details.executable_label.text() == "—"
    assert window.details.tabs.tabText(4) == "Problems (1)"


def test_a_helper_executable_change_refreshes_its_tool(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "system_logs")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        (demo_dirs[0] / "system_logs_journald").chmod(0o644)
    assert window.loader.current.tools["system_logs"].executable is None
    assert window.details.executable_label.text() == "—"


def test_removing_the_winner_promotes_the_shadowed_definition(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "greet")
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        (demo_dirs[0] / "greet.meta").unlink()
    assert window.model.find(("greet", 1)) is None
    tool = window.loader.current.tools["greet"]
    assert tool.source == demo_dirs[2] / "greet.meta"
    assert window.selected_tool() == "greet"
    assert window.details.source_label.text() == str(demo_dirs[2] / "greet.meta")


def test_a_burst_of_changes_is_one_refresh(
    qtbot: QtBot, loader: RegistryLoader, demo_dirs: list[Path]
) -> None:
    loader.load()
    live = LiveRegistry(loader)
    try:
        with qtbot.waitSignal(live.refreshed, timeout=TIMEOUT) as blocker:
            for i in range(5):
                (demo_dirs[1] / f"burst_{i}.meta").write_text(json.dumps(NEW_META))
        registry, changed = blocker.args
        assert {f"burst_{i}" for i in range(5)} <= set(registry.tools)
        assert {demo_dirs[1] / f"burst_{i}.meta" for i in range(5)} <= changed
    finally:
        live.close()


def test_a_tools_directory_created_later_is_picked_up(
    qtbot: QtBot, tmp_path: Path, host_env: dict[str, str]
) -> None:
    later = tmp_path / "config" / "ollie" / "tools"
    loader = RegistryLoader([later], env=host_env)
    loader.load()
    live = LiveRegistry(loader)
    try:
        assert live.waiting_for == (later,)
        with qtbot.waitSignal(live.refreshed, timeout=TIMEOUT) as blocker:
            later.mkdir(parents=True)
            (later / "late.meta").write_text(json.dumps(NEW_META))
        assert blocker.args[1] == frozenset({later})  # the new directory is scanned whole
        assert loader.current.tools["late"].status is Status.AVAILABLE
        assert not live.waiting_for
        with qtbot.waitSignal(live.refreshed, timeout=TIMEOUT):  # and now watched itself
            (later / "later.meta").write_text(json.dumps(NEW_META))
        assert "later" in loader.current
    finally:
        live.close()


def test_closing_stops_watching_and_showing_again_catches_up(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = _live_window(make_window, "uname")
    window.close()
    assert window.live is None
    (demo_dirs[0] / "while_closed.meta").write_text(json.dumps(NEW_META))
    with qtbot.waitSignal(window.registry_changed, timeout=TIMEOUT):
        window.show()
    assert window.live is not None
    assert "while_closed" in window.loader.current
    assert window.selected_tool() == "uname"


def test_plan_row_update_prefers_row_signals_and_falls_back_to_a_reset() -> None:
    assert plan_row_update("abc", "abc") == RowUpdate()
    plan = plan_row_update("abcdef", "xabdefy")
    assert not plan.reset
    assert plan.removed == [(2, 2)]  # c, in the old numbering
    assert plan.added == [(0, 0), (6, 6)]  # x and y, in the new numbering
    assert plan_row_update("", "ab").reset  # nothing to keep
    assert plan_row_update("abc", "cba").reset  # kept rows moved
    assert plan_row_update(range(10), range(100, 400)).reset  # too many changes
    assert ranges([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]
