"""Desktop entries that real desktops accept: systemd's XDG autostart generator, the validator.

GNOME and Plasma 6 sessions start autostart entries through
``systemd-xdg-autostart-generator``, which drops an entry whose ``Exec``
program it cannot find on the session's ``PATH``: an ``Exec=ollie-tray``
written from a venv never starts.  These tests run the real generator
(``systemd`` package) on entries written into a temporary config directory
with a ``PATH`` that does not hold the venv, and ``desktop-file-validate``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from tray_actions import recording_actions

from ollie_tray import autostart
from ollie_tray.desktop_integration import install_launcher, program_argv
from ollie_tray.tray import TrayIcon

GENERATOR = Path("/usr/lib/systemd/user-generators/systemd-xdg-autostart-generator")
SESSION_PATH = "/usr/local/bin:/usr/bin:/bin"
pytestmark = [pytest.mark.realstack]


def _require(path: Path | str | None, package: str) -> str:
    if path is None or not Path(path).exists():
        message = f"{path or package} missing: apt-get install -y {package}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI must run this test)")
        pytest.skip(message)
    return str(path)


def _generate(tmp_path: Path, config: Path) -> list[Path]:
    """Run the generator like a user session does; returns the units it wrote."""
    generator = _require(GENERATOR, "systemd")
    out = tmp_path / "units"
    for sub in ("normal", "early", "late"):
        (out / sub).mkdir(parents=True)
    env = {
        "PATH": SESSION_PATH,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(config),
        "XDG_CONFIG_DIRS": str(tmp_path / "no-system-config"),
        "XDG_CURRENT_DESKTOP": "GNOME",
        "SYSTEMD_LOG_TARGET": "console",
    }
    result = subprocess.run(
        [generator, str(out / "normal"), str(out / "early"), str(out / "late")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    units = sorted((out / "late").glob("*.service"))  # systemd 252 writes them there
    assert units, f"the generator made no unit: {result.stderr}"
    return units


def _exec_start(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return line.removeprefix("ExecStart=").lstrip(":").split()


def _validate(path: Path) -> None:
    validator = _require(shutil.which("desktop-file-validate"), "desktop-file-utils")
    result = subprocess.run([validator, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_autostart_from_a_venv_not_on_path_is_accepted_by_the_generator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", SESSION_PATH)  # the venv is not on PATH, as from a launcher
    config = tmp_path / "cfg"
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(config), "PATH": SESSION_PATH}
    entry = autostart.install(env)
    _validate(entry)
    (unit,) = _generate(tmp_path, config)
    argv = _exec_start(unit)
    assert Path(argv[0]).is_absolute() and os.access(argv[0], os.X_OK), argv
    assert argv[0] == program_argv()[0]


def test_without_a_script_the_entry_names_this_interpreter_with_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    interpreter = bare / "python3"
    interpreter.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(interpreter))
    monkeypatch.setenv("PATH", SESSION_PATH)
    assert program_argv() == [str(interpreter), "-m", "ollie_tray"]
    config = tmp_path / "cfg"
    entry = autostart.install({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(config)})
    assert f"Exec={interpreter} -m ollie_tray" in entry.read_text()
    _validate(entry)
    (unit,) = _generate(tmp_path, config)
    assert _exec_start(unit) == [str(interpreter), "-m", "ollie_tray"]


def test_odd_paths_are_quoted_for_the_generator_too(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    program = tmp_path / 'odd dir $x "q"' / "ollie-tray"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    entry = autostart.install(
        {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(config)}, executable=str(program)
    )
    _validate(entry)
    (unit,) = _generate(tmp_path, config)
    # The generator found the program (else no unit) and quotes it its own way.
    unquoted = unit.read_text().replace('\\"', '"').replace("\\$", "$")
    assert str(program) in unquoted


def test_launcher_has_browser_pause_and_quit_actions_pointing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", SESSION_PATH)
    launcher = install_launcher({"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "d")})
    _validate(launcher)
    text = launcher.read_text()
    program = program_argv()[0]
    assert "Actions=browser;pause;quit;" in text
    for flag in ("--browser", "--pause", "--quit"):
        assert f"Exec={program} {flag}" in text
    assert f"Exec={program}\n" in text


def test_demo_mode_says_why_start_at_login_is_off(qapp: QApplication) -> None:
    calls: list[tuple[str, Any]] = []
    why = "not in demo mode: run ollie-tray without --demo to enable it"
    tray = TrayIcon(
        recording_actions(calls, autostart_enabled=lambda: True, autostart_unavailable=lambda: why)
    )
    (action,) = [a for a in tray.menu.actions() if "Start at login" in a.text()]
    assert not action.isEnabled()
    assert not action.isChecked()
    assert why in action.text()
    action.trigger()  # a disabled action does nothing
    assert not [c for c in calls if c[0] == "autostart"]
