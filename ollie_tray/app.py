"""Wiring of the tray application: every object is built and connected here, once.

Threading: everything runs on the Qt main thread; asyncio runs on the Qt
loop (qasync), so the broker server, D-Bus notifications and dialogs share
one thread and never block each other.  Keyring calls and tool runs happen
in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QSystemTrayIcon, QWidget

from ollie_tray import autostart, control
from ollie_tray.app_id import APP_ID
from ollie_tray.dialogs.real_input import build_judge
from ollie_tray.icons import app_icon
from ollie_tray.keyring_consent import KeyringConsent, consent_file
from ollie_tray.notify import Notifier
from ollie_tray.qt_prompter import PrompterSettings, QtPrompter
from ollie_tray.remote_hosts import RemoteHosts
from ollie_tray.secret_store import PasswordVault
from ollie_tray.signals import SignalBridge
from ollie_tray.sni.qt_tray import SniTray
from ollie_tray.state_report import STATE_FILE_ENV, StateReport
from ollie_tray.tray import TrayActions, TrayIcon
from ollie_tray.windows.common import count_text
from registry_core import paths
from registry_core.broker.decide.core import Broker, BrokerConfig, Pending, QueueInfo
from registry_core.broker.decide.denials import Denial, DenialBatcher, DenialLog
from registry_core.broker.record.audit import AuditLog, audit_log_from_env
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.serve.server import (
    BrokerAlreadyRunningError,
    BrokerServer,
    SocketSetupError,
)
from registry_core.dispatch import Dispatcher
from registry_core.dispatch.broker_gate import BrokerGate
from registry_core.dispatch.gate_choice import askpass_program
from registry_core.errors import ElevationError
from registry_core.registry import RegistryLoader
from registry_core.registry.live import LiveRegistry
from registry_core.remote.identify import make_identifier
from registry_core.remote.state import state_dir as remote_state_dir

log = logging.getLogger(__name__)
FULL_RESCAN_MS = 30_000
TRAY_RECHECK_MS = 2_000
DEMO_NO_AUTOSTART = "not in demo mode: run ollie-tray without --demo to enable it"


@dataclass
class AppOptions:
    countdown_s: int = 60
    arm_delay_ms: int = 700
    require_password: bool = False  # the login password confirms approvals (login_check.py)
    open_browser: bool = False
    # --demo is a trial with the bundled example tools: it never enables autostart.
    demo: bool = False
    # Bound before Qt started (main.py), or why binding failed; None: bind in run().
    listening: socket.socket | None = None
    bind_error: str | None = None


class TrayApp:
    """The running tray: registry, broker socket, dialogs, notifications, windows."""

    def __init__(self, qapp: QApplication, env: dict[str, str], options: AppOptions) -> None:
        self.qapp = qapp
        # Closing the last dialog must not end a tray that lives in the panel.
        qapp.setQuitOnLastWindowClosed(False)
        self.env = env
        self.options = options
        self.host = socket.gethostname()
        self.socket_path = paths.elevate_socket(env)
        self.loader = RegistryLoader(
            paths.tools_path(env), env, cache_dir=paths.scan_cache_dir(env)
        )
        # The broker's registry, refreshed per request as ollie-broker's is (the same
        # code: registry_core/registry/live.py); loads the tools now.
        self.live = LiveRegistry(self.loader)
        self.problems: list[str] = []
        self.policies = PolicyStore(paths.policies_file(env), on_problem=self._problem)
        self.audit: AuditLog = audit_log_from_env(paths.audit_file(env), env)
        self.vault = PasswordVault()
        # Who may approve: real input only (dialogs/real_input.py); on X11 this
        # installs the native event filter that sees each click's source device.
        self.judge = build_judge(qapp.platformName(), env, install=qapp)
        self.prompter = QtPrompter(
            vault=self.vault,
            consent=KeyringConsent(consent_file(env)),
            settings=PrompterSettings(
                options.countdown_s,
                options.arm_delay_ms,
                self.judge,
                require_password=options.require_password,
            ),
            on_dialog=self._dialog_changed,
            # The broker is made just below and asks this prompter: looked up per call.
            queue_info=self._queue_info,
            deny_all=self._deny_queued,  # the dialog's "Deny all pending"
        )
        # Denials nobody made by hand: in the menu, and one grouped low-urgency notification.
        self.denials = DenialLog()
        self._denial_batcher = DenialBatcher()
        self.broker = Broker(
            denials=self.denials,
            registry=self.live.current,
            prompter=self.prompter,
            policies=self.policies,
            audit=self.audit,
            config=BrokerConfig(host=self.host, prompt_timeout=float(options.countdown_s)),
        )
        self.server = BrokerServer(
            self.broker,
            self.socket_path,
            on_open_browser=self.show_browser,
            # Connections forwarded by ollie-remote are labelled remote (docs/remote.md).
            identify=make_identifier(remote_state_dir(env)),
        )
        self.remote = RemoteHosts(env, notify=self._tray_message)
        self._quit = asyncio.Event()
        self._known_pending: set[str] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self._windows: dict[str, QWidget] = {}
        # The tray's state and menu live in one TrayIcon.  It is shown through our own
        # StatusNotifierItem (ollie_tray/sni) whenever a watcher runs, else as Qt's icon
        # (XEmbed on X11) whenever a tray is there; _place_icon re-decides as they come
        # and go.  Without either, dialogs, notifications and the Browser carry on.
        self.tray: TrayIcon | None = TrayIcon(self._actions())
        self.sni = SniTray(
            self.tray,
            on_registered=lambda _registered: self._place_icon(),
            on_activation_token=self._set_activation_token,
            on_activate=self._icon_activated,
        )
        self._icon_place = QTimer()
        self._icon_place.setInterval(TRAY_RECHECK_MS)
        self._icon_place.timeout.connect(self._place_icon)
        self._said_no_tray = False
        self._activation_token: str | None = None
        self._dialog: QDialog | None = None
        self.notifier = Notifier(
            on_review=self.open_request,
            on_deny=self.prompter.deny,
            on_activation_token=self._set_activation_token,
            fallback=self._tray_message,
            icon=str(paths.resources_dir() / "icons" / f"{APP_ID}.svg"),
        )
        self.broker.subscribe(self._broker_changed)
        self.denials.subscribe(self._denied)
        self._rescan = QTimer()
        self._rescan.setInterval(FULL_RESCAN_MS)
        self._rescan.timeout.connect(self._full_rescan)
        # SIGHUP (a closed terminal) takes the same shutdown path as SIGTERM.
        quit_on = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        self._signals = SignalBridge(self._on_signal, quit_on)
        # Test hook, off by default: see ollie_tray/state_report.py.
        self._state_report: StateReport | None = None
        if env.get(STATE_FILE_ENV):
            self._state_report = StateReport(
                Path(env[STATE_FILE_ENV]),
                browser=lambda: self._windows.get("browser"),
                pending=lambda: len(self.broker.pending),
                tray_state=lambda: self.tray.state.value if self.tray is not None else None,
            )
            self._state_report.start()

    # --- wiring helpers ---------------------------------------------------------

    def _actions(self) -> TrayActions:
        return TrayActions(
            open_request=self.open_request,
            tool_browser=self.show_browser,
            policies=self.show_policies,
            audit_log=self.show_audit,
            settings=self.show_settings,
            set_paused=self.broker.set_paused,
            set_autostart=self.set_autostart,
            autostart_enabled=lambda: autostart.is_enabled(self.env),
            autostart_unavailable=lambda: DEMO_NO_AUTOSTART if self.options.demo else "",
            quit=self.quit,
            deny_all=self.deny_all_pending,
            remote_hosts=self.remote.menu_entries,
            connect_remote=self.remote.ask_and_connect,
            disconnect_remote=self.remote.disconnect_host,
            recent_denials=lambda: self.denials.recent(5),
            demo_tools=self._demo_tools_text,
        )

    def _demo_tools_text(self) -> str:
        """ "Demo tools: N bundled examples (read-only)" when they are loaded, else ""."""
        examples = os.fspath(paths.resources_dir() / "examples") + os.sep
        count = sum(1 for t in self.loader.current.all() if t.source_file.startswith(examples))
        if not (self.options.demo or count):
            return ""
        return f"Demo tools: {count_text(count, 'bundled example')} (read-only)"

    def _denied(self, denial: Denial) -> None:
        """An unattended denial: refresh the menu; notify now or when the interval ends."""
        if self.tray is not None:
            self.tray.rebuild_menu()
        delay = self._denial_batcher.add(denial, time.monotonic())
        if delay is not None:
            QTimer.singleShot(int(delay * 1000), self._flush_denials)

    def _flush_denials(self) -> None:
        batch = self._denial_batcher.flush(time.monotonic())
        if batch:
            self._spawn(self._notify_denials(batch))

    async def _notify_denials(self, batch: list[Denial]) -> None:
        await self.notifier.notify_denials(batch)

    def _problem(self, text: str) -> None:
        self.problems.append(text)
        log.warning("%s", text)
        self._tray_message("Ollie Tray: policy file problem", text)

    def _tray_message(self, title: str, body: str) -> None:
        if self.tray is not None and self.tray.isVisible():
            self.tray.showMessage(title, body, app_icon(), 10_000)
        else:
            print(f"ollie-tray: {title}: {body}", file=sys.stderr)

    def _dialog_changed(self, dialog: QDialog | None) -> None:
        self._dialog = dialog
        if dialog is not None:
            dialog.setWindowIcon(app_icon())
            # Ask for attention (urgency on X11, xdg-activation on Wayland): a
            # compositor may refuse focus to a window nobody clicked, never to this.
            QApplication.alert(dialog)

    # --- the icon ---------------------------------------------------------------

    def _place_icon(self) -> None:
        """Our StatusNotifierItem when a watcher has it; else Qt's icon when a tray exists."""
        tray = self.tray
        if tray is None:
            return
        if self.sni.export.registered:
            tray.hide()
        elif QSystemTrayIcon.isSystemTrayAvailable():
            tray.show()
        else:
            tray.hide()
            if not self._said_no_tray:
                self._said_no_tray = True
                print(
                    "ollie-tray: no system tray available yet; running without an icon "
                    "(dialogs, notifications and the Tool Browser still work)",
                    file=sys.stderr,
                )

    def _icon_activated(self) -> None:
        """A click on the icon: the waiting request, else the Tool Browser."""
        first = self.tray.first_pending_id() if self.tray is not None else None
        if first is not None:
            self.open_request(first)
        else:
            self.show_browser()

    def _set_activation_token(self, token: str) -> None:
        """A token from the notification server or the tray host, for the next raise."""
        self._activation_token = token or None

    def _use_activation_token(self) -> None:
        # Qt's Wayland xdg-shell takes the token from this variable on the next
        # activation request (and clears it); X11 ignores it.
        token, self._activation_token = self._activation_token, None
        if token:
            os.environ["XDG_ACTIVATION_TOKEN"] = token

    def _broker_changed(self) -> None:
        pending: list[Pending] = list(self.broker.pending.values())
        ids = {p.request.id for p in pending}
        for item in pending:
            if item.request.id not in self._known_pending:
                self._spawn(self.notifier.request_raised(item.request))
        for gone in self._known_pending - ids:
            self._spawn(self.notifier.request_decided(gone))
        self._known_pending = ids
        if self.tray is not None:
            self.tray.set_pending(pending)
        self.prompter.queue_changed()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a notification call in the background, keeping a reference until done."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_signal(self, signum: int) -> None:
        log.info("signal %d: quitting", signum)
        self.quit()

    # --- actions ----------------------------------------------------------------

    def _queue_info(self, request_id: str) -> QueueInfo | None:
        """Where a request stands in the broker's queue (the dialog's "1 of N")."""
        return self.broker.queue_info(request_id)

    def _deny_queued(self) -> None:
        self.broker.deny_pending()

    def deny_all_pending(self) -> None:
        """Deny every pending request: the queued ones at their turn, the open one now."""
        self.broker.deny_pending()
        current = self.prompter.current_request_id
        if current is not None:
            self.prompter.deny(current)

    def open_request(self, request_id: str) -> None:
        self._use_activation_token()
        self.prompter.raise_dialog()
        if self._dialog is not None:
            QApplication.alert(self._dialog)

    def set_paused(self, paused: bool) -> None:
        """Pause or resume from outside the menu (the launcher's action), menu kept in step."""
        self.broker.set_paused(paused)
        if self.tray is not None:
            self.tray.paused = paused
            self.tray.update_state()
            self.tray.rebuild_menu()

    def set_autostart(self, enabled: bool) -> None:
        if self.options.demo:
            self._tray_message("Ollie Tray", f"Start at login: {DEMO_NO_AUTOSTART}")
            return
        if enabled:
            autostart.install(self.env)
        else:
            autostart.remove(self.env)

    def _show(self, key: str, factory: object) -> None:
        window = self._windows.get(key)
        if window is None:
            assert callable(factory)
            window = factory()
            assert isinstance(window, QWidget)
            self._windows[key] = window
        self._use_activation_token()
        window.show()
        window.raise_()
        window.activateWindow()

    def show_browser(self) -> None:
        from ollie_tray.browser.window import BrowserWindow

        def make() -> QWidget:
            gate = BrokerGate(self.socket_path)
            dispatcher = Dispatcher(
                registry=self.live.current,
                env=self.env,
                gate=gate,
                askpass=askpass_program(),
            )
            window = BrowserWindow(
                self.loader, dispatcher=dispatcher, policies=self.policies, env=self.env
            )
            if self.tray is not None:
                # The tray's own menu (pending requests, Policies, Audit, Pause, Quit…) in
                # the window too: without a tray (GNOME) nothing is reachable only there.
                self.tray.menu.setTitle("&Ollie Tray")
                window.menuBar().addMenu(self.tray.menu)
            return window

        self._show("browser", make)

    def show_policies(self) -> None:
        from ollie_tray.windows.policies import PoliciesWindow

        self._show(
            "policies",
            lambda: PoliciesWindow(
                self.policies,
                registry=self.live.current,
                host=self.host,
                actions=self.broker.actions,
            ),
        )

    def show_audit(self) -> None:
        from ollie_tray.windows.audit import AuditWindow

        self._show("audit", lambda: AuditWindow(self.audit))

    def show_settings(self) -> None:
        from ollie_tray.windows.settings import SettingsWindow

        self._show("settings", lambda: SettingsWindow(self.env))

    def quit(self) -> None:
        self._quit.set()

    # --- registry liveness ----------------------------------------------------

    def _start_watching(self) -> None:
        """Apply changes as they happen too (for the windows), not only per request."""
        fd = self.live.fileno()
        if fd is None:  # no inotify: every request rescans (registry/live.py)
            return
        asyncio.get_running_loop().add_reader(fd, self._fs_changed)
        self._rescan.start()

    def _fs_changed(self) -> None:
        self.live.current()

    def _full_rescan(self) -> None:
        self.loader.load()

    # --- run --------------------------------------------------------------------

    async def run(self) -> int:
        try:
            if self.options.bind_error is not None:
                raise SocketSetupError(self.options.bind_error)
            await self.server.start(self.options.listening)
        except BrokerAlreadyRunningError as exc:
            print(f"ollie-tray: {exc}", file=sys.stderr)
            self._signals.close()
            if self.tray is not None:
                self.tray.hide()
            return 1
        except ElevationError as exc:
            message = f"cannot listen on {self.socket_path}: {exc}"
            print(f"ollie-tray: {message}", file=sys.stderr)
            if self.tray is not None:
                self.tray.set_error(message)
            self._tray_message("Ollie Tray cannot serve requests", message)
        else:
            if self.options.listening is None:
                print(f"ollie-tray: listening on {self.socket_path}", file=sys.stderr, flush=True)
        self._start_watching()
        # Notifications first: a request may already be waiting in the backlog.
        await self.notifier.start()
        await self.sni.start()
        self._place_icon()
        if QGuiApplication.platformName() == "xcb":
            # Only X11 has XEmbed trays that may appear later (a watcher's comings
            # and goings are signalled; this polls for the tray selection).
            self._icon_place.start()
        # Last: owning this name tells a second launch (and tests) the tray is up.
        await self.sni.export.publish(
            control.PATH,
            control.TrayControl(self.show_browser, self.set_paused, self.quit),
            control.bus_name(self.socket_path),
        )
        if self.options.open_browser:
            self.show_browser()
        await self._quit.wait()
        await self.shutdown()
        return 0

    async def shutdown(self) -> None:
        """Deny everything pending, remove the socket, close windows and the bus."""
        if self._state_report is not None:
            self._state_report.stop()
        await self.server.close()
        self._rescan.stop()
        fd = self.live.fileno()
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
        self.live.close()
        await self.notifier.close()
        self._icon_place.stop()
        await self.sni.close()
        self.remote.shutdown()
        for window in self._windows.values():
            window.close()
        if self.tray is not None:
            self.tray.hide()
        self._signals.close()
