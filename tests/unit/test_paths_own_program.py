"""``paths.own_program``: Ollie's console scripts come from its own installation, never PATH."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from registry_core import paths
from registry_core.dispatch.gate_choice import askpass_program


def _exe(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


@pytest.fixture
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A venv-like ``bin`` holding the running interpreter; the user site is out of play."""
    bin_dir = tmp_path / "venv" / "bin"
    monkeypatch.setattr(sys, "executable", str(_exe(bin_dir / "python3")))
    monkeypatch.setattr(paths.site, "ENABLE_USER_SITE", False)
    return bin_dir


def test_the_script_next_to_the_interpreter(installation: Path) -> None:
    script = _exe(installation / "ollie-askpass")
    assert paths.own_program("ollie-askpass") == str(script)
    assert askpass_program() == str(script)


def test_one_first_on_path_is_never_taken(
    installation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = _exe(tmp_path / "project" / ".venv" / "bin" / "ollie-askpass")
    monkeypatch.setenv("PATH", f"{planted.parent}:/usr/bin:/bin")
    assert paths.own_program("ollie-askpass") is None
    assert askpass_program() is None


def test_a_file_that_cannot_run_is_none(installation: Path) -> None:
    _exe(installation / "ollie-askpass", mode=0o644)
    (installation / "ollie-elevate").mkdir()
    assert paths.own_program("ollie-askpass") is None
    assert paths.own_program("ollie-elevate") is None


def test_a_user_install_takes_the_user_schemes_bin(
    installation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This package lives in the user's site-packages: its scripts are in ~/.local/bin.
    base = tmp_path / "home" / ".local"
    site_packages = base / "lib" / "python3" / "site-packages"
    monkeypatch.setattr(paths.site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(paths.site, "getusersitepackages", lambda: str(site_packages))
    monkeypatch.setattr(paths.site, "getuserbase", lambda: str(base))
    monkeypatch.setattr(paths, "__file__", str(site_packages / "registry_core" / "paths.py"))
    script = _exe(base / "bin" / "ollie-askpass")
    assert paths.own_program("ollie-askpass") == str(script)
    # Not installed there: that directory is not Ollie's, and is not looked at.
    monkeypatch.setattr(paths, "__file__", str(tmp_path / "src" / "registry_core" / "paths.py"))
    assert paths.own_program("ollie-askpass") is None
