"""The tray's "Remote hosts" menu: ollie-remote connections, listed, opened and closed.

Connections are read from ollie-remote's state files each time the menu
opens, so hosts connected from a terminal show up too.  "Connect to…" starts
``ollie-remote connect HOST`` as a child ``QProcess`` of the tray (stopped,
by its pid, when the tray quits); "Disconnect" sends SIGTERM to the host's
supervisor (after checking it is one), whoever started it.  Nothing here
blocks the GUI thread: a supervisor ends on its own and the next opening of
the menu no longer lists it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment
from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

from registry_core.errors import RemoteError
from registry_core.remote.connect import request_disconnect
from registry_core.remote.ssh import check_host
from registry_core.remote.state import Connection, live_connections, state_dir

log = logging.getLogger(__name__)
STOP_WAIT_MS = 5000


def state_words(conn: Connection) -> str:
    if conn.connected:
        return "connected"
    return "connecting" if conn.ssh_pid else "reconnecting"


class RemoteHosts(QObject):
    """Lists, starts and stops ollie-remote connections for the tray."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        notify: Callable[[str, str], None],
        parent: QObject | None = None,
        program: list[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.env = dict(env)
        self.notify = notify
        # How to run ollie-remote: this interpreter, so the tray's own package is used.
        self.program = program or [sys.executable, "-m", "registry_core.cli.remote"]
        self.processes: dict[str, QProcess] = {}
        self.finished_processes: list[QProcess] = []

    # --- reading --------------------------------------------------------------------

    def connections(self) -> list[Connection]:
        return live_connections(state_dir(self.env))

    def menu_entries(self) -> list[tuple[str, str]]:
        return [(c.host, state_words(c)) for c in self.connections()]

    # --- connect --------------------------------------------------------------------

    def ask_and_connect(self, parent: QWidget | None = None) -> None:
        host, ok = QInputDialog.getText(
            parent,
            "Connect to a remote host",
            "Host (an ssh alias or user@host; your ssh config, agent and known_hosts are used):",
            QLineEdit.EchoMode.Normal,
        )
        if ok and host.strip():
            self.connect_host(host.strip())

    def connect_host(self, host: str) -> QProcess | None:
        """Start ``ollie-remote connect host`` (None, with a message, when it cannot)."""
        try:
            check_host(host)
        except RemoteError as exc:
            self.notify("Remote hosts", str(exc))
            return None
        if any(c.host == host for c in self.connections()):
            self.notify("Remote hosts", f"{host} is already connected")
            return None
        running = self.processes.get(host)
        if running is not None and running.state() is not QProcess.ProcessState.NotRunning:
            self.notify("Remote hosts", f"already connecting to {host}")
            return None
        process = QProcess(self)
        environment = QProcessEnvironment()
        for key, value in self.env.items():
            environment.insert(key, value)
        process.setProcessEnvironment(environment)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        process.setStandardOutputFile(QProcess.nullDevice())
        process.finished.connect(
            lambda code, _status, h=host, p=process: self._finished(h, p, code)
        )
        self.processes[host] = process
        process.start(self.program[0], [*self.program[1:], "connect", host])
        return process

    def _finished(self, host: str, process: QProcess, code: int) -> None:
        err = bytes(process.readAllStandardError().data()).decode("utf-8", "replace")
        if self.processes.get(host) is process:
            del self.processes[host]
        if code != 0:
            lines = [line for line in err.splitlines() if line.strip()]
            detail = "\n".join(lines[-4:]) or f"exit status {code}"
            self.notify(f"Connection to {host} ended", detail)
        self.finished_processes.append(process)  # kept: never deleted inside its own signal

    # --- disconnect -----------------------------------------------------------------

    def disconnect_host(self, host: str) -> None:
        for conn in self.connections():
            if conn.host == host:
                try:
                    request_disconnect(conn)
                except RemoteError as exc:
                    self.notify("Remote hosts", str(exc))
                return
        child = self.processes.get(host)
        if child is not None:
            child.terminate()

    def shutdown(self) -> None:
        """Stop every connection this tray started (SIGTERM by pid, then wait)."""
        for host, process in list(self.processes.items()):
            if process.state() is QProcess.ProcessState.NotRunning:
                continue
            process.terminate()
            if not process.waitForFinished(STOP_WAIT_MS):
                log.warning("ollie-remote connect %s did not stop: killing it", host)
                process.kill()
                process.waitForFinished(STOP_WAIT_MS)
        self.processes.clear()
