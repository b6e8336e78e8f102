"""The Tool Browser's list model and filter proxy, on the demo tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QIcon, QPixmap

from ollie_tray.browser.model import (
    TOOL_ROLE,
    Column,
    RowStatus,
    ToolFilterProxy,
    ToolRow,
    ToolTableModel,
    rows_of,
)
from registry_core.registry import Registry, RegistryLoader, Status

EXPECTED = {
    ("bad_tier", 0): RowStatus.BROKEN,
    ("broken_example", 0): RowStatus.BROKEN,
    ("desktop_notify", 0): RowStatus.AVAILABLE,
    ("echo_args", 0): RowStatus.AVAILABLE,
    ("file_info", 0): RowStatus.AVAILABLE,
    ("gpu_status", 0): RowStatus.HIDDEN,
    ("greet", 0): RowStatus.AVAILABLE,
    ("greet", 1): RowStatus.SHADOWED,
    ("system_logs", 0): RowStatus.AVAILABLE,
    ("uname", 0): RowStatus.AVAILABLE,
    ("whoami_root", 0): RowStatus.AVAILABLE,
    ("write_protected_note", 0): RowStatus.AVAILABLE,
}


@pytest.fixture
def registry(loader: RegistryLoader) -> Registry:
    return loader.load()


@pytest.fixture
def model(qapp: Any, registry: Registry) -> ToolTableModel:
    model = ToolTableModel()
    model.set_registry(registry)
    return model


def _cell(model: Any, name: str, column: Column, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
    for row in range(model.rowCount()):
        if model.index(row, 0).data(TOOL_ROLE).key == (name, 0):
            return model.index(row, column).data(role)
    raise AssertionError(f"no row {name}")


def _names(model: Any) -> list[str]:
    return [model.index(r, 0).data() for r in range(model.rowCount())]


def test_rows_cover_every_definition_with_its_status(model: ToolTableModel) -> None:
    assert {r.key: r.status for r in model.rows()} == EXPECTED
    assert model.counts() == {
        RowStatus.AVAILABLE: 8,
        RowStatus.HIDDEN: 1,
        RowStatus.BROKEN: 2,
        RowStatus.SHADOWED: 1,
    }


def test_shadowed_row_points_at_the_shadowed_file_and_follows_its_winner(
    model: ToolTableModel, demo_dirs: list[Path]
) -> None:
    winner, shadowed = (
        model.row(model.find(("greet", 0)) or 0),
        model.row(model.find(("greet", 1)) or 0),
    )
    assert winner.source == demo_dirs[0] / "greet.meta"
    assert shadowed.source == demo_dirs[2] / "greet.meta"
    assert shadowed.tool is winner.tool
    assert model.find(("greet", 1)) == (model.find(("greet", 0)) or 0) + 1
    assert _cell(model, "greet", Column.STATUS) == "available"
    index = model.index(model.find(("greet", 1)) or 0, Column.DESCRIPTION)
    assert index.data() == f"shadowed by {winner.source}"
    assert index.data(Qt.ItemDataRole.FontRole).italic()


def test_columns_show_status_tier_and_badges(model: ToolTableModel) -> None:
    assert _cell(model, "system_logs", Column.STATUS) == "available · v0"
    assert _cell(model, "system_logs", Column.TIER) == "warm"
    assert _cell(model, "gpu_status", Column.STATUS) == "hidden"
    assert _cell(model, "bad_tier", Column.STATUS) == "broken"
    assert _cell(model, "bad_tier", Column.TIER) == ""
    assert _cell(model, "bad_tier", Column.DESCRIPTION).startswith("broken: tier: unknown tier")
    badges = {r.name: r.badges for r in model.rows() if not r.shadowed}
    assert badges["system_logs"] == ("read-only",)
    assert badges["whoami_root"] == ("read-only", "sudo")
    assert badges["write_protected_note"] == ("elevated",)
    assert badges["desktop_notify"] == ()
    assert _cell(model, "whoami_root", Column.FLAGS) == ""  # drawn as pills:
    pills = _cell(model, "whoami_root", Column.FLAGS, Qt.ItemDataRole.DecorationRole)
    assert isinstance(pills, QPixmap)
    assert pills.deviceIndependentSize().width() > pills.deviceIndependentSize().height() * 3
    assert _cell(model, "whoami_root", Column.FLAGS, Qt.ItemDataRole.ToolTipRole) == (
        "read-only, sudo"
    )
    assert _cell(model, "desktop_notify", Column.FLAGS, Qt.ItemDataRole.DecorationRole) is None
    decoration = _cell(model, "gpu_status", Column.NAME, Qt.ItemDataRole.DecorationRole)
    assert isinstance(decoration, QIcon)
    assert not decoration.isNull()
    assert "no variant matches" in _cell(
        model, "gpu_status", Column.STATUS, Qt.ItemDataRole.ToolTipRole
    )
    assert isinstance(_cell(model, "uname", Column.NAME, TOOL_ROLE), ToolRow)
    assert model.headerData(0, Qt.Orientation.Horizontal) == "Name"


def test_models_pass_qt_model_tester(qtmodeltester: Any, model: ToolTableModel) -> None:
    qtmodeltester.check(model, force_py=True)
    proxy = ToolFilterProxy(model)
    proxy.set_filter_text("log")
    qtmodeltester.check(proxy, force_py=True)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", None),
        ("GPU", ["gpu_status"]),
        ("system logs", ["system_logs"]),  # both words, from the description
        ("hello", ["greet", "greet"]),  # the shadowed row matches like its winner
        ("BROKEN_ex", ["broken_example"]),
        ("nothing-matches-this", []),
    ],
)
def test_filter_matches_name_and_description_case_insensitively(
    model: ToolTableModel, text: str, names: list[str] | None
) -> None:
    proxy = ToolFilterProxy(model)
    proxy.set_filter_text(text)
    assert _names(proxy) == (names if names is not None else _names(model))
    assert proxy.filter_text == " ".join(text.lower().split())


def test_sorting_happens_in_the_source_and_keeps_persistent_indexes(
    model: ToolTableModel,
) -> None:
    proxy = ToolFilterProxy(model)
    kept = QPersistentModelIndex(proxy.index(_names(proxy).index("uname"), 0))
    proxy.sort(Column.STATUS, Qt.SortOrder.AscendingOrder)
    statuses = [model.row(r).status for r in range(model.rowCount())]
    order = list(RowStatus)
    assert statuses == sorted(statuses, key=order.index)
    assert kept.data() == "uname"
    proxy.sort(Column.NAME, Qt.SortOrder.DescendingOrder)
    assert _names(proxy)[0] == "write_protected_note"
    assert kept.data() == "uname"
    for column in Column:  # every column sorts without error, both ways
        for order_ in Qt.SortOrder:
            proxy.sort(column, order_)
            assert sorted(_names(proxy)) == sorted(_names(model))


class _Recorder:
    def __init__(self, model: ToolTableModel) -> None:
        self.events: list[tuple[str, int, int]] = []
        model.modelReset.connect(lambda: self.events.append(("reset", -1, -1)))
        model.rowsInserted.connect(lambda _p, a, b: self.events.append(("insert", a, b)))
        model.rowsRemoved.connect(lambda _p, a, b: self.events.append(("remove", a, b)))
        model.dataChanged.connect(
            lambda a, b, *_: self.events.append(("changed", a.row(), b.row()))
        )


def test_small_registry_changes_become_row_signals(
    model: ToolTableModel, registry: Registry
) -> None:
    recorder = _Recorder(model)
    persistent = QPersistentModelIndex(model.index(model.find(("system_logs", 0)) or 0, 0))
    uname = registry.tools["uname"]
    added = uname._replace(name="aaa_new", source_file=str(uname.source.with_name("aaa.meta")))
    edited = registry.tools["echo_args"]._replace(description="changed")
    assert not model.set_registry(
        registry.with_changes({"aaa_new": added, "file_info": None, "echo_args": edited})
    )
    assert ("insert", 0, 0) in recorder.events
    assert any(e[0] == "remove" for e in recorder.events)
    assert any(e[0] == "changed" for e in recorder.events)
    assert "reset" not in [e[0] for e in recorder.events]
    assert persistent.data() == "system_logs"
    assert model.find(("file_info", 0)) is None
    assert _cell(model, "echo_args", Column.DESCRIPTION) == "changed"
    assert model.haystacks[0].startswith("aaa_new\n")


def test_unchanged_registry_emits_nothing_and_big_changes_reset(
    model: ToolTableModel, registry: Registry
) -> None:
    recorder = _Recorder(model)
    model.set_registry(registry)
    assert recorder.events == []
    tool = registry.tools["uname"]
    many = {
        f"t{i:04d}": tool._replace(name=f"t{i:04d}", source_file=f"/x/t{i:04d}.meta")
        for i in range(300)
    }
    assert model.set_registry(registry.with_changes(many))
    assert recorder.events == [("reset", -1, -1)]
    assert model.rowCount() == len(EXPECTED) + 300


def test_rows_of_lists_shadowed_definitions_after_their_tool(registry: Registry) -> None:
    keys = [r.key for r in rows_of(registry)]
    assert keys == sorted(EXPECTED)
    broken = [r for r in rows_of(registry) if r.tool.status is Status.BROKEN]
    assert all(r.badges == () for r in broken)


def test_invalid_index_has_no_data(model: ToolTableModel) -> None:
    assert model.data(QModelIndex()) is None
    assert model.rowCount(model.index(0, 0)) == 0
