"""The blocking broker client against real Unix sockets, every outcome in words (issue 16).

A scripted server thread stands in for the broker: for each request line it sends
the raw frames the test gives (progress notices, other ids, unknown ops, garbage),
or closes, or says nothing.  Written against the mutants of ``client.py``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from registry_core.elevation import messages as m
from registry_core.elevation.client import (
    APPROVAL_WAIT,
    MARGIN,
    REPLY_TIMEOUT,
    BrokerClient,
    BrokerNotRespondingError,
    BrokerState,
    ForeignBrokerError,
    broker_alive,
    probe_broker,
)
from registry_core.errors import BrokerUnavailableError

Script = Callable[[dict[str, Any]], list[bytes] | None]
"""The raw frames answering one request; ``None``: close the connection."""


@pytest.fixture
def base() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="cx-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def frame(**fields: Any) -> bytes:
    return json.dumps({"v": 1, **fields}).encode() + b"\n"


@contextlib.contextmanager
def scripted(path: Path, script: Script) -> Iterator[list[dict[str, Any]]]:
    """A broker on ``path`` answering each request line with ``script(request)``."""
    seen: list[dict[str, Any]] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = server.accept()
                with conn, conn.makefile("rwb") as stream:
                    for line in stream:
                        request = json.loads(line)
                        seen.append(request)
                        frames = script(request)
                        if frames is None:
                            break
                        stream.write(b"".join(frames))
                        stream.flush()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield seen
    finally:
        stop.set()
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        worker.join(10)


def replying(**fields: Any) -> Script:
    return lambda request: [frame(id=request["id"], **fields)]


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


# --- the conveniences: what they send, how long they wait ----------------------


def test_elevate_sends_every_field_and_waits_for_a_person(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    waits: list[float | None] = []
    reason = "approved"
    with (
        scripted(path, replying(op="decision", decision="allow", reason=reason, by="user")) as seen,
        BrokerClient(path) as client,
    ):
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        reply = client.elevate(
            "greet", m.Kind.SUDO, ["/t/greet", "x"], {"a": 1}, "/w",
            code="echo", host="h1", client="agent",
        )  # fmt: skip
        assert reply == m.DecisionReply(
            id=f"{os.getpid()}-1", decision=m.Decision.ALLOW, reason=reason,
            by=m.DecidedBy.USER,
        )  # fmt: skip
        client.elevate("greet", m.Kind.SANDBOX, ["/t/greet"], {}, "/", timeout=12.5)
    assert seen[0] == {
        "v": 1, "id": f"{os.getpid()}-1", "op": "elevate", "tool": "greet", "kind": "sudo",
        "argv": ["/t/greet", "x"], "args": {"a": 1}, "cwd": "/w", "host": "h1",
        "code": "echo", "timeout": APPROVAL_WAIT, "client": "agent",
    }  # fmt: skip
    assert (seen[1]["timeout"], seen[1]["host"], seen[1]["code"], seen[1]["client"]) == (
        12.5,
        None,
        None,
        None,
    )
    assert waits == [APPROVAL_WAIT + MARGIN, 12.5 + MARGIN]


def test_elevate_hands_the_progress_of_its_request_to_the_caller(base: Path) -> None:
    path = base / "b.sock"
    heard: list[m.ProgressState] = []

    def script(request: dict[str, Any]) -> list[bytes]:
        own = request["id"]
        return [
            frame(id=own, op="progress", state="waiting_for_user"),
            frame(id=own, op="decision", decision="deny", reason="no", by="user"),
        ]

    with scripted(path, script), BrokerClient(path) as client:
        reply = client.elevate("t", m.Kind.SANDBOX, ["/t"], {}, "/", on_progress=heard.append)
    assert reply == m.DecisionReply(
        id=f"{os.getpid()}-1", decision=m.Decision.DENY, reason="no", by=m.DecidedBy.USER
    )
    assert heard == [m.ProgressState.WAITING_FOR_USER]


def test_an_unexpected_reply_to_elevate_or_action_in_words(base: Path) -> None:
    path = base / "b.sock"
    action = m.ActionRequest(
        id="ignored", agent="claude", tool="Bash", summary="ls", input={}, cwd="/",
        pattern_kind=m.PatternKind.PROGRAM, pattern="ls",
    )  # fmt: skip
    with scripted(path, replying(op="pong")), BrokerClient(path) as client:
        with pytest.raises(BrokerUnavailableError) as info:
            client.elevate("t", m.Kind.SANDBOX, ["/t"], {}, "/")
        assert str(info.value) == "unexpected pong reply to elevate"
        with pytest.raises(BrokerUnavailableError) as info:
            client.action(action)
        assert str(info.value) == "unexpected pong reply to action"


def test_action_gets_a_fresh_id_and_the_default_wait(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    action = m.ActionRequest(
        id="ignored", agent="claude", tool="Bash", summary="ls", input={"c": "ls"}, cwd="/",
        pattern_kind=m.PatternKind.PROGRAM, pattern="ls",
    )  # fmt: skip
    waits: list[float | None] = []
    error: Script = lambda r: [frame(id=r["id"], op="error", code="paused", message="p")]  # noqa: E731
    with scripted(path, error) as seen, BrokerClient(path) as client:
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        reply = client.action(action)
        assert reply == m.ErrorReply(id=f"{os.getpid()}-1", code="paused", message="p")
        client.action(m.ActionRequest(**{**action.__dict__, "timeout": 3.0}))
    assert [(r["id"], r["timeout"]) for r in seen] == [
        (f"{os.getpid()}-1", APPROVAL_WAIT),
        (f"{os.getpid()}-2", 3.0),
    ]
    assert waits == [APPROVAL_WAIT + MARGIN, 3.0 + MARGIN]


GRANT = "g" * 43


def test_askpass_sudo_result_status_and_open_browser_send_their_fields(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    waits: list[float | None] = []
    with scripted(path, replying(op="ack")) as seen, BrokerClient(path) as client:
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        assert client.askpass(GRANT, "Password: ") == m.AckReply(id=f"{os.getpid()}-1")
        client.askpass(GRANT, "Again: ", 3, wait=20.0)
        client.sudo_result(GRANT, 1, True)
        client.status()
        client.open_browser()
    pid = os.getpid()
    assert seen == [
        {"v": 1, "id": f"{pid}-1", "op": "askpass", "grant": GRANT, "prompt": "Password: ",
         "attempt": 1},
        {"v": 1, "id": f"{pid}-2", "op": "askpass", "grant": GRANT, "prompt": "Again: ",
         "attempt": 3},
        {"v": 1, "id": f"{pid}-3", "op": "sudo_result", "grant": GRANT, "exit_code": 1,
         "auth_failed": True},
        {"v": 1, "id": f"{pid}-4", "op": "status"},
        {"v": 1, "id": f"{pid}-5", "op": "open_browser"},
    ]  # fmt: skip
    assert waits == [APPROVAL_WAIT + MARGIN, 20.0 + MARGIN, None, None, None]
