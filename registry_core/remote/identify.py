"""Which broker connections come from a remote host, through an ``ollie-remote`` forward.

A connection forwarded by ``ssh -R`` reaches the local broker socket from the
*local* ssh client process: ``SO_PEERCRED`` names that process.  The broker
therefore labels a connection remote when its peer pid is the ``ssh_pid`` of
a live ``ollie-remote connect`` record (``state.py``) and that ssh process
really is the record's supervisor's ssh child.  The host name comes from our
own record, never from the remote's words: a request's ``host`` field is then
only what the remote *claims* (shown as such).

This is the broker's ``identify`` hook (``BrokerServer(identify=...)``): it
calls :func:`~registry_core.broker.peer.identity.describe_peer` as usual and
only relabels the result.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from registry_core.broker.peer.identity import Requester, describe_peer
from registry_core.remote.state import Connection, all_connections, process_alive

Identify = Callable[[int, int, int, str], Requester]
SUPERVISOR_MARKS = (b"ollie-remote", b"registry_core.cli.remote")


def _ppid(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("PPid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return 0
    return 0


def cmdline_of(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(65536)
    except OSError:
        return b""


def _is_ssh(pid: int) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return os.path.basename(exe).startswith("ssh")


def carrier(pid: int, directory: Path) -> Connection | None:
    """The connection record whose ssh process is ``pid``, checked against /proc:
    the process is an ssh client, a child of the record's supervisor, which runs
    ``ollie-remote`` as us.  ``None`` for every other process."""
    for conn in all_connections(directory):
        if conn.ssh_pid != pid:
            continue
        if not (process_alive(pid) and process_alive(conn.pid)):
            continue
        if _ppid(pid) != conn.pid or not _is_ssh(pid):
            continue
        supervisor = cmdline_of(conn.pid)
        if not any(mark in supervisor for mark in SUPERVISOR_MARKS):
            continue
        return conn
    return None


def label_remote(requester: Requester, directory: Path) -> Requester:
    """``requester`` relabelled remote (with the recorded host) if it is a forward."""
    conn = carrier(requester.pid, directory)
    if conn is None:
        return requester
    return dataclasses.replace(
        requester,
        host=conn.host,
        remote=True,
        user=conn.remote_user or requester.user,
        tools_dir=conn.tools_dir,
    )


def make_identifier(directory: Path) -> Identify:
    """The ``identify`` hook for :class:`~registry_core.broker.serve.server.BrokerServer`."""

    def identify(pid: int, uid: int, gid: int, host: str) -> Requester:
        return label_remote(describe_peer(pid, uid, gid, host), directory)

    return identify
