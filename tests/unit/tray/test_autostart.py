"""Start at login: the XDG autostart entry is written, valid and removable."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ollie_tray import autostart
from ollie_tray.app_id import APP_ID
from ollie_tray.main import main


def test_install_and_remove(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert not autostart.is_enabled(env)
    path = autostart.install(env, executable="/opt/ollie tray/bin/ollie-tray")
    assert path == tmp_path / "cfg" / "autostart" / f"{APP_ID}.desktop"
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
    assert (tmp_path / "autostart" / f"{APP_ID}.desktop").is_file()
    assert main(["--remove-autostart"]) == 0
    assert not (tmp_path / "autostart" / f"{APP_ID}.desktop").exists()
    assert "removed" in capsys.readouterr().out


def test_icons_land_in_the_hicolor_theme(tmp_path: Path) -> None:
    from ollie_tray.desktop_integration import icon_dir, install_icons

    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    names = {p.name for p in install_icons(env)}
    assert {
        f"{APP_ID}.svg",
        "ollie-tray-idle.svg",
        "ollie-tray-pending.svg",
    } <= names
    assert (icon_dir(env) / f"{APP_ID}.svg").is_file()
    assert icon_dir(env) == tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps"


def test_autostart_installs_the_icon_it_names(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    entry = autostart.install(env, executable="/usr/bin/ollie-tray")
    assert f"Icon={APP_ID}" in entry.read_text()
    assert (tmp_path / "data/icons/hicolor/scalable/apps" / f"{APP_ID}.svg").is_file()


def test_install_desktop_writes_a_valid_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["--install-desktop"]) == 0
    launcher = tmp_path / "data" / "applications" / f"{APP_ID}.desktop"
    assert launcher.is_file()
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        if os.environ.get("CI") == "true":
            pytest.fail("desktop-file-validate missing (apt-get install -y desktop-file-utils)")
        pytest.skip("desktop-file-validate missing: apt-get install -y desktop-file-utils")
    result = subprocess.run([validator, str(launcher)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


def test_install_desktop_installs_the_metainfo(tmp_path: Path) -> None:
    from ollie_tray.desktop_integration import install_launcher, metainfo_path

    env = _env(tmp_path)
    install_launcher(env, executable="/usr/bin/ollie-tray")
    path = metainfo_path(env)
    assert path == tmp_path / "data" / "metainfo" / f"{APP_ID}.metainfo.xml"
    assert f"<id>{APP_ID}</id>" in path.read_text()


def test_old_entries_move_to_the_application_id(tmp_path: Path) -> None:
    from ollie_tray.desktop_integration import icon_dir, launcher_path, migrate_legacy

    env = _env(tmp_path)
    old_launcher = tmp_path / "data" / "applications" / "ollie-tray.desktop"
    old_autostart = tmp_path / "cfg" / "autostart" / "ollie-tray.desktop"
    old_icon = icon_dir(env) / "ollie-tray.svg"
    for path in (old_launcher, old_autostart, old_icon):
        path.parent.mkdir(parents=True, exist_ok=True)
    old_launcher.write_text("[Desktop Entry]\nType=Application\nName=x\nExec=ollie-tray\n")
    old_autostart.write_text(
        "[Desktop Entry]\nType=Application\nName=x\n"
        'Exec="/opt/old place/ollie-tray" --require-password --countdown 30\nHidden=true\n'
    )
    old_icon.write_text("<svg/>")

    written = migrate_legacy(env, executable="/usr/bin/ollie-tray")

    assert set(written) == {launcher_path(env), autostart.autostart_path(env)}
    assert not old_launcher.exists() and not old_autostart.exists() and not old_icon.exists()
    assert autostart.autostart_path(env).name == f"{APP_ID}.desktop"
    text = autostart.autostart_path(env).read_text()
    assert "Exec=/usr/bin/ollie-tray --require-password --countdown 30\n" in text
    assert "Hidden=true" in text
    assert f"Icon={APP_ID}" in text
    assert (icon_dir(env) / f"{APP_ID}.svg").is_file()
    assert migrate_legacy(env) == []  # nothing old is left: nothing to do


def test_no_old_entries_nothing_is_written(tmp_path: Path) -> None:
    from ollie_tray.desktop_integration import migrate_legacy

    env = _env(tmp_path)
    assert migrate_legacy(env) == []
    assert not (tmp_path / "cfg").exists() and not (tmp_path / "data").exists()


def test_an_old_autostart_entry_is_moved_when_the_tray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    old = tmp_path / "cfg" / "autostart" / "ollie-tray.desktop"
    old.parent.mkdir(parents=True)
    old.write_text("[Desktop Entry]\nType=Application\nName=x\nExec=ollie-tray --countdown 9\n")
    assert main(["--install-autostart"]) == 0
    assert not old.exists()
    assert autostart.is_enabled(_env(tmp_path))
