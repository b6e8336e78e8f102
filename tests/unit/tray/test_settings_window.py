"""The Settings window shows tray.yaml, writes it back, and is reachable from the tray menu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication, QDialogButtonBox
from pytestqt.qtbot import QtBot
from tray_actions import recording_actions

from ollie_tray.settings import TraySettings, load, save, settings_path
from ollie_tray.tray import TrayIcon
from ollie_tray.windows.settings import SettingsWindow


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_the_window_shows_the_files_values(qtbot: QtBot, tmp_path: Path) -> None:
    env = _env(tmp_path)
    save(env, TraySettings(countdown_s=42, require_password=True))
    window = SettingsWindow(env)
    qtbot.addWidget(window)
    assert window.countdown.value() == 42
    assert window.require_password.isChecked()


def test_save_writes_the_file_and_keeps_the_keys_it_does_not_show(
    qtbot: QtBot, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    save(env, TraySettings(arm_delay_ms=1200, verbose=True))
    window = SettingsWindow(env)
    qtbot.addWidget(window)
    window.countdown.setValue(25)
    window.require_password.setChecked(True)
    window.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    assert load(env) == TraySettings(
        countdown_s=25, require_password=True, arm_delay_ms=1200, verbose=True
    )
    assert "#" in settings_path(env).read_text()  # still the commented file


def test_cancel_writes_nothing(qtbot: QtBot, tmp_path: Path) -> None:
    env = _env(tmp_path)
    window = SettingsWindow(env)  # a first look writes the defaults
    qtbot.addWidget(window)
    before = settings_path(env).read_text()
    window.countdown.setValue(99)
    window.buttons.button(QDialogButtonBox.StandardButton.Cancel).click()
    assert settings_path(env).read_text() == before


def test_the_countdown_cannot_be_set_outside_the_range_the_file_accepts(
    qtbot: QtBot, tmp_path: Path
) -> None:
    window = SettingsWindow(_env(tmp_path))
    qtbot.addWidget(window)
    window.countdown.setValue(0)
    assert window.chosen().countdown_s >= 5
    window.countdown.setValue(10**6)
    assert window.chosen().countdown_s <= 3600


def test_the_tray_menu_opens_the_settings(qapp: QApplication) -> None:
    calls: list[tuple[str, Any]] = []
    opened: list[str] = []
    tray = TrayIcon(recording_actions(calls, settings=lambda: opened.append("settings")))
    entry = next(a for a in tray.menu.actions() if a.text().replace("&", "") == "Settings…")
    entry.trigger()
    assert opened == ["settings"]
    plain = TrayIcon(recording_actions(calls))
    assert not [a for a in plain.menu.actions() if a.text().replace("&", "") == "Settings…"]


def test_every_tray_menu_entry_has_a_key_of_its_own(qapp: QApplication) -> None:
    # Two entries sharing a mnemonic make the key move between them instead of
    # choosing one: "&Settings…" once took "Start at login"'s S.
    tray = TrayIcon(recording_actions([], settings=lambda: None))
    keys = [
        a.text().split("&", 1)[1][0].lower()
        for a in tray.menu.actions()
        if "&" in a.text() and a.isVisible()
    ]
    assert len(keys) == len(set(keys)) > 5, keys


def test_the_application_icon_is_never_empty(qapp: QApplication) -> None:
    from ollie_tray.icons import app_icon

    assert not app_icon().isNull()  # the theme's, or the shipped file when no theme has it
