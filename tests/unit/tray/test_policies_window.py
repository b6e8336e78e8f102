"""The Policies window over a real PolicyStore on a temporary policies.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ollie_tray.windows.policies import PoliciesWindow, expires_text
from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.remember.policy_file import Policy
from registry_core.broker.wire.messages import Decision, Kind

SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
NOW = 1_750_000_000.0


class FakeClock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> PolicyStore:
    store = PolicyStore(tmp_path / "policies.yaml", clock=clock)
    store.remember("backup", Kind.SUDO, "laptop", Remember.HOUR, "/opt/ollie/backup", SHA)
    store.remember("apt_upgrade", Kind.SUDO, "build-server", Remember.DENY_ALWAYS, None, None)
    store.remember("disk_usage", Kind.SANDBOX, "laptop", Remember.ALWAYS, "/usr/bin/du", SHA)
    store.remember("net_scan", Kind.SANDBOX, "laptop", Remember.SESSION, "/usr/bin/nmap", SHA)
    store.remember("system_logs", Kind.SUDO, "laptop", Remember.MINUTES_15, "/opt/logs", SHA)
    return store


def make(qtbot: QtBot, store: PolicyStore, clock: FakeClock, **kwargs: int) -> PoliciesWindow:
    window = PoliciesWindow(store, clock=clock, **kwargs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def cell(window: PoliciesWindow, row: int, column: int) -> str:
    return str(window.model.index(row, column).data())


def tools(window: PoliciesWindow) -> list[str]:
    return [cell(window, row, 0) for row in range(window.model.rowCount())]


def row_of(window: PoliciesWindow, tool: str) -> int:
    return tools(window).index(tool)


def test_rows_show_every_remembered_decision(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    assert tools(window) == ["apt_upgrade", "backup", "disk_usage", "net_scan", "system_logs"]
    rows = {
        cell(window, r, 0): [cell(window, r, c) for c in range(6)]
        for r in range(window.model.rowCount())
    }
    assert rows["apt_upgrade"] == [
        "apt_upgrade",
        "run as root (sudo)",
        "build-server",
        "deny",
        "never",
        "any (a deny applies to every executable)",
    ]
    assert rows["backup"][3:] == ["allow", "in 1 h", "/opt/ollie/backup  (sha256 9f86d081884c)"]
    assert rows["disk_usage"][1:5] == ["sandbox escape", "laptop", "allow", "never"]
    assert rows["net_scan"][4] == "this session"
    assert rows["system_logs"][4] == "in 15 min"
    assert window.windowTitle() == "Ollie — remembered decisions"


@pytest.mark.parametrize(
    ("remember", "expires", "text"),
    [
        (Remember.SESSION, None, "this session"),
        (Remember.ALWAYS, None, "never"),
        (Remember.DENY_ALWAYS, None, "never"),
        (Remember.MINUTES_15, NOW + 14 * 60 - 5, "in 14 min"),
        (Remember.MINUTES_15, NOW + 30, "in 1 min"),
        (Remember.HOUR, NOW + 3600, "in 1 h"),
        (Remember.HOUR, NOW + 3600 + 5 * 60, "in 1 h 5 min"),
        (Remember.HOUR, NOW - 1, "expired"),
    ],
)
def test_expires_text(remember: Remember, expires: float | None, text: str) -> None:
    deny = remember is Remember.DENY_ALWAYS
    policy = Policy(
        tool="t",
        kind=Kind.SUDO,
        host="h",
        decision=Decision.DENY if deny else Decision.ALLOW,
        remember=remember,
        created=NOW - 60,
        expires=expires,
        executable="/bin/t",
        sha256=SHA,
    )
    assert expires_text(policy, NOW) == text


def test_buttons_follow_the_selection(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    window = make(qtbot, store, clock)
    assert not window.revoke_button.isEnabled()
    assert not window.change_button.isEnabled()
    assert window.revoke_all_button.isEnabled()
    window.select_row(0)
    assert window.revoke_button.isEnabled()
    assert window.change_button.isEnabled()


def test_revoke_removes_the_selected_policy_from_the_store(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    window.select_row(row_of(window, "backup"))
    with qtbot.waitSignal(window.policies_changed):
        window.revoke_button.click()
    assert "backup" not in [p.tool for p in store.list()]
    assert "backup" not in tools(window)
    assert len(tools(window)) == 4
    # Another store on the same file (as the CLI would be) agrees: it was written.
    again = PolicyStore(store.path, clock=clock)
    assert "backup" not in [p.tool for p in again.list()]


def test_revoke_all_asks_first_and_cancel_keeps_everything(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    window.revoke_all_button.click()
    box = window.confirm_box
    assert isinstance(box, QMessageBox)
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
    qtbot.waitUntil(box.isVisible)
    box.button(QMessageBox.StandardButton.Cancel).click()
    qtbot.waitUntil(lambda: window.confirm_box is None)
    assert len(store.list()) == 5


def test_revoke_all_after_confirming(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    window = make(qtbot, store, clock)
    window.revoke_all_button.click()
    box = window.confirm_box
    assert box is not None
    with qtbot.waitSignal(window.policies_changed):
        box.button(QMessageBox.StandardButton.Yes).click()
    assert store.list() == []
    assert window.model.rowCount() == 0
    assert not window.revoke_all_button.isEnabled()
    assert window.status_label.text() == "Revoked every remembered decision."
    window.refresh()
    assert window.status_label.text() == "No remembered decisions: Ollie asks every time."


def test_revoke_all_without_confirmation(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    window.revoke_all(confirm=False)
    assert window.confirm_box is None
    assert store.list() == []


def test_change_duration_of_the_selected_row(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    window.select_row(row_of(window, "system_logs"))
    combo = window.duration_combo
    combo.setCurrentIndex(combo.findData(Remember.ALWAYS.value))
    window.change_button.click()
    changed = next(p for p in store.list() if p.tool == "system_logs")
    assert changed.remember is Remember.ALWAYS
    assert changed.expires is None
    assert cell(window, row_of(window, "system_logs"), 4) == "never"
    # The selection survives the reload.
    assert [p.tool for p in window.selected_policies()] == ["system_logs"]


def test_duration_choices(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    window = make(qtbot, store, clock)
    combo = window.duration_combo
    labels = [combo.itemText(i) for i in range(combo.count())]
    assert labels == ["For 15 minutes", "For 1 hour", "Always"]


def test_a_refused_change_is_shown(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    """A deny has no executable to bind, so it cannot become a timed allow."""
    window = make(qtbot, store, clock)
    window.select_row(row_of(window, "apt_upgrade"))
    window.duration_combo.setCurrentIndex(0)
    window.change_button.click()
    assert "cannot change" in window.status_label.text()
    denied = next(p for p in store.list() if p.tool == "apt_upgrade")
    assert denied.decision is Decision.DENY


def test_refresh_sees_changes_made_elsewhere(
    qtbot: QtBot, store: PolicyStore, clock: FakeClock
) -> None:
    window = make(qtbot, store, clock)
    other = PolicyStore(store.path, clock=clock)  # e.g. `ollie-tools policy revoke`
    other.revoke("disk_usage")
    window.store_changed()
    assert "disk_usage" not in tools(window)


def test_timer_keeps_expiry_text_live(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    window = make(qtbot, store, clock, refresh_ms=250)
    row = row_of(window, "system_logs")
    assert cell(window, row, 4) == "in 15 min"
    clock.now += 6 * 60
    qtbot.waitUntil(lambda: cell(window, row_of(window, "system_logs"), 4) == "in 9 min")
    clock.now += 10 * 60  # past its expiry: the row leaves
    qtbot.waitUntil(lambda: "system_logs" not in tools(window))


def test_accessible_names(qtbot: QtBot, store: PolicyStore, clock: FakeClock) -> None:
    window = make(qtbot, store, clock)
    for widget in (
        window.table,
        window.revoke_button,
        window.revoke_all_button,
        window.duration_combo,
        window.change_button,
    ):
        assert widget.accessibleName()
