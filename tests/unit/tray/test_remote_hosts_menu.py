"""The tray's "Remote hosts" submenu and the controller that starts and stops connections."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from tray_actions import recorder, recording_actions

from ollie_tray.remote_hosts import RemoteHosts
from ollie_tray.tray import TrayActions, TrayIcon
from registry_core.remote.state import Connection, state_dir, write_connection

# A stand-in for "ollie-remote connect HOST": records itself like a supervisor and
# runs until SIGTERM.  Its command line says ollie-remote (the disconnect check).
FAKE_CONNECT = """
import os, signal, sys, time
from registry_core.remote.state import Connection, state_dir, write_connection, remove_connection
host = sys.argv[-1]
directory = state_dir(os.environ)
def stop(*_):
    remove_connection(directory, host, os.getpid())
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
write_connection(directory, Connection(host=host, pid=os.getpid(), remote_socket="/r",
                 local_socket="/l", since=time.time(), ssh_pid=os.getpid(), connected=True))
if host == "fails":
    print("ollie-remote: the host key of fails is not known here", file=sys.stderr)
    remove_connection(directory, host, os.getpid())
    sys.exit(1)
while True:
    signal.pause()
"""


def actions(calls: list[tuple[str, Any]], hosts: list[tuple[str, str]]) -> TrayActions:
    rec = recorder(calls)
    return recording_actions(
        calls,
        remote_hosts=lambda: list(hosts),
        connect_remote=rec("connect"),
        disconnect_remote=rec("disconnect"),
    )


def texts(menu: Any) -> list[str]:
    return [a.text() for a in menu.actions() if not a.isSeparator()]


def test_the_submenu_lists_hosts_when_it_opens(qapp: QApplication) -> None:
    calls: list[tuple[str, Any]] = []
    hosts: list[tuple[str, str]] = []
    tray = TrayIcon(actions(calls, hosts))
    assert "&Remote hosts" in tray.action_texts()
    assert texts(tray.remote_menu) == ["No remote hosts connected", "&Connect to…"]
    hosts.append(("laptop", "connected"))
    tray.remote_menu.aboutToShow.emit()  # what opening the submenu does
    assert texts(tray.remote_menu) == ["laptop — connected", "Disconnect laptop", "&Connect to…"]
    next(a for a in tray.remote_menu.actions() if a.text() == "Disconnect laptop").trigger()
    next(a for a in tray.remote_menu.actions() if a.text() == "&Connect to…").trigger()
    assert calls == [("disconnect", ("laptop",)), ("connect", ())]
    tray.set_pending([])  # the main menu is rebuilt: the submenu stays the same object
    assert tray.remote_menu in [a.menu() for a in tray.menu.actions()]


def test_no_submenu_without_remote_actions(qapp: QApplication) -> None:
    plain = TrayActions(
        open_request=print,
        tool_browser=print,
        policies=print,
        audit_log=print,
        set_paused=print,
        set_autostart=print,
        autostart_enabled=lambda: False,
        quit=print,
    )
    assert "&Remote hosts" not in TrayIcon(plain).action_texts()


def controller(tmp_path: Path, notes: list[tuple[str, str]]) -> RemoteHosts:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    program = [sys.executable, "-c", FAKE_CONNECT, "ollie-remote"]
    return RemoteHosts(env, notify=lambda t, b: notes.append((t, b)), program=program)


def test_connect_disconnect_and_quit_stop_the_children(qtbot: QtBot, tmp_path: Path) -> None:
    notes: list[tuple[str, str]] = []
    hosts = controller(tmp_path, notes)
    process = hosts.connect_host("laptop")
    assert process is not None
    qtbot.waitUntil(lambda: hosts.menu_entries() == [("laptop", "connected")], timeout=10_000)
    assert hosts.connect_host("laptop") is None  # already connected
    assert notes[-1] == ("Remote hosts", "laptop is already connected")
    with qtbot.waitSignal(process.finished, timeout=10_000):
        hosts.disconnect_host("laptop")  # SIGTERM to the supervisor's pid
    assert hosts.menu_entries() == []
    second = hosts.connect_host("desk")
    assert second is not None
    qtbot.waitUntil(lambda: bool(hosts.menu_entries()), timeout=10_000)
    hosts.shutdown()  # the tray quits: its children are stopped
    assert second.state() is QProcess.ProcessState.NotRunning
    assert hosts.menu_entries() == []
    assert hosts.connect_host("-oProxyCommand=x") is None
    assert "not a usable host name" in notes[-1][1]


def test_a_failed_connection_is_reported(qtbot: QtBot, tmp_path: Path) -> None:
    notes: list[tuple[str, str]] = []
    hosts = controller(tmp_path, notes)
    process = hosts.connect_host("fails")
    assert process is not None
    qtbot.waitUntil(lambda: bool(notes), timeout=10_000)
    assert notes[0][0] == "Connection to fails ended"
    assert "host key of fails" in notes[0][1]
    write_connection(
        state_dir({"XDG_RUNTIME_DIR": str(tmp_path / "run")}),
        Connection(host="other", pid=os.getpid(), remote_socket="/r", local_socket="/l", since=0),
    )
    hosts.disconnect_host("other")  # this test process is no supervisor: refused, reported
    assert "not an ollie-remote supervisor" in notes[-1][1]
