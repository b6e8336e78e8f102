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
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from registry_core.paths import desktop_dir, resources_dir

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


def program_argv(executable: str | None = None) -> list[str]:
    """How to start this installation by absolute path, never by a bare name.

    Desktops run autostart entries through systemd's XDG autostart generator
    (GNOME, Plasma 6), which refuses an ``Exec`` it cannot find with the
    session's ``PATH``; a venv is rarely on it.  So: the ``ollie-tray`` script
    beside this interpreter (a venv or a ``pip --user`` install), else the one
    on ``PATH`` (made absolute), else this interpreter with ``-m ollie_tray``.
    """
    if executable:
        return [executable]
    beside = Path(sys.executable).parent / "ollie-tray"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.absolute())]
    found = shutil.which("ollie-tray")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "ollie_tray"]


def _quote(arg: str) -> str:
    """One ``Exec`` argument, quoted as the Desktop Entry specification says."""
    if not any(c in arg for c in " \t\n\"'\\><~|&;$*?#()`"):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
    return '"' + escaped.replace("$", "\\$") + '"'


def desktop_exec(executable: str | None = None, args: Sequence[str] = ()) -> str:
    """The ``Exec`` value for this installation's ``ollie-tray`` (quoted when needed)."""
    return " ".join(_quote(a) for a in [*program_argv(executable), *args])


def with_exec(text: str, executable: str | None = None) -> str:
    """Every ``Exec=ollie-tray ARGS`` line pointed at this installation, ARGS kept."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("Exec="):
            lines.append(line)
            continue
        args = line.removeprefix("Exec=").split()[1:]
        # The string-level escape of the file applies on top of Exec's quoting.
        lines.append("Exec=" + desktop_exec(executable, args).replace("\\", "\\\\"))
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def install_launcher(env: Mapping[str, str], executable: str | None = None) -> Path:
    """The application-menu launcher (and the icons it names)."""
    shipped = desktop_dir() / LAUNCHER_NAME
    text = shipped.read_text(encoding="utf-8")
    target = data_home(env) / "applications" / LAUNCHER_NAME
    write_atomically(target, with_exec(text, executable))
    install_icons(env)
    return target
