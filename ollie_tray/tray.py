"""The system-tray icon and its menu: state in the icon and tooltip, actions in the menu.

Without a system tray (some GNOME setups) the app still works: dialogs and
notifications appear normally and :class:`TrayIcon` says so once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon, QWidget

from ollie_tray.icons import TrayState, state_icon
from registry_core.broker.decide.core import Pending
from registry_core.broker.decide.denials import Denial


@dataclass
class TrayActions:
    """What the menu's entries do (wired in app.py)."""

    open_request: Callable[[str], None]
    tool_browser: Callable[[], None]
    policies: Callable[[], None]
    audit_log: Callable[[], None]
    set_paused: Callable[[bool], None]
    set_autostart: Callable[[bool], None]
    autostart_enabled: Callable[[], bool]
    quit: Callable[[], None]
    # ollie-remote (optional): (host, state words) of live connections, read when
    # the "Remote hosts" submenu opens; "Connect to…"; "Disconnect HOST".
    remote_hosts: Callable[[], list[tuple[str, str]]] | None = None
    connect_remote: Callable[[], None] | None = None
    disconnect_remote: Callable[[str], None] | None = None
    # "Deny all pending" (optional): every queued request and the open one.
    deny_all: Callable[[], None] | None = None
    # Why "Start at login" cannot be used now ("" when it can), e.g. in demo mode.
    autostart_unavailable: Callable[[], str] | None = None
    # The last few denials nobody made by hand (optional), newest first, with reasons.
    recent_denials: Callable[[], list[Denial]] | None = None
    # In demo mode: what the "Demo tools" line says (the bundled examples added, read-only).
    demo_tools: Callable[[], str] | None = None
    # "Settings…" (optional): the window for the common entries of tray.yaml.
    settings: Callable[[], None] | None = None


def tooltip_text(state: TrayState, pending: int, detail: str = "") -> str:
    words = {
        TrayState.IDLE: "Ollie Tray: no pending requests",
        TrayState.PENDING: f"Ollie Tray: {pending} request{'s' if pending != 1 else ''} waiting",
        TrayState.PAUSED: "Ollie Tray: paused, every request is denied",
        TrayState.ERROR: "Ollie Tray: error",
    }
    text = words[state]
    return f"{text}\n{detail}" if detail else text


class TrayIcon(QSystemTrayIcon):
    def __init__(self, actions: TrayActions, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.actions = actions
        self.state = TrayState.IDLE
        self.detail = ""
        self.paused = False
        self.menu = QMenu()
        self.menu.setAccessibleName("Ollie Tray menu")
        self.setContextMenu(self.menu)
        self.activated.connect(self._activated)
        self._pending: list[Pending] = []
        # Called after every change of state, icon or tooltip (the SNI export listens).
        self.state_listeners: list[Callable[[], None]] = []
        # One submenu for the icon's lifetime, refilled whenever it opens.
        self.remote_menu = QMenu("&Remote hosts")
        self.remote_menu.setAccessibleName("Remote hosts")
        self.remote_menu.aboutToShow.connect(self.rebuild_remote_menu)
        if actions.remote_hosts is not None:
            self.rebuild_remote_menu()
        self.rebuild_menu()
        self.update_state()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason is QSystemTrayIcon.ActivationReason.Trigger and self._pending:
            self.actions.open_request(self._pending[0].request.id)

    def set_pending(self, pending: Sequence[Pending]) -> None:
        self._pending = list(pending)
        self.update_state()
        self.rebuild_menu()

    def set_error(self, detail: str) -> None:
        self.state = TrayState.ERROR
        self.detail = detail
        self.setIcon(state_icon(TrayState.ERROR))
        self.setToolTip(tooltip_text(TrayState.ERROR, 0, detail))
        self._tell_listeners()

    def update_state(self) -> None:
        if self.state is TrayState.ERROR:
            return
        if self.paused:
            self.state = TrayState.PAUSED
        elif self._pending:
            self.state = TrayState.PENDING
        else:
            self.state = TrayState.IDLE
        self.setIcon(state_icon(self.state, len(self._pending)))
        self.setToolTip(tooltip_text(self.state, len(self._pending), self.detail))
        self._tell_listeners()

    def _tell_listeners(self) -> None:
        for listener in list(self.state_listeners):
            listener()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def first_pending_id(self) -> str | None:
        return self._pending[0].request.id if self._pending else None

    def rebuild_menu(self) -> None:
        menu = self.menu
        menu.clear()
        header = menu.addAction(
            f"{len(self._pending)} pending request{'s' if len(self._pending) != 1 else ''}"
            if self._pending
            else "No pending requests"
        )
        header.setEnabled(False)
        header.setObjectName("pending-header")  # a stable dbusmenu id across counts
        for item in self._pending:
            req = item.request
            label = f"{req.tool} — {req.what}" + ("" if item.showing else " (queued)")
            action = menu.addAction(label)
            action.setObjectName(f"request:{req.id}")
            action.triggered.connect(lambda _=False, rid=req.id: self.actions.open_request(rid))
        if self._pending and self.actions.deny_all is not None:
            deny_all = menu.addAction(f"Deny all {len(self._pending)} pending")
            deny_all.setObjectName("deny-all")
            deny_all.triggered.connect(self.actions.deny_all)
        self._add_denials(menu)
        menu.addSeparator()
        menu.addAction("Tool &Browser…").triggered.connect(self.actions.tool_browser)
        demo = self.actions.demo_tools() if self.actions.demo_tools else ""
        if demo:
            note = menu.addAction(demo)
            note.setObjectName("demo-tools")
            note.setToolTip(
                "Shown in the Tool Browser with the demo badge; your own tools come first"
            )
            note.triggered.connect(self.actions.tool_browser)
        menu.addAction("&Policies…").triggered.connect(self.actions.policies)
        menu.addAction("&Audit log…").triggered.connect(self.actions.audit_log)
        if self.actions.settings is not None:
            menu.addAction("S&ettings…").triggered.connect(self.actions.settings)
        if self.actions.remote_hosts is not None:
            menu.addMenu(self.remote_menu)
        menu.addSeparator()
        pause = QAction("Pause (&deny everything)", menu)  # P is &Policies…
        pause.setCheckable(True)
        pause.setChecked(self.paused)
        pause.toggled.connect(self._toggle_pause)
        menu.addAction(pause)
        autostart = QAction("&Start at login", menu)
        autostart.setCheckable(True)
        why_not = self.actions.autostart_unavailable() if self.actions.autostart_unavailable else ""
        if why_not:
            autostart.setText(f"&Start at login ({why_not})")
            autostart.setEnabled(False)
        else:
            autostart.setChecked(self.actions.autostart_enabled())
        autostart.setObjectName("autostart")
        autostart.toggled.connect(self.actions.set_autostart)
        menu.addAction(autostart)
        menu.addSeparator()
        menu.addAction("&Quit").triggered.connect(self.actions.quit)

    def _add_denials(self, menu: QMenu) -> None:
        """ "Recently denied": the last few denials nobody made by hand, and why."""
        if self.actions.recent_denials is None:
            return
        denials = self.actions.recent_denials()
        if not denials:
            return
        menu.addSeparator()
        menu.addAction("Recently denied (not by you):").setEnabled(False)
        for denial in denials:
            when = time.strftime("%H:%M", time.localtime(denial.time))
            item = menu.addAction(f"{when}  {denial.line()}")
            item.setToolTip(denial.reason)
            item.triggered.connect(self.actions.audit_log)

    def rebuild_remote_menu(self) -> None:
        """Connected hosts (from ollie-remote's state files, read now), each with
        Disconnect, then "Connect to…"."""
        menu = self.remote_menu
        menu.clear()
        hosts = self.actions.remote_hosts() if self.actions.remote_hosts is not None else []
        if not hosts:
            menu.addAction("No remote hosts connected").setEnabled(False)
        for host, state in hosts:
            menu.addAction(f"{host} — {state}").setEnabled(False)
            disconnect = menu.addAction(f"Disconnect {host}")
            disconnect.triggered.connect(lambda _=False, h=host: self._disconnect_remote(h))
        menu.addSeparator()
        connect = menu.addAction("&Connect to…")
        connect.setEnabled(self.actions.connect_remote is not None)
        connect.triggered.connect(self._connect_remote)

    def _connect_remote(self) -> None:
        if self.actions.connect_remote is not None:
            self.actions.connect_remote()

    def _disconnect_remote(self, host: str) -> None:
        if self.actions.disconnect_remote is not None:
            self.actions.disconnect_remote(host)

    def _toggle_pause(self, paused: bool) -> None:
        self.paused = paused
        self.actions.set_paused(paused)
        self.update_state()

    def action_texts(self) -> list[str]:
        return [a.text() for a in self.menu.actions() if not a.isSeparator()]
