"""The start-up race of two brokers, step by step (the stress test is in integration)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.broker.serve import listen
from registry_core.broker.serve.listen import BrokerAlreadyRunningError, bind_socket, socket_is_live


def _stale(path: Path) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()


def test_a_stale_socket_removed_by_another_instance_meanwhile_is_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run" / "elevate.sock"
    _stale(path)

    def probe_while_another_cleans_up(p: Path, timeout: float = 1.0) -> bool:
        p.unlink()  # another starting instance removed the stale file first
        return False

    monkeypatch.setattr(listen, "socket_is_live", probe_while_another_cleans_up)
    sock = bind_socket(path)  # was: FileNotFoundError from os.unlink
    sock.close()


def test_an_instance_binding_first_is_never_unlinked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run" / "elevate.sock"
    _stale(path)
    winner: list[socket.socket] = []
    real_probe = listen.socket_is_live

    def probe_while_another_binds(p: Path, timeout: float = 1.0) -> bool:
        if winner:
            return real_probe(p, timeout)
        # Another instance (one that does not take the lock) replaced the stale file
        # with its live socket just after our probe found it stale.
        live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        live.bind(str(p) + ".new")
        live.listen()
        winner.append(live)
        os.rename(str(p) + ".new", p)  # atomically in place of the stale file
        return False

    monkeypatch.setattr(listen, "socket_is_live", probe_while_another_binds)
    try:
        with pytest.raises(BrokerAlreadyRunningError):
            bind_socket(path)
        assert path.exists()  # the winner's socket is still there
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        client.close()
    finally:
        for s in winner:
            s.close()


def test_bind_waits_for_the_start_up_lock_and_then_finds_the_winner(tmp_path: Path) -> None:
    path = tmp_path / "run" / "elevate.sock"
    path.parent.mkdir(mode=0o700)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from registry_core.file_lock import exclusive, lock_path_for\n"
        "from registry_core.broker.serve.listen import _bind_locked\n"
        "p = Path(sys.argv[1])\n"
        "with exclusive(lock_path_for(p)):\n"
        "    print('locked', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    s = _bind_locked(p)\n"
        "print('bound', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as other:
        assert other.stdin is not None and other.stdout is not None
        assert other.stdout.readline() == "locked\n"
        import threading

        outcome: list[BaseException] = []

        def start() -> None:
            try:
                bind_socket(path).close()
            except BaseException as exc:
                outcome.append(exc)

        racer = threading.Thread(target=start)
        racer.start()
        racer.join(0.3)
        assert racer.is_alive()  # waiting for the lock, not probing
        other.stdin.write("bind\n")
        other.stdin.flush()
        assert other.stdout.readline() == "bound\n"
        racer.join(15)
        assert not racer.is_alive()
        assert len(outcome) == 1
        assert isinstance(outcome[0], BrokerAlreadyRunningError)
        other.stdin.write("done\n")
        other.stdin.close()
        other.wait(10)


@contextlib.contextmanager
def full_backlog(path: Path) -> Iterator[socket.socket]:
    """A listening socket that never accepts, its queue of connections full (a broker
    stopped with SIGSTOP under a burst of clients)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    queued: list[socket.socket] = []
    try:
        server.bind(str(path))
        server.listen(0)
        for _ in range(64):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            queued.append(client)
            try:
                client.connect(str(path))
            except BlockingIOError:
                break
        else:
            pytest.fail("the backlog never filled")
        yield server
    finally:
        for client in queued:
            client.close()
        server.close()


def test_a_listener_whose_queue_is_full_is_live(tmp_path: Path) -> None:
    """Its connect fails at once with EAGAIN (not ECONNREFUSED, a stale socket's): was
    taken for stale, and a starting broker replaced the socket of a stopped one."""
    path = tmp_path / "s"
    with full_backlog(path):
        started = time.monotonic()
        assert socket_is_live(path, timeout=0.2) is True
        assert time.monotonic() - started < 5
        inode = os.lstat(path).st_ino
        with pytest.raises(BrokerAlreadyRunningError):
            bind_socket(path)
        assert os.lstat(path).st_ino == inode
