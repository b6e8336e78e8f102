"""Without a tray icon nothing may be out of reach: the Tool Browser carries the tray's menu."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QApplication, QMainWindow

from ollie_tray.app import AppOptions, TrayApp

EXAMPLES = Path(__file__).resolve().parents[3] / "resources" / "examples" / "tools"


def test_browser_window_has_the_tray_menu(qapp: QApplication, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "tools")
    (tmp_path / "run").mkdir(mode=0o700)
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "OLLIE_TOOLS_PATH": str(tmp_path / "tools"),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus",
    }
    app = TrayApp(qapp, env, AppOptions())
    try:
        app.show_browser()
        window = app._windows["browser"]
        assert isinstance(window, QMainWindow)
        (menu_action,) = window.menuBar().actions()
        menu = menu_action.menu()
        assert menu is not None
        texts = [a.text() for a in menu.actions() if not a.isSeparator()]
        assert "No pending requests" in texts
        for wanted in ("&Policies…", "&Audit log…", "&Quit"):
            assert wanted in texts
        assert any(t.startswith("Pause") for t in texts)
    finally:
        for window in app._windows.values():
            window.close()
        app._signals.close()
