"""Start at login: the XDG autostart entry in ``~/.config/autostart``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ollie_tray.app_id import APP_ID, DESKTOP_FILE
from ollie_tray.desktop_integration import install_icons, with_exec, write_atomically
from registry_core.paths import config_home, desktop_dir

ENTRY_NAME = DESKTOP_FILE


_FALLBACK = f"""[Desktop Entry]
Type=Application
Name=Ollie Tray
Comment=Approve or deny what your AI agents ask to do
Exec=ollie-tray
Icon={APP_ID}
Terminal=false
NoDisplay=true
X-GNOME-Autostart-enabled=true
"""


def _template_text() -> str:
    shipped = desktop_dir() / f"{APP_ID}-autostart.desktop"
    try:
        return shipped.read_text(encoding="utf-8")
    except OSError:
        return _FALLBACK


def autostart_path(env: Mapping[str, str]) -> Path:
    return config_home(env) / "autostart" / ENTRY_NAME


def is_enabled(env: Mapping[str, str]) -> bool:
    return autostart_path(env).is_file()


def install(
    env: Mapping[str, str],
    executable: str | None = None,
    args: Sequence[str] | None = None,
    *,
    hidden: bool = False,
) -> Path:
    """Write the autostart entry (``Exec``: this installation) and install its icons.

    ``args``: the arguments of its ``Exec`` line (default: the shipped entry's);
    ``hidden``: written with ``Hidden=true`` (the desktop's "disabled").
    """
    target = autostart_path(env)
    text = with_exec(_template_text(), executable, args)
    if hidden:
        text += "Hidden=true\n"
    write_atomically(target, text)
    install_icons(env)
    return target


def remove(env: Mapping[str, str]) -> bool:
    target = autostart_path(env)
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True
