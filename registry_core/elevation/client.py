"""Blocking broker client (the dispatcher, ``ollie-askpass``, ``ollie-elevate``, the CLI).

One request at a time per client; ``progress`` notices and replies of
unknown ops are skipped while waiting for the reply to our id.  A socket
served by another uid (``SO_PEERCRED``) is refused like a missing broker.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from registry_core.elevation import messages as m
from registry_core.elevation.identity import peer_credentials
from registry_core.elevation.protocol import encode, reply_decoder
from registry_core.errors import BrokerUnavailableError


class BrokerClient:
    def __init__(self, path: Path, *, timeout: float | None = None) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except OSError as exc:
            self._sock.close()
            reason = exc.strerror or str(exc)
            raise BrokerUnavailableError(f"no broker on {path}: {reason}") from exc
        # The server must be us too: a socket another user planted (e.g. in a
        # /tmp fallback runtime directory) could otherwise forge approvals.
        _pid, uid, _gid = peer_credentials(self._sock)
        if uid != os.getuid():
            self._sock.close()
            raise BrokerUnavailableError(f"{path} is served by uid {uid}, not by you: not using it")
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

    def next_id(self) -> str:
        return f"{os.getpid()}-{next(self._ids)}"

    def send(self, message: m.Request) -> None:
        try:
            self._sock.sendall(encode(message))
        except OSError as exc:
            raise BrokerUnavailableError(f"broker connection lost: {exc}") from exc

    def receive(self) -> m.Reply:
        """The next message from the broker (raises when the stream ends)."""
        while not self._backlog:
            try:
                data = self._sock.recv(65536)
            except TimeoutError as exc:
                raise BrokerUnavailableError("the broker did not answer in time") from exc
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
    ) -> m.Reply:
        """Send ``message`` and return the reply with its id (an ErrorReply included)."""
        self.send(message)
        while True:
            reply = self.receive()
            if isinstance(reply, m.ProgressNotice):
                if reply.id == message.id and on_progress is not None:
                    on_progress(reply.state)
                continue
            if isinstance(reply, m.UnknownReply):
                continue
            if reply.id == message.id or (isinstance(reply, m.ErrorReply) and reply.id is None):
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
        msg = m.ElevateRequest(
            id=self.next_id(),
            tool=tool,
            kind=kind,
            argv=tuple(argv),
            args=dict(args),
            cwd=cwd,
            host=host,
            code=code,
            timeout=timeout,
            client=client,
        )
        reply = self.request(msg, on_progress)
        if isinstance(reply, m.DecisionReply | m.ErrorReply):
            return reply
        raise BrokerUnavailableError(f"unexpected {reply.op} reply to elevate")

    def askpass(self, grant: str, prompt: str, attempt: int = 1) -> m.Reply:
        msg = m.AskpassRequest(id=self.next_id(), grant=grant, prompt=prompt, attempt=attempt)
        return self.request(msg)

    def sudo_result(self, grant: str, exit_code: int, auth_failed: bool) -> m.Reply:
        msg = m.SudoResultRequest(
            id=self.next_id(), grant=grant, exit_code=exit_code, auth_failed=auth_failed
        )
        return self.request(msg)

    def status(self) -> m.Reply:
        return self.request(m.StatusRequest(id=self.next_id()))

    def open_browser(self) -> m.Reply:
        return self.request(m.OpenBrowserRequest(id=self.next_id()))


def broker_alive(path: Path, timeout: float = 2.0) -> bool:
    """Does a broker answer ``ping`` on ``path``?"""
    try:
        with BrokerClient(path, timeout=timeout) as client:
            return client.ping()
    except BrokerUnavailableError:
        return False
