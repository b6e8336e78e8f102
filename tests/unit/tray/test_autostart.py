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
    assert main(["--install-autostart"]) == 0
    assert (tmp_path / "autostart" / "ollie-tray.desktop").is_file()
    assert main(["--remove-autostart"]) == 0
    assert not (tmp_path / "autostart" / "ollie-tray.desktop").exists()
    assert "removed" in capsys.readouterr().out
