"""Our StatusNotifierItem export: menu ids, diffs, the item's look (offscreen Qt, no bus)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from tray_actions import recording_actions

from ollie_tray.sni.item import Status
from ollie_tray.sni.menu_model import (
    Entry,
    MenuIds,
    dbusmenu_label,
    diff,
    index,
)
from ollie_tray.sni.qt_tray import SniTray, argb32, look_of
from ollie_tray.tray import TrayIcon
from registry_core.broker.decide.core import Pending
from registry_core.broker.question import ApprovalRequest


def test_mnemonics_become_dbusmenu_underscores() -> None:
    assert dbusmenu_label("Tool &Browser…") == "Tool _Browser…"
    assert dbusmenu_label("a_b && c") == "a__b & c"


def test_ids_survive_a_rebuild_and_an_equal_rebuild_changes_nothing() -> None:
    ids = MenuIds()
    first = index([Entry("a", "A"), Entry("b", "B", checkable=True)], ids)
    again = index([Entry("a", "A"), Entry("b", "B", checkable=True)], ids)
    assert again.keys() == first.keys()
    assert diff(first, again).empty


def test_a_check_is_a_property_update_and_a_new_item_a_layout_update() -> None:
    ids = MenuIds()
    old = index([Entry("a", "A"), Entry("b", "B", checkable=True)], ids)
    checked = index([Entry("a", "A"), Entry("b", "B", checkable=True, checked=True)], ids)
    change = diff(old, checked)
    assert not change.layout
    assert change.properties == {
        ids.id_for("b"): {
            "label": "B",
            "enabled": True,
            "visible": True,
            "toggle-type": "checkmark",
            "toggle-state": 1,
        }
    }
    grown = index([Entry("a", "A"), Entry("c", "C"), Entry("b", "B", checkable=True)], ids)
    assert diff(old, grown).layout
    assert ids.id_for("b") == 2  # b kept its id although c came before it


def _request(make: Callable[..., ApprovalRequest], rid: str) -> Pending:
    return Pending(make(id=rid, tool="system_logs"), time.monotonic(), showing=rid == "r1")


def test_one_request_is_one_layout_update_not_a_rebuild_storm(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    calls: list[tuple[str, Any]] = []
    tray = TrayIcon(recording_actions(calls))
    sni = SniTray(tray)
    sni.sync_menu()
    menu = sni.export.menu
    before = menu.layout_updates
    ids_before = dict(menu.nodes)
    tray.rebuild_menu()  # a rebuild that changes nothing
    tray.update_state()
    sni.sync_menu()
    assert menu.layout_updates == before
    tray.set_pending([_request(approval_request, "r1")])
    qapp.processEvents()
    sni.sync_menu()
    assert menu.layout_updates == before + 1
    # Everything that was there keeps its id (only the request item is new).
    assert set(ids_before) < set(menu.nodes)
    tray.set_pending([])
    sni.sync_menu()
    assert menu.layout_updates == before + 2
    assert set(menu.nodes) == set(ids_before)


def test_a_click_reaches_the_action_that_now_holds_the_item(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    calls: list[tuple[str, Any]] = []
    tray = TrayIcon(recording_actions(calls))
    sni = SniTray(tray)
    sni.sync_menu()
    quit_id = next(i for i, n in sni.export.menu.nodes.items() if n.entry.label == "&Quit")
    tray.set_pending([_request(approval_request, "r1")])  # the menu is rebuilt
    sni.activate(quit_id)
    assert ("quit", ()) in calls


def test_look_attention_count_and_icon_names(
    qapp: QApplication, approval_request: Callable[..., ApprovalRequest]
) -> None:
    tray = TrayIcon(recording_actions([]))
    idle = look_of(tray, 0)
    assert (idle.status, idle.icon_name, idle.title) == (
        Status.ACTIVE,
        "io.github.ollie_tray.OllieTray",
        "Ollie Tray",
    )
    tray.set_pending([_request(approval_request, "r1"), _request(approval_request, "r2")])
    busy = look_of(tray, tray.pending_count)
    assert busy.status is Status.NEEDS_ATTENTION
    assert busy.icon_name == busy.attention_icon_name == "ollie-tray-pending"
    assert busy.title == "Ollie Tray (2 pending)"
    assert "2 requests waiting" in busy.tooltip_body
    tray.set_pending([])
    tray.paused = True
    tray.update_state()
    paused = look_of(tray, 0)
    assert (paused.status, paused.icon_name) == (Status.ACTIVE, "ollie-tray-paused")
    tray.set_error("socket could not be bound")
    assert look_of(tray, 0).icon_name == "ollie-tray-error"


def test_pixmaps_are_argb_in_network_byte_order(qapp: QApplication) -> None:
    image = QImage(1, 1, QImage.Format.Format_ARGB32)
    image.fill(0x80112233)
    assert argb32(image) == bytes([0x80, 0x11, 0x22, 0x33])


def test_host_activation_token_is_handed_to_the_app(qapp: QApplication) -> None:
    tokens: list[str] = []
    tray = TrayIcon(recording_actions([]))
    sni = SniTray(tray, on_activation_token=tokens.append)
    sni.export.item.ProvideXdgActivationToken("host-token")
    assert tokens == ["host-token"]


def test_the_next_raise_passes_the_token_to_qt_wayland(
    qapp: QApplication, tmp_path: Any, monkeypatch: Any
) -> None:
    import os

    from ollie_tray.app import AppOptions, TrayApp

    (tmp_path / "run").mkdir(mode=0o700)
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "c"),
        "XDG_STATE_HOME": str(tmp_path / "s"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "OLLIE_TOOLS_PATH": str(tmp_path / "tools"),
    }
    monkeypatch.delenv("XDG_ACTIVATION_TOKEN", raising=False)
    app = TrayApp(qapp, env, AppOptions())
    try:
        app._set_activation_token("notification-token")
        app.open_request("r1")
        # Qt's xdg-shell plugin reads (and clears) this on the next activation request.
        assert os.environ.get("XDG_ACTIVATION_TOKEN") == "notification-token"
        os.environ.pop("XDG_ACTIVATION_TOKEN")
        app.open_request("r1")  # a token is used once
        assert "XDG_ACTIVATION_TOKEN" not in os.environ
    finally:
        app._signals.close()
