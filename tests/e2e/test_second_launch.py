"""A desktop without a tray (GNOME without the AppIndicator extension): the launcher is the way in.

The real ``ollie-tray`` runs on a private D-Bus session with no tray and no
StatusNotifierWatcher (``QT_QPA_PLATFORM=offscreen``: no window system
either, so nothing can be clicked).  Launching it again, as the application
menu does, must open the running instance's Tool Browser and exit 0; the
launcher's actions ``--pause`` and ``--quit`` must reach it over the session
bus.  What the tray shows is read from its test state file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import desktop_session as ds
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]


def _state(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def test_second_launch_opens_the_browser_and_actions_pause_and_quit(tmp_path: Path) -> None:
    ds.require("dbus-daemon")
    with ds.dbus_session(tmp_path) as env:
        # Not the first start: the welcome Tool Browser of a person without tools is not
        # what this test looks for (ollie_tray.main.first_start_without_tools).
        welcomed = Path(env["XDG_STATE_HOME"]) / "ollie" / "welcome-shown"
        welcomed.parent.mkdir(parents=True)
        welcomed.touch()
        state = tmp_path / "state.json"
        tray_env = {
            **env,
            "QT_QPA_PLATFORM": "offscreen",
            "OLLIE_TRAY_TEST_STATE_FILE": str(state),
        }
        argv = [sys.executable, "-m", "ollie_tray", "--demo"]
        log = tmp_path / "tray.log"
        with ds.running(argv, tray_env, log) as tray:
            ds.wait_until(
                lambda: _state(state).get("tray") == "idle", "the tray up", proc=tray, log=log
            )
            assert _state(state).get("browser") is None

            def again(*flags: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [*argv, *flags],
                    env={k: v for k, v in tray_env.items() if k != "OLLIE_TRAY_TEST_STATE_FILE"},
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )

            second = again()
            assert second.returncode == 0, second.stderr
            ds.wait_until(
                lambda: _state(state).get("browser") is not None, "the Tool Browser", proc=tray
            )
            paused = again("--pause")
            assert paused.returncode == 0, paused.stderr
            ds.wait_until(lambda: _state(state).get("tray") == "paused", "paused", proc=tray)
            quitting = again("--quit")
            assert quitting.returncode == 0, quitting.stderr
            tray.wait(timeout=ds.DEADLINE)
            assert tray.returncode == 0, log.read_text()
        # Nothing runs now: the actions say so instead of pretending.
        gone = subprocess.run(
            [*argv, "--quit"], env=tray_env, capture_output=True, text=True, timeout=30
        )
        assert gone.returncode == 1
        assert "did not answer" in gone.stderr or "no session bus" in gone.stderr
