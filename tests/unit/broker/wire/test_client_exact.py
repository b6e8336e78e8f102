"""The blocking broker client against real Unix sockets: connecting.

Every connect failure in words (no socket, nobody listening, a path too long, a
full listen queue, a socket served by another uid) and the probes.  A scripted
server thread stands in for the broker (``client_helpers``).  Requests and replies
are in ``test_client_replies_exact.py``, the conveniences (``elevate``, ``action``,
``askpass``...) in ``test_client_calls_exact.py``.  Written against the mutants of
``client.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import frame, replying, scripted

from registry_core.broker.wire.client import (
    BrokerClient,
    BrokerNotRespondingError,
    BrokerRefusedError,
    BrokerState,
    ForeignBrokerError,
    broker_alive,
    examine_broker,
    probe_broker,
)
from registry_core.errors import BrokerUnavailableError

# --- connecting ------------------------------------------------------------------


def test_no_socket_there_in_words(base: Path) -> None:
    for path in (base / "missing.sock", base / "file" / "x.sock"):
        (base / "file").touch()
        with pytest.raises(BrokerUnavailableError) as info:
            BrokerClient(path)
        assert type(info.value) is BrokerUnavailableError
        assert str(info.value) == f"no broker on {path}: no socket there"
    assert probe_broker(base / "missing.sock") is BrokerState.MISSING
    assert broker_alive(base / "missing.sock") is False


def test_a_stale_socket_in_words(base: Path) -> None:
    path = base / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    with pytest.raises(BrokerUnavailableError) as info:
        BrokerClient(path)
    assert str(info.value) == f"no broker on {path}: nobody listens on the socket"
    assert probe_broker(path) is BrokerState.STALE


def test_another_connect_error_gives_the_systems_words(base: Path) -> None:
    path = base / ("x" * 120)
    with pytest.raises(BrokerUnavailableError) as info:
        BrokerClient(path)
    assert str(info.value) == f"no broker on {path}: AF_UNIX path too long"
    assert probe_broker(path) is BrokerState.MISSING


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


def test_a_full_backlog_is_a_broker_not_responding(base: Path) -> None:
    """connect() on a full queue fails at once with EAGAIN: was reported as "no broker"
    (and probed MISSING, so a gate replaced a stopped broker by an in-process one)."""
    path = base / "stopped.sock"
    with full_backlog(path):
        started = time.monotonic()
        with pytest.raises(BrokerNotRespondingError) as info:
            BrokerClient(path, connect_timeout=0.25)
        assert time.monotonic() - started >= 0.25
        assert str(info.value) == (
            f"the broker on {path} is not responding (it does not accept connections "
            "within 0.25 s: stopped or hung?)"
        )
        started = time.monotonic()
        assert probe_broker(path, timeout=0.25) is BrokerState.NOT_RESPONDING
        assert 0.25 <= time.monotonic() - started < 2.5  # its time to connect, too


def test_a_full_backlog_is_tried_again_with_growing_pauses_until_the_deadline(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5 ms, doubling up to 0.1 s, the last pause cut to the deadline; the cause chained
    (what a traceback shows) says the queue stayed full."""
    path = base / "stopped.sock"
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    with full_backlog(path):
        monkeypatch.setattr(time, "sleep", sleep)
        with pytest.raises(BrokerNotRespondingError) as info:
            BrokerClient(path, connect_timeout=0.5)
        monkeypatch.undo()
    assert pauses[:6] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.1])
    assert all(pause == pytest.approx(0.1) for pause in pauses[6:-1])
    assert 0 < pauses[-1] <= 0.1
    assert sum(pauses) <= 0.5  # never asleep past the deadline
    cause = info.value.__cause__
    assert type(cause) is TimeoutError
    assert cause.errno == errno.EAGAIN
    assert str(cause) == f"[Errno {errno.EAGAIN}] the listen queue stayed full"
    assert type(cause.__cause__) is BlockingIOError


def test_a_connection_waits_for_room_in_a_full_backlog(base: Path) -> None:
    path = base / "busy.sock"
    with full_backlog(path) as server:
        accepted: list[socket.socket] = []

        def accept_one() -> None:
            conn, _ = server.accept()  # one slot frees up
            accepted.append(conn)

        threading.Timer(0.3, accept_one).start()
        started = time.monotonic()
        client = BrokerClient(path, connect_timeout=10)
        try:
            assert 0.2 < time.monotonic() - started < 9
        finally:
            client.close()
            for conn in accepted:
                conn.close()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to serve as another user")
def test_a_broker_of_another_user_is_never_used(base: Path) -> None:
    path = base / "foreign.sock"
    os.chmod(base, 0o755)
    serve = (
        "import os, socket, sys\n"
        "os.setgid(4321); os.setuid(4321)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    shutil.chown(base, 4321, 4321)
    with subprocess.Popen(
        [sys.executable, "-c", serve, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as other:
        assert other.stdout is not None and other.stdin is not None
        try:
            assert other.stdout.readline() == "ready\n"
            with pytest.raises(ForeignBrokerError) as info:
                BrokerClient(path)
            assert str(info.value) == f"{path} is served by uid 4321, not by you: not using it"
            assert probe_broker(path) is BrokerState.FOREIGN
        finally:
            other.stdin.close()
            other.wait(10)


def test_a_live_broker_is_alive(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, replying(op="pong")) as seen:
        assert probe_broker(path) is BrokerState.ALIVE
        assert broker_alive(path) is True
    assert [r["op"] for r in seen] == ["ping", "ping"]


def test_a_broker_answering_ping_otherwise_is_not_responding(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, replying(op="ack")):
        assert probe_broker(path) is BrokerState.NOT_RESPONDING
        assert broker_alive(path) is False


def test_a_silent_broker_is_not_responding_within_the_probes_time(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _request: []):
        started = time.monotonic()
        assert probe_broker(path, timeout=0.3) is BrokerState.NOT_RESPONDING
        assert time.monotonic() - started < 5


def test_broker_alive_waits_as_long_as_it_is_told(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _request: []):
        started = time.monotonic()
        assert broker_alive(path, timeout=0.3) is False
        assert 0.3 <= time.monotonic() - started < 1.5


def test_a_probe_waits_two_seconds_by_default(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _request: []):
        for probe in (probe_broker, broker_alive):
            started = time.monotonic()
            assert probe(path) in (BrokerState.NOT_RESPONDING, False)
            assert 2.0 <= time.monotonic() - started < 2.9


# --- a refusal at one of the broker's caps (containment II, finding 8) ----------------

CAP = "too many connections from sandboxed processes of uid 1000 (limit 256)"


@pytest.mark.parametrize(
    ("code", "request_id"), [("too_many_connections", None), ("too_many_requests", "own")]
)
def test_a_refusal_at_a_cap_names_the_cap_never_not_responding(
    base: Path, code: str, request_id: str | None
) -> None:
    path = base / "b.sock"

    def refuse(request: dict[str, object]) -> list[bytes]:
        said = request["id"] if request_id == "own" else None
        return [frame(id=said, op="error", code=code, message=CAP)]

    with scripted(path, refuse):
        assert examine_broker(path) == (BrokerState.REFUSED, f"broker refused: {CAP}")
        assert probe_broker(path) is BrokerState.REFUSED
        assert broker_alive(path) is False
        with BrokerClient(path) as client, pytest.raises(BrokerRefusedError) as info:
            client.ping()
    assert str(info.value) == f"broker refused: {CAP}"
    assert isinstance(info.value, BrokerUnavailableError)
    assert not isinstance(info.value, BrokerNotRespondingError)


def test_other_errors_are_still_returned_as_replies(base: Path) -> None:
    path = base / "b.sock"
    answer = replying(op="error", code="unknown_tool", message="no such tool")
    with scripted(path, answer), BrokerClient(path) as client:
        reply = client.status()
    assert (reply.op, getattr(reply, "code", None)) == ("error", "unknown_tool")


def test_examine_says_why_a_broker_is_not_live(base: Path) -> None:
    state, why = examine_broker(base / "missing.sock")
    assert state is BrokerState.MISSING and "no socket there" in why
    path = base / "b.sock"
    with scripted(path, replying(op="pong")):
        assert examine_broker(path) == (BrokerState.ALIVE, "")
    with scripted(base / "c.sock", replying(op="ack")):
        assert examine_broker(base / "c.sock")[0] is BrokerState.NOT_RESPONDING


def test_a_connection_refused_before_the_request_was_sent_still_names_the_cap(
    base: Path,
) -> None:
    """The broker writes its refusal and closes at once: the request's send fails, and
    the client reads what the broker said instead of "connection lost"."""
    path = base / "r.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    refused = frame(id=None, op="error", code="too_many_connections", message=CAP)
    try:
        with BrokerClient(path) as client:
            conn, _ = server.accept()
            conn.sendall(refused)
            conn.close()  # nothing read: the client's send meets a closed peer
            with pytest.raises(BrokerRefusedError) as info:
                client.ping()
    finally:
        server.close()
    assert str(info.value) == f"broker refused: {CAP}"
