"""Start at login: the XDG autostart entry in ``~/.config/autostart``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ollie_tray.desktop_integration import install_icons, with_exec, write_atomically
from registry_core.paths import config_home, desktop_dir

ENTRY_NAME = "ollie-tray.desktop"


_FALLBACK = """[Desktop Entry]
Type=Application
Name=Ollie Tray
Comment=Approve or deny what your AI agents ask to do
Exec=ollie-tray
Icon=ollie-tray
Terminal=false
NoDisplay=true
X-GNOME-Autostart-enabled=true
"""


def _template_text() -> str:
    shipped = desktop_dir() / "ollie-tray-autostart.desktop"
    try:
        return shipped.read_text(encoding="utf-8")
    except OSError:
        return _FALLBACK


def autostart_path(env: Mapping[str, str]) -> Path:
    return config_home(env) / "autostart" / ENTRY_NAME


def is_enabled(env: Mapping[str, str]) -> bool:
    return autostart_path(env).is_file()


def install(env: Mapping[str, str], executable: str | None = None) -> Path:
    """Write the autostart entry (``Exec``: this installation) and install its icons."""
    target = autostart_path(env)
    write_atomically(target, with_exec(_template_text(), executable))
    install_icons(env)
    return target


def remove(env: Mapping[str, str]) -> bool:
    target = autostart_path(env)
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True
