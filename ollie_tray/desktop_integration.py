"""Desktop integration for a per-user install: icons under the hicolor theme, the launcher.

Icons go to ``$XDG_DATA_HOME/icons/hicolor/scalable/apps`` under the names
the ``.desktop`` files and notifications use (the application id, and the
state icons ``ollie-tray-idle`` … ``ollie-tray-error``); the launcher to
``$XDG_DATA_HOME/applications/<APP_ID>.desktop`` with ``Exec`` pointing at
this installation, and the AppStream metainfo to ``$XDG_DATA_HOME/metainfo``.

Entries written before the application id existed (``ollie-tray.desktop``)
are moved over by :func:`migrate_legacy` at start.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ollie_tray.app_id import APP_ID, DESKTOP_FILE, LEGACY_DESKTOP_FILE, LEGACY_ID, METAINFO_FILE
from registry_core.paths import desktop_dir, own_program, resources_dir

LAUNCHER_NAME = DESKTOP_FILE


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
    icons = resources_dir() / "icons"
    for source in sorted([icons / f"{APP_ID}.svg", *icons.glob(f"{LEGACY_ID}-*.svg")]):
        destination = target / source.name
        shutil.copyfile(source, destination)
        installed.append(destination)
    return installed


def program_argv(executable: str | None = None) -> list[str]:
    """How to start this installation by absolute path, never by a bare name.

    Desktops run autostart entries through systemd's XDG autostart generator
    (GNOME, Plasma 6), which refuses an ``Exec`` it cannot find with the
    session's ``PATH``; a venv is rarely on it.  So: the ``ollie-tray`` script
    of the running installation (:func:`registry_core.paths.own_program`: beside
    this interpreter, or in the ``pip --user`` scheme's ``bin``), else this
    interpreter with ``-m ollie_tray`` -- never one found on ``PATH``, whose
    first entries may be a project directory a tool can write.
    """
    if executable:
        return [executable]
    own = own_program("ollie-tray")
    if own:
        return [own]
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


def with_exec(
    text: str, executable: str | None = None, extra_args: Sequence[str] | None = None
) -> str:
    """Every ``Exec=ollie-tray ARGS`` line pointed at this installation, ARGS kept.

    ``extra_args``, when given, replace the arguments of the main entry's
    ``Exec`` line (the first one; actions keep theirs).
    """
    lines = []
    first = True
    for line in text.splitlines():
        if not line.startswith("Exec="):
            lines.append(line)
            continue
        args = line.removeprefix("Exec=").split()[1:]
        if first and extra_args is not None:
            args = list(extra_args)
        first = False
        # The string-level escape of the file applies on top of Exec's quoting.
        lines.append("Exec=" + desktop_exec(executable, args).replace("\\", "\\\\"))
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def shipped_desktop_dir() -> Path:
    return desktop_dir()


def launcher_path(env: Mapping[str, str]) -> Path:
    return data_home(env) / "applications" / LAUNCHER_NAME


def metainfo_path(env: Mapping[str, str]) -> Path:
    return data_home(env) / "metainfo" / METAINFO_FILE


def install_launcher(env: Mapping[str, str], executable: str | None = None) -> Path:
    """The application-menu launcher (and the icons it names, and the AppStream metainfo)."""
    text = (shipped_desktop_dir() / LAUNCHER_NAME).read_text(encoding="utf-8")
    target = launcher_path(env)
    write_atomically(target, with_exec(text, executable))
    metainfo = (shipped_desktop_dir() / METAINFO_FILE).read_text(encoding="utf-8")
    write_atomically(metainfo_path(env), metainfo)
    install_icons(env)
    return target


def exec_args(text: str) -> list[str] | None:
    """The arguments after the program of an entry's first ``Exec`` line (None: no such line)."""
    for line in text.splitlines():
        if line.startswith("Exec="):
            try:
                # The file's string escape first, then Exec's own quoting.
                words = shlex.split(line.removeprefix("Exec=").replace("\\\\", "\\"))
            except ValueError:
                return []
            return words[1:]
    return None


def migrate_legacy(env: Mapping[str, str], executable: str | None = None) -> list[Path]:
    """Move entries and icons written under the old name to the application id.

    An old launcher becomes the new launcher; an old autostart entry becomes
    the new autostart entry with the arguments its ``Exec`` line carried (a
    person may have added ``--require-password`` there) and its ``Hidden``
    switch; the old application icon is removed.  Returns the entries written.
    Safe to run on every start: with nothing old left it does nothing.
    """
    from ollie_tray import autostart

    written: list[Path] = []
    old_launcher = data_home(env) / "applications" / LEGACY_DESKTOP_FILE
    old_autostart = autostart.autostart_path(env).with_name(LEGACY_DESKTOP_FILE)
    old_icon = icon_dir(env) / f"{LEGACY_ID}.svg"
    if old_launcher.is_file():
        written.append(install_launcher(env, executable))
        old_launcher.unlink()
    if old_autostart.is_file():
        text = old_autostart.read_text(encoding="utf-8", errors="replace")
        hidden = any(line.strip().lower() == "hidden=true" for line in text.splitlines())
        written.append(autostart.install(env, executable, exec_args(text) or [], hidden=hidden))
        old_autostart.unlink()
    if old_icon.is_file():
        if not written:
            install_icons(env)
        old_icon.unlink()
    return written
