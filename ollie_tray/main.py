"""``ollie-tray``: command line of the tray application.

Builds nothing at import time; :func:`main` parses arguments, handles the
one-shot options (autostart, asking a running instance to open its
browser), then starts Qt with asyncio on its loop (qasync) and runs
:class:`~ollie_tray.app.TrayApp`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from ollie_tray import settings
from ollie_tray.settings import TraySettings
from registry_core import paths
from registry_core.broker.serve.flood import raise_fd_limit
from registry_core.broker.serve.listen import (
    BrokerAlreadyRunningError,
    SocketSetupError,
    bind_socket,
)
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import BrokerClient
from registry_core.cli.argparser import add_version
from registry_core.errors import BrokerUnavailableError
from registry_core.logsetup import PLAIN_FORMAT, setup_logging
from registry_core.secure import harden_process


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ollie-tray",
        description="System-tray approver for Ollie tools: broker, dialogs, Tool Browser.",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="add the bundled example tools (shown as Demo tools) to your own",
    )
    p.add_argument(
        "--browser",
        action="store_true",
        help="open the Tool Browser (in the running instance if there is one)",
    )
    p.add_argument(
        "--pause",
        action="store_true",
        help="pause the running instance: every request is denied until resumed",
    )
    p.add_argument("--quit", action="store_true", help="quit the running instance")
    p.add_argument("--install-autostart", action="store_true", help="start Ollie Tray at login")
    p.add_argument("--remove-autostart", action="store_true", help="do not start at login")
    p.add_argument(
        "--install-desktop",
        action="store_true",
        help="add Ollie Tray to the application menu (launcher and hicolor icons)",
    )
    p.add_argument(
        "--countdown",
        type=int,
        default=None,
        metavar="SEC",
        help="seconds before an unanswered request is denied (default: countdown_s of"
        " tray.yaml in the ollie config directory, else 60)",
    )
    p.add_argument(
        "--require-password",
        action="store_true",
        help="an approval counts only after your login password (PAM); also"
        " OLLIE_TRAY_REQUIRE_PASSWORD=1",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    add_version(p)
    return p


DEMO_DIRS = ("tools", "broken", "shadowed")


def demo_tool_dirs() -> list[Path]:
    """The bundled example tools (read-only, in the installation): the "Demo tools"."""
    examples = paths.resources_dir() / "examples"
    return [examples / d for d in DEMO_DIRS if (examples / d).is_dir()]


def demo_env(env: dict[str, str]) -> dict[str, str]:
    """Normal mode plus the bundled examples as extra tools directories, searched last.

    One configuration: the same policies, audit log and socket as without
    ``--demo`` (so ``ollie-tools policy`` / ``audit`` and the tray agree), and the
    person's own tools directories first, so a tool they add shows up (and wins
    over an example of the same name).
    """
    out = dict(env)
    dirs = [*paths.tools_path(env), *demo_tool_dirs()]
    out["OLLIE_TOOLS_PATH"] = ":".join(str(d) for d in dirs)
    return out


def has_no_tools_of_their_own(env: dict[str, str]) -> bool:
    """No ``OLLIE_TOOLS_PATH`` and an empty (or absent) tools directory: ``make run``'s test.

    Such a person starts with the bundled demo tools, from the application menu
    as from a checkout; a directory that cannot be read counts as theirs (no demo).
    """
    if env.get("OLLIE_TOOLS_PATH"):
        return False
    try:
        with os.scandir(paths.default_tools_dir(env)) as entries:
            return next(entries, None) is None
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _has_tools(env: dict[str, str]) -> bool:
    for directory in paths.tools_path(env):
        try:
            with os.scandir(directory) as entries:
                if any(entry.name.endswith(".meta") for entry in entries):
                    return True
        except OSError:
            continue
    return False


def first_start_without_tools(user_env: dict[str, str], app_env: dict[str, str]) -> bool:
    """The first start of a user without tools of their own: show the Tool Browser once."""
    if _has_tools(user_env):
        return False
    marker = paths.state_home(app_env) / "ollie" / "welcome-shown"
    if marker.exists():
        return False
    try:
        marker.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        marker.touch()
    except OSError:
        return False
    return True


def _open_browser_in_running(socket_path: Path) -> int:
    try:
        with BrokerClient(socket_path, timeout=5) as client:
            reply = client.open_browser()
    except BrokerUnavailableError as exc:
        print(f"ollie-tray: {exc}", file=sys.stderr)
        return 1
    if isinstance(reply, m.AckReply):
        return 0
    message = reply.message if isinstance(reply, m.ErrorReply) else reply.op
    print(f"ollie-tray: the running broker cannot open a browser: {message}", file=sys.stderr)
    return 1


def _ask_running(socket_path: Path, member: str, paused: bool) -> int:
    from ollie_tray.control import ControlError, ask_running

    try:
        if member == "SetPaused":
            ask_running(socket_path, member, paused)
        else:
            ask_running(socket_path, member)
    except ControlError as exc:
        print(f"ollie-tray: {exc} (is it running for {socket_path}?)", file=sys.stderr)
        return 1
    return 0


def _migrate_desktop_entries(env: dict[str, str]) -> None:
    """Entries installed under the old desktop id move to the application id (once)."""
    from ollie_tray.desktop_integration import migrate_legacy

    try:
        for path in migrate_legacy(env):
            print(f"ollie-tray: desktop entry moved to {path}", file=sys.stderr)
    except OSError as exc:
        print(f"ollie-tray: cannot move the old desktop entries: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(verbose=args.verbose, fmt=PLAIN_FORMAT)
    env = dict(os.environ)
    if args.install_desktop or args.install_autostart or args.remove_autostart:
        _migrate_desktop_entries(env)
    if args.install_desktop:
        from ollie_tray.desktop_integration import install_launcher
        from ollie_tray.manuals import install_manuals

        print(f"ollie-tray: launcher written to {install_launcher(env)}")
        manuals = install_manuals(env)
        print(f"ollie-tray: {len(manuals)} manual pages and shell completions installed")
        return 0
    if args.install_autostart or args.remove_autostart:
        from ollie_tray import autostart

        if args.install_autostart:
            print(f"ollie-tray: autostart entry written to {autostart.install(env)}")
        elif autostart.remove(env):
            print("ollie-tray: autostart entry removed")
        else:
            print("ollie-tray: autostart was not enabled")
        return 0
    user_env = dict(env)
    if args.demo or has_no_tools_of_their_own(env):
        env = demo_env(env)
        os.environ.update(env)
    socket_path = paths.elevate_socket(env)
    if args.pause or args.quit:
        return _ask_running(socket_path, "SetPaused" if args.pause else "Quit", args.pause)
    raise_fd_limit()  # a flood of connections must not run out of descriptors first
    # Bind first, before Qt and the rest are imported: agents can connect at once
    # (their connections wait in the backlog until the event loop serves them), and
    # a live socket answers the single-instance question.
    listening: socket.socket | None = None
    bind_error: str | None = None
    try:
        listening = bind_socket(socket_path)
    except BrokerAlreadyRunningError:
        # Launched again (the application menu, a launcher action): show the running
        # instance's Tool Browser, the way in on desktops without a tray.
        print(f"ollie-tray: already running (a broker answers on {socket_path})", file=sys.stderr)
        return _open_browser_in_running(socket_path)
    except SocketSetupError as exc:
        bind_error = str(exc)
    else:
        print(f"ollie-tray: listening on {socket_path}", file=sys.stderr, flush=True)
    _migrate_desktop_entries(user_env)
    harden_process()
    if first_start_without_tools(user_env, env):
        args.browser = True
    args.settings = tray_settings(user_env, args)
    if args.settings.verbose:
        setup_logging(verbose=True, fmt=PLAIN_FORMAT)
    return _run_gui(env, args, listening, bind_error)


def tray_settings(env: dict[str, str], args: argparse.Namespace) -> TraySettings:
    """``tray.yaml`` (written with its defaults on the first start), the variable, the flags."""
    return settings.merged(
        settings.load(env),
        env,
        countdown=args.countdown,
        require_password=args.require_password,
        verbose=args.verbose,
    )


def _run_gui(
    env: dict[str, str],
    args: argparse.Namespace,
    listening: socket.socket | None,
    bind_error: str | None,
) -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from ollie_tray.app import AppOptions, TrayApp
    from ollie_tray.app_id import APP_ID
    from ollie_tray.icons import app_icon

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(qapp, QApplication)
    qapp.setApplicationName("Ollie Tray")
    qapp.setDesktopFileName(APP_ID)
    qapp.setQuitOnLastWindowClosed(False)
    qapp.setWindowIcon(app_icon())
    options = AppOptions(
        countdown_s=args.settings.countdown_s,
        arm_delay_ms=args.settings.arm_delay_ms,
        require_password=args.settings.require_password,
        open_browser=args.browser,
        demo=args.demo,
        listening=listening,
        bind_error=bind_error,
    )

    async def run() -> int:
        app = TrayApp(qapp, env, options)
        return await app.run()

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    try:
        with loop:
            code: int = loop.run_until_complete(run())
    finally:
        asyncio.set_event_loop(None)
    return code


def main_entry() -> None:
    sys.exit(main())
