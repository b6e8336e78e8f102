"""Start at login: the XDG autostart entry is written, valid and removable."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ollie_tray import autostart
from ollie_tray.main import main


def test_install_and_remove(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert not autostart.is_enabled(env)
    path = autostart.install(env, executable="/opt/ollie tray/bin/ollie-tray")
    assert path == tmp_path / "cfg" / "autostart" / "ollie-tray.desktop"
    text = path.read_text()
    assert 'Exec="/opt/ollie tray/bin/ollie-tray"' in text
    assert "[Desktop Entry]" in text
    assert autostart.is_enabled(env)
    assert autostart.remove(env)
    assert not autostart.remove(env)
    assert not autostart.is_enabled(env)


def test_entry_passes_desktop_file_validate(tmp_path: Path) -> None:
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        if os.environ.get("CI") == "true":
            pytest.fail("desktop-file-validate missing (apt-get install -y desktop-file-utils)")
        pytest.skip("desktop-file-validate missing: apt-get install -y desktop-file-utils")
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    path = autostart.install(env, executable="/usr/bin/ollie-tray")
    result = subprocess.run([validator, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_cli_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["--install-autostart"]) == 0
    assert (tmp_path / "autostart" / "ollie-tray.desktop").is_file()
    assert main(["--remove-autostart"]) == 0
    assert not (tmp_path / "autostart" / "ollie-tray.desktop").exists()
    assert "removed" in capsys.readouterr().out


def test_icons_land_in_the_hicolor_theme(tmp_path: Path) -> None:
    from ollie_tray.desktop_integration import icon_dir, install_icons

    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    names = {p.name for p in install_icons(env)}
    assert {"ollie-tray.svg", "ollie-tray-idle.svg", "ollie-tray-pending.svg"} <= names
    assert (icon_dir(env) / "ollie-tray.svg").is_file()
    assert icon_dir(env) == tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps"


def test_autostart_installs_the_icon_it_names(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    entry = autostart.install(env, executable="/usr/bin/ollie-tray")
    assert "Icon=ollie-tray" in entry.read_text()
    assert (tmp_path / "data/icons/hicolor/scalable/apps/ollie-tray.svg").is_file()


def test_install_desktop_writes_a_valid_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["--install-desktop"]) == 0
    launcher = tmp_path / "data" / "applications" / "ollie-tray.desktop"
    assert launcher.is_file()
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        if os.environ.get("CI") == "true":
            pytest.fail("desktop-file-validate missing (apt-get install -y desktop-file-utils)")
        pytest.skip("desktop-file-validate missing: apt-get install -y desktop-file-utils")
    result = subprocess.run([validator, str(launcher)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
