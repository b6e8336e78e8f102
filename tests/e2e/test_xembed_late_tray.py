"""X11 without a StatusNotifierWatcher: the XEmbed icon docks in a tray that starts after the app.

A panel that starts (or restarts) after ``ollie-tray`` is the ordinary case
of session start order.  The tray runs on an Xvfb of its own with no tray,
then ``trayer`` starts; the icon must appear under trayer's panel (read from
the X window tree, as in ``test_tray_icon.py``).  The D-Bus session has no
watcher, so only the XEmbed path can put it there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import desktop_session as ds
import e2e_driver as drv
import pytest
from e2e_harness import VENV_BIN, require_desktop, trayer_panel

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TRAYER = ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"]


def test_icon_docks_in_a_tray_started_after_the_app(tmp_path: Path) -> None:
    require_desktop()
    (tmp_path / "x").mkdir()
    with ds.dbus_session(tmp_path) as env, ds.xvfb(tmp_path / "x") as display:
        home = Path(env["HOME"])
        welcomed = Path(env["XDG_STATE_HOME"]) / "ollie" / "welcome-shown"  # not a first start
        welcomed.parent.mkdir(parents=True)
        welcomed.touch()
        tray_env = {
            **env,
            "PATH": f"{VENV_BIN}:/usr/bin:/bin",
            "DISPLAY": display,
            "QT_QPA_PLATFORM": "xcb",
        }
        log = tmp_path / "tray.log"
        argv = [sys.executable, "-m", "ollie_tray", "--demo"]
        with ds.running(argv, tray_env, log) as tray:
            ds.wait_until(
                lambda: "listening on" in log.read_text(), "the tray listening", proc=tray, log=log
            )
            ds.wait_until(
                lambda: "no system tray available" in log.read_text(),
                "the tray noticing there is no tray",
                proc=tray,
                log=log,
            )
            x = drv.Display(display)
            assert drv.tray_icon(x, tray.pid) is None
            xenv = {"PATH": "/usr/bin:/bin", "DISPLAY": display, "HOME": str(home)}
            with ds.running(TRAYER, xenv, tmp_path / "trayer.log"):
                ds.wait_until(lambda: trayer_panel(display), "trayer's panel")
                icon = drv.wait_for(
                    lambda: drv.tray_icon(x, tray.pid), "the icon docked in the late trayer"
                )
                assert icon.width >= 16 and icon.height >= 16, icon
