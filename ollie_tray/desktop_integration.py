"""Desktop integration for a per-user install: icons under the hicolor theme, the launcher.

Icons go to ``$XDG_DATA_HOME/icons/hicolor/scalable/apps`` under the names
the ``.desktop`` files and notifications use (``ollie-tray``, and the state
icons ``ollie-tray-idle`` … ``ollie-tray-error``); the launcher to
``$XDG_DATA_HOME/applications/ollie-tray.desktop`` with ``Exec`` pointing at
this installation.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from registry_core.paths import resources_dir

LAUNCHER_NAME = "ollie-tray.desktop"


def data_home(env: Mapping[str, str]) -> Path:
    value = env.get("XDG_DATA_HOME")
    if value:
        return Path(value)
    return Path(env.get("HOME") or Path.home()) / ".local" / "share"


def icon_dir(env: Mapping[str, str]) -> Path:
    return data_home(env) / "icons" / "hicolor" / "scalable" / "apps"


def install_icons(env: Mapping[str, str]) -> list[Path]:
    """Copy the app and tray-state icons into the user's hicolor theme."""
    target = icon_dir(env)
    target.mkdir(parents=True, exist_ok=True)
    installed = []
    for source in sorted((resources_dir() / "icons").glob("ollie-tray*.svg")):
        destination = target / source.name
        shutil.copyfile(source, destination)
        installed.append(destination)
    return installed


def desktop_exec(executable: str | None = None) -> str:
    """The ``Exec`` value for this installation's ``ollie-tray`` (quoted when needed)."""
    program = executable or shutil.which("ollie-tray") or "ollie-tray"
    if any(c in program for c in ' "\\`$'):
        escaped = program.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return program


def with_exec(text: str, executable: str | None = None) -> str:
    program = desktop_exec(executable)
    lines = [f"Exec={program}" if line.startswith("Exec=") else line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def install_launcher(env: Mapping[str, str], executable: str | None = None) -> Path:
    """The application-menu launcher (and the icons it names)."""
    shipped = Path(__file__).resolve().parent.parent / "desktop" / LAUNCHER_NAME
    text = shipped.read_text(encoding="utf-8")
    target = data_home(env) / "applications" / LAUNCHER_NAME
    write_atomically(target, with_exec(text, executable))
    install_icons(env)
    return target
