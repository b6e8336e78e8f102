"""The blocking broker client against real Unix sockets: requests and replies.

A scripted server thread stands in for the broker (``client_helpers``): for each
request line it sends the raw frames the test gives (progress notices, other ids,
unknown ops, garbage), or closes, or says nothing.  Written against the mutants of
``client.py``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from client_helpers import Script, frame, replying, scripted

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import REPLY_TIMEOUT, BrokerClient, BrokerNotRespondingError
from registry_core.errors import BrokerUnavailableError

# --- requests and replies ------------------------------------------------------------


def test_ids_are_the_pid_and_a_count_from_one(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, replying(op="pong")), BrokerClient(path) as client:
        assert [client.next_id() for _ in range(3)] == [
            f"{os.getpid()}-1",
            f"{os.getpid()}-2",
            f"{os.getpid()}-3",
        ]
        assert client.timeout == REPLY_TIMEOUT
    with (
        scripted(base / "c.sock", replying(op="pong")),
        BrokerClient(base / "c.sock", timeout=None) as default,
    ):
        assert default.timeout == REPLY_TIMEOUT


def test_the_reply_to_our_id_is_found_past_notices_and_other_ids(base: Path) -> None:
    path = base / "b.sock"
    heard: list[m.ProgressState] = []

    def script(request: dict[str, Any]) -> list[bytes]:
        own = request["id"]
        return [
            frame(id="someone-else", op="progress", state="notified"),
            frame(id=own, op="progress", state="waiting_for_user"),
            frame(id=own, op="brand_new_notice"),
            frame(id="someone-else", op="pong"),
            frame(id="someone-else", op="error", code="bad_json", message="not yours"),
            frame(id=own, op="progress", state="notified"),
            frame(id=own, op="pong"),
        ]

    with scripted(path, script), BrokerClient(path) as client:
        reply = client.request(m.PingRequest(id="mine"), heard.append)
        assert reply == m.PongReply(id="mine")
        assert heard == [m.ProgressState.WAITING_FOR_USER, m.ProgressState.NOTIFIED]
        assert client.request(m.PingRequest(id="mine")) == m.PongReply(id="mine")  # no callback


def test_an_error_without_an_id_answers_any_request(base: Path) -> None:
    path = base / "b.sock"
    script: Script = lambda _r: [frame(id=None, op="error", code="bad_json", message="m")]  # noqa: E731
    with scripted(path, script), BrokerClient(path) as client:
        assert client.request(m.PingRequest(id="q")) == m.ErrorReply(
            id=None, code=m.ErrorCode.BAD_JSON, message="m"
        )


def test_a_broker_that_stops_answering_in_words(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _r: []), BrokerClient(path, timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(BrokerNotRespondingError) as info:
            client.request(m.PingRequest(id=1))
        assert str(info.value) == (
            f"the broker on {path} is not responding (no answer within 0.3 s: stopped or hung?)"
        )
        assert 0.3 <= time.monotonic() - started < 5
        with pytest.raises(BrokerNotRespondingError, match=r"within 0\.2 s"):
            client.receive(0.2)


def test_a_reply_in_the_last_second_of_the_wait_is_taken(base: Path) -> None:
    path = base / "b.sock"

    def late(request: dict[str, Any]) -> list[bytes]:
        time.sleep(0.2)
        return [frame(id=request["id"], op="pong")]

    with scripted(path, late), BrokerClient(path) as client:
        assert client.request(m.PingRequest(id=1), wait=0.9) == m.PongReply(id=1)


def send_until_full(client: BrokerClient) -> None:
    for _ in range(1_000_000):
        client.send(m.StatusRequest(id="x" * 100))


def test_a_broker_that_stops_reading_in_words(base: Path) -> None:
    """Sending waits for room in the socket buffer only as long as the reply would."""
    path = base / "b.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()  # connections queue; none is ever accepted or read
    try:
        with BrokerClient(path, timeout=0.3) as client:
            started = time.monotonic()
            with pytest.raises(BrokerNotRespondingError) as info:
                send_until_full(client)
            assert 0.3 <= time.monotonic() - started < 5
            assert str(info.value) == (
                f"the broker on {path} is not responding (no answer within 0.3 s: stopped or hung?)"
            )
    finally:
        server.close()


def test_notices_do_not_extend_the_deadline(base: Path) -> None:
    path = base / "b.sock"

    def chatty(request: dict[str, Any]) -> list[bytes]:
        return [frame(id=request["id"], op="progress", state="notified")]

    with scripted(path, chatty), BrokerClient(path, timeout=5) as client:
        client.send(m.PingRequest(id=1))
        client.send(m.PingRequest(id=1))
        started = time.monotonic()
        with pytest.raises(BrokerNotRespondingError, match=r"within 0\.4 s"):
            client.request(m.PingRequest(id=1), wait=0.4)
        assert time.monotonic() - started < 3


def test_a_stream_of_notices_past_the_deadline_ends_the_wait_in_words(base: Path) -> None:
    """Notices that keep coming never let the receive time out: the deadline is checked
    between them."""
    path = base / "b.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def chatter() -> None:
        conn, _ = server.accept()
        with conn, contextlib.suppress(OSError):
            request = json.loads(conn.makefile("rb").readline())
            notices = frame(id=request["id"], op="progress", state="notified") * 100
            while not stop.is_set():  # never a pause for the client's receive to time out in
                conn.sendall(notices)

    worker = threading.Thread(target=chatter, daemon=True)
    worker.start()
    try:
        with BrokerClient(path) as client:
            started = time.monotonic()
            with pytest.raises(BrokerNotRespondingError) as info:
                client.request(m.PingRequest(id=1), wait=0.3)
            assert 0.3 <= time.monotonic() - started < 5
            assert str(info.value) == (
                f"the broker on {path} is not responding (no answer within 0.3 s: stopped or hung?)"
            )
    finally:
        stop.set()
        worker.join(10)
        server.close()


def test_receive_returns_what_came_in_order(base: Path) -> None:
    path = base / "b.sock"
    two: Script = lambda r: [frame(id=r["id"], op="ack"), frame(id=r["id"], op="pong")]  # noqa: E731
    with scripted(path, two), BrokerClient(path) as client:
        client.send(m.StatusRequest(id=5))
        assert client.receive() == m.AckReply(id=5)
        assert client.receive(1.0) == m.PongReply(id=5)


def test_a_closed_connection_in_words(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _r: None), BrokerClient(path) as client:
        with pytest.raises(BrokerUnavailableError) as info:
            client.request(m.PingRequest(id=1))
        assert str(info.value) == "the broker closed the connection"
        lost = None
        for _ in range(50):  # the peer's end is gone: a write fails soon
            try:
                client.send(m.PingRequest(id=2))
            except BrokerUnavailableError as error:
                lost = str(error)
                break
            time.sleep(0.01)
        assert lost == "broker connection lost: [Errno 32] Broken pipe"


def test_a_connection_reset_while_waiting_in_words(base: Path) -> None:
    """A broker that closes with our request unread resets the connection (ECONNRESET
    on the receive): lost, in the system's words, with the error as the cause."""
    path = base / "b.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def read_a_byte_and_close() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1)  # the rest of the request stays unread

    worker = threading.Thread(target=read_a_byte_and_close, daemon=True)
    worker.start()
    try:
        with BrokerClient(path) as client:
            with pytest.raises(BrokerUnavailableError) as info:
                client.request(m.PingRequest(id=1))
            assert str(info.value) == (
                f"broker connection lost: [Errno {errno.ECONNRESET}] Connection reset by peer"
            )
            assert type(info.value.__cause__) is ConnectionResetError
    finally:
        worker.join(10)
        server.close()


def test_a_bad_frame_from_the_broker_in_words(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _r: [b"{nope\n"]), BrokerClient(path) as client:
        with pytest.raises(BrokerUnavailableError) as info:
            client.request(m.PingRequest(id=1))
        assert str(info.value) == (
            "broker sent a bad frame: bad_json: invalid JSON at column 2: "
            "Expecting property name enclosed in double quotes"
        )


def test_abort_ends_a_wait_from_another_thread(base: Path) -> None:
    path = base / "b.sock"
    with scripted(path, lambda _r: []), BrokerClient(path, timeout=30) as client:
        threading.Timer(0.2, client.abort).start()
        started = time.monotonic()
        with pytest.raises(BrokerUnavailableError) as info:
            client.request(m.PingRequest(id=1))
        assert time.monotonic() - started < 10
        assert str(info.value) == "the broker closed the connection"
        client.abort()  # again, on a connection already shut: no error
        client.close()
        client.abort()  # a cancel arriving after the request ended: no error either
