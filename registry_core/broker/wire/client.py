"""Blocking broker client (the dispatcher, ``ollie-askpass``, ``ollie-elevate``, the CLI).

One request at a time per client; ``progress`` notices and replies of
unknown ops are skipped while waiting for the reply to our id.  A socket
served by another uid (``SO_PEERCRED``) is refused like a missing broker.

Deadlines everywhere: connecting may take :data:`CONNECT_TIMEOUT` seconds;
an ordinary request (ping, status, sudo_result...) gets its whole reply
within :data:`REPLY_TIMEOUT`; a request that waits for a person (``elevate``,
``askpass``) may wait as long as it told the broker it would (``timeout``,
default :data:`APPROVAL_WAIT`) plus :data:`MARGIN`, after which the client
gives up and the caller denies.  A broker that accepts the connection but
never answers (stopped with SIGSTOP, hung) raises
:class:`BrokerNotRespondingError`, which says so, not that no broker exists.
A broker that refuses at one of its flood caps (``too_many_connections``,
``too_many_requests``: docs/protocol.md §8) raises :class:`BrokerRefusedError`,
whose message names the cap and its limit ("broker refused: too many
connections from this sandbox (limit 16)"), never "not responding".
"""

from __future__ import annotations

import contextlib
import enum
import errno
import itertools
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import encode
from registry_core.broker.wire.framing import reply_decoder
from registry_core.broker.wire.peercred import peer_credentials
from registry_core.errors import BrokerUnavailableError

CONNECT_TIMEOUT = 5.0
"""Seconds to connect (a stopped broker's full backlog makes connect wait; see ``_connect``)."""
REPLY_TIMEOUT = 10.0
"""Seconds for the reply to a request no person answers (ping, status, sudo_result)."""
APPROVAL_WAIT = 300.0
"""Seconds a request waits for a person by default (sent as the request's ``timeout``)."""
MARGIN = 10.0
"""Seconds beyond a person's wait before the client stops waiting for the broker's answer."""
WAIT_ENV = "OLLIE_APPROVAL_WAIT"
"""Environment variable by which a gate tells ``ollie-askpass`` how long a person may take."""


class BrokerNotRespondingError(BrokerUnavailableError):
    """A broker accepted the connection (or holds the socket) but does not answer."""


class BrokerRefusedError(BrokerUnavailableError):
    """The broker answered, with a refusal at one of its caps; the message names it."""


_REFUSALS = frozenset({m.ErrorCode.TOO_MANY_CONNECTIONS, m.ErrorCode.TOO_MANY_REQUESTS})


def refusal(reply: m.Reply) -> BrokerRefusedError | None:
    """The error to raise for ``reply`` when it is a cap refusal, else ``None``."""
    if isinstance(reply, m.ErrorReply) and reply.error_code in _REFUSALS:
        return BrokerRefusedError(f"broker refused: {reply.message}")
    return None


class BrokerState(enum.Enum):
    """What :func:`probe_broker` found on a socket path."""

    ALIVE = "alive"
    MISSING = "missing"  # no socket file (or another kind of file)
    STALE = "stale"  # a socket file nobody listens on
    NOT_RESPONDING = "not_responding"  # accepts, or would, but never answers
    REFUSED = "refused"  # answers with a refusal at one of its caps (too_many_*)
    FOREIGN = "foreign"  # served by another user: never used


class ForeignBrokerError(BrokerUnavailableError):
    """The socket is served by another user: never used."""


def _connect_error(path: Path, exc: OSError, timeout: float) -> BrokerUnavailableError:
    if isinstance(exc, TimeoutError):
        return BrokerNotRespondingError(
            f"the broker on {path} is not responding (it does not accept connections "
            f"within {timeout:g} s: stopped or hung?)"
        )
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return BrokerUnavailableError(f"no broker on {path}: no socket there")
    if exc.errno == errno.ECONNREFUSED:
        return BrokerUnavailableError(f"no broker on {path}: nobody listens on the socket")
    return BrokerUnavailableError(f"no broker on {path}: {exc.strerror or exc}")


def _connect(path: Path, timeout: float) -> socket.socket:
    """A socket connected to ``path`` within ``timeout`` seconds.

    A listening socket whose queue of connections is full (a broker stopped, or
    swamped) refuses a connect with a timeout at once with ``EAGAIN``, where a
    blocking one would wait for room: wait here, trying again, until the deadline
    (then ``TimeoutError``)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except BlockingIOError as exc:  # EAGAIN: the listen queue is full
            sock.close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(errno.EAGAIN, "the listen queue stayed full") from exc
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)
            continue
        except OSError:
            sock.close()
            raise
        return sock


class BrokerClient:
    def __init__(
        self,
        path: Path,
        *,
        timeout: float | None = REPLY_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.path = path
        self.timeout = REPLY_TIMEOUT if timeout is None else timeout
        try:
            self._sock = _connect(path, connect_timeout)
        except OSError as exc:
            raise _connect_error(path, exc, connect_timeout) from exc
        # The server must be us too: a socket another user planted (e.g. in a
        # /tmp fallback runtime directory) could otherwise forge approvals.
        pid, uid, _gid = peer_credentials(self._sock)
        self.peer_pid = pid
        if uid != os.getuid():
            self._sock.close()
            raise ForeignBrokerError(f"{path} is served by uid {uid}, not by you: not using it")
        self._decoder = reply_decoder()
        self._backlog: list[m.Reply] = []
        self._ids = itertools.count(1)

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def abort(self) -> None:
        """From another thread: end the connection now (a blocked receive fails at once;
        the broker withdraws this connection's pending questions)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def next_id(self) -> str:
        return f"{os.getpid()}-{next(self._ids)}"

    def send(self, message: m.Request) -> None:
        self._sock.settimeout(self.timeout)
        try:
            self._sock.sendall(encode(message))
        except TimeoutError as exc:
            raise self._not_responding(self.timeout) from exc
        except OSError as exc:
            # A broker that refused this connection at a cap wrote why, then closed it.
            said = self._last_words()
            if said is not None:
                raise said from exc
            raise BrokerUnavailableError(f"broker connection lost: {exc}") from exc

    def _last_words(self) -> BrokerRefusedError | None:
        """The refusal the broker wrote before it closed the connection, if it did."""
        data = b""
        with contextlib.suppress(OSError):
            self._sock.setblocking(False)
            while chunk := self._sock.recv(65536):
                data += chunk
        for item in self._decoder.feed(data):
            if not isinstance(item, m.MessageError) and (said := refusal(item)) is not None:
                return said
        return None

    def _not_responding(self, waited: float) -> BrokerNotRespondingError:
        return BrokerNotRespondingError(
            f"the broker on {self.path} is not responding (no answer within {waited:g} s: "
            "stopped or hung?)"
        )

    def receive(self, wait: float | None = None) -> m.Reply:
        """The next message from the broker, within ``wait`` seconds (default: the
        client's reply timeout); raises when the stream ends or the time is up."""
        waited = self.timeout if wait is None else wait
        return self._receive_until(time.monotonic() + waited, waited)

    def _receive_until(self, deadline: float, waited: float) -> m.Reply:
        while not self._backlog:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._not_responding(waited)
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(65536)
            except TimeoutError as exc:
                raise self._not_responding(waited) from exc
            except OSError as exc:
                raise BrokerUnavailableError(f"broker connection lost: {exc}") from exc
            if not data:
                raise BrokerUnavailableError("the broker closed the connection")
            for item in self._decoder.feed(data):
                if isinstance(item, m.MessageError):
                    raise BrokerUnavailableError(f"broker sent a bad frame: {item}")
                self._backlog.append(item)
        return self._backlog.pop(0)

    def request(
        self,
        message: m.Request,
        on_progress: Callable[[m.ProgressState], None] | None = None,
        *,
        wait: float | None = None,
    ) -> m.Reply:
        """Send ``message`` and return the reply with its id (an ErrorReply included).

        The whole reply must come within ``wait`` seconds (default: the
        client's reply timeout), else :class:`BrokerNotRespondingError`.  A
        refusal at one of the broker's caps raises :class:`BrokerRefusedError`.
        """
        self.send(message)
        waited = self.timeout if wait is None else wait
        deadline = time.monotonic() + waited
        while True:
            reply = self._receive_until(deadline, waited)
            if isinstance(reply, m.ProgressNotice):
                if reply.id == message.id and on_progress is not None:
                    on_progress(reply.state)
                continue
            if isinstance(reply, m.UnknownReply):
                continue
            if reply.id == message.id or (isinstance(reply, m.ErrorReply) and reply.id is None):
                refused = refusal(reply)
                if refused is not None:
                    raise refused
                return reply

    # --- conveniences ------------------------------------------------------------

    def ping(self) -> bool:
        return isinstance(self.request(m.PingRequest(id=self.next_id())), m.PongReply)

    def elevate(
        self,
        tool: str,
        kind: m.Kind,
        argv: list[str],
        args: Mapping[str, Any],
        cwd: str,
        *,
        code: str | None = None,
        host: str | None = None,
        timeout: float | None = None,
        on_progress: Callable[[m.ProgressState], None] | None = None,
        client: str | None = None,
    ) -> m.DecisionReply | m.ErrorReply:
        wait = APPROVAL_WAIT if timeout is None else timeout
        msg = m.ElevateRequest(
            id=self.next_id(),
            tool=tool,
            kind=kind,
            argv=tuple(argv),
            args=dict(args),
            cwd=cwd,
            host=host,
            code=code,
            timeout=wait,
            client=client,
        )
        reply = self.request(msg, on_progress, wait=wait + MARGIN)
        if isinstance(reply, m.DecisionReply | m.ErrorReply):
            return reply
        raise BrokerUnavailableError(f"unexpected {reply.op} reply to elevate")

    def action(self, request: m.ActionRequest) -> m.DecisionReply | m.ErrorReply:
        """Ask about an agent's own action (``request.id`` is replaced by a fresh one)."""
        import dataclasses

        wait = APPROVAL_WAIT if request.timeout is None else request.timeout
        message = dataclasses.replace(request, id=self.next_id(), timeout=wait)
        reply = self.request(message, wait=wait + MARGIN)
        if isinstance(reply, m.DecisionReply | m.ErrorReply):
            return reply
        raise BrokerUnavailableError(f"unexpected {reply.op} reply to action")

    def askpass(
        self, grant: str, prompt: str, attempt: int = 1, *, wait: float = APPROVAL_WAIT
    ) -> m.Reply:
        """Ask for the password of ``grant``; a person may take ``wait`` seconds."""
        msg = m.AskpassRequest(id=self.next_id(), grant=grant, prompt=prompt, attempt=attempt)
        return self.request(msg, wait=wait + MARGIN)

    def sudo_result(self, grant: str, exit_code: int, auth_failed: bool) -> m.Reply:
        msg = m.SudoResultRequest(
            id=self.next_id(), grant=grant, exit_code=exit_code, auth_failed=auth_failed
        )
        return self.request(msg)

    def status(self) -> m.Reply:
        return self.request(m.StatusRequest(id=self.next_id()))

    def open_browser(self) -> m.Reply:
        return self.request(m.OpenBrowserRequest(id=self.next_id()))


def examine_broker(path: Path, timeout: float = 2.0) -> tuple[BrokerState, str]:
    """What answers on ``path``, and in words why it is not a live broker ("" when it is)."""
    try:
        with BrokerClient(path, timeout=timeout, connect_timeout=timeout) as client:
            if client.ping():
                return BrokerState.ALIVE, ""
            return BrokerState.NOT_RESPONDING, f"the broker on {path} does not answer ping"
    except BrokerNotRespondingError as exc:
        return BrokerState.NOT_RESPONDING, str(exc)
    except BrokerRefusedError as exc:
        return BrokerState.REFUSED, str(exc)
    except BrokerUnavailableError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED:
            return BrokerState.STALE, str(exc)
        if isinstance(exc, ForeignBrokerError):
            return BrokerState.FOREIGN, str(exc)
        return BrokerState.MISSING, str(exc)


def probe_broker(path: Path, timeout: float = 2.0) -> BrokerState:
    """What answers on ``path``: a live broker, nothing, one that does not respond, or one
    that refuses this process at a cap."""
    return examine_broker(path, timeout)[0]


def broker_alive(path: Path, timeout: float = 2.0) -> bool:
    """Does a broker answer ``ping`` on ``path``?"""
    return probe_broker(path, timeout) is BrokerState.ALIVE


BROKER_PROGRAMS = {"ollie-tray": "Ollie Tray", "ollie-broker": "ollie-broker"}


def program_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """``ollie-tray`` or ``ollie-broker`` when that is what runs as ``pid``, else None."""
    try:
        words = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    # A console script runs as "python3 /path/bin/ollie-tray ..." or "/path/bin/ollie-tray".
    for word in words[:2]:
        name = os.path.basename(word.decode(errors="replace"))
        if name in BROKER_PROGRAMS:
            return name
    if words[1:3] == [b"-m", b"ollie_tray"]:
        return "ollie-tray"
    return None


def broker_label(path: Path, timeout: float = 2.0) -> str:
    """Who answers on ``path``, for a person reading progress: "Ollie Tray", "ollie-broker",
    else "the broker on PATH" (another program, a tunnel, or nothing that answers now)."""
    try:
        with BrokerClient(path, timeout=timeout, connect_timeout=timeout) as client:
            program = program_of(client.peer_pid)
    except (BrokerUnavailableError, BrokerNotRespondingError):
        program = None
    return BROKER_PROGRAMS[program] if program else f"the broker on {path}"
