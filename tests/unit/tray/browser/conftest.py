"""Fixtures for the Tool Browser tests: offscreen Qt, demo tools in tmp_path, a fixed host.

The loader sees a controlled ``$PATH`` (one directory with a fake
``journalctl``), so the demo tools evaluate the same on every machine:
``system_logs`` takes its journald variant, ``gpu_status`` is hidden,
``desktop_notify`` takes its terminal variant (no ``DISPLAY``).
"""

from __future__ import annotations

import os

# Before pytest-qt creates the QApplication: no display is needed or wanted.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from registry_core.dispatch import Dispatcher
from registry_core.registry import RegistryLoader

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "resources" / "examples"


@pytest.fixture
def demo_dirs(tmp_path: Path) -> list[Path]:
    """Copies of tools/, broken/ and shadowed/ (in that search order)."""
    dirs = []
    for name in ("tools", "broken", "shadowed"):
        target = tmp_path / "demo" / name
        shutil.copytree(EXAMPLES / name, target)
        dirs.append(target)
    return dirs


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """The loader's whole ``$PATH``: a directory holding a fake ``journalctl``."""
    directory = tmp_path / "bin"
    directory.mkdir()
    journalctl = directory / "journalctl"
    journalctl.write_text("#!/bin/sh\nexit 0\n")
    journalctl.chmod(0o755)
    return directory


@pytest.fixture
def host_env(tmp_path: Path, fake_bin: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": str(fake_bin), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


@pytest.fixture
def loader(demo_dirs: list[Path], host_env: dict[str, str]) -> RegistryLoader:
    return RegistryLoader(demo_dirs, env=host_env)


@pytest.fixture
def dispatcher(loader: RegistryLoader, tmp_path: Path) -> Dispatcher:
    """A real dispatcher (Landlock sandbox) with this process's PATH for interpreters."""
    # The suite's private XDG_RUNTIME_DIR (tests/conftest.py) lies in /tmp: with the
    # default {TMPDIR} of /tmp the broker socket's directory would be writable for the
    # tool, and the dispatcher refuses that (sandbox/guard.py).  A TMPDIR of its own.
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    return Dispatcher(registry=loader.load, env=env)


@pytest.fixture
def make_window(qtbot: QtBot, loader: RegistryLoader) -> Callable[..., BrowserWindow]:
    """``make_window(live=False, dispatcher=..., policies=...)``: a shown BrowserWindow."""

    def make(**kwargs: Any) -> BrowserWindow:
        kwargs.setdefault("live", False)
        window = BrowserWindow(kwargs.pop("loader", loader), **kwargs)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return make
