"""The broker's Unix socket server (asyncio): bytes in, bytes out, around :class:`Broker`.

Socket safety is :mod:`registry_core.elevation.listen`'s job (0700 directory,
0600 socket, live-instance detection, stale socket replacement).  Every
connection's peer
uid comes from ``SO_PEERCRED``; another uid gets a ``peer_uid`` error and
the connection is closed.

Each request runs in its own task, so one connection may have several in
flight.  When the peer's stream ends, its unanswered requests are
cancelled, which withdraws their questions (denied, "client gone").

Floods (:mod:`registry_core.elevation.limits`): connections are capped per
uid and per process, requests in flight per connection, per process and
per uid; beyond a cap the peer gets a typed ``error``
(``too_many_connections``, ``too_many_requests``).  Refusals and accept
errors are logged at most once per second with a count.  (The programs,
``ollie-tray`` and ``ollie-broker``, raise the descriptor limit at start.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

from registry_core.elevation import messages as m
from registry_core.elevation.core import Broker
from registry_core.elevation.identity import Requester, describe_peer, peer_credentials
from registry_core.elevation.limits import (
    FloodLimits,
    PeerBook,
    QuietAcceptErrors,
    Throttle,
)
from registry_core.elevation.listen import (
    BrokerAlreadyRunningError,
    SocketSetupError,
    bind_socket,
    prepare_socket_dir,
    socket_is_live,
)
from registry_core.errors import OllieError
from registry_core.file_lock import exclusive, lock_path_for

__all__ = [
    "BrokerAlreadyRunningError",
    "BrokerServer",
    "SocketSetupError",
    "bind_socket",
    "prepare_socket_dir",
    "socket_is_live",
]
from registry_core.elevation.protocol import encode, request_decoder

log = logging.getLogger(__name__)
_READ_CHUNK = 65536
# Many clients may connect at once (an agent's parallel calls, 500+ in the tests);
# a short backlog makes non-blocking connects fail (asyncio clients get ENOTCONN).
_BACKLOG = socket.SOMAXCONN


class _Connection:
    """One client connection: decode, run each request as a task, write its reply."""

    def __init__(
        self, server: BrokerServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.tasks: set[asyncio.Task[None]] = set()
        self.requester: Requester | None = None

    def write(self, message: m.Reply) -> None:
        """Queue ``message`` at once, so what is written first arrives first."""
        try:
            data = encode(message)
        except m.MessageError as exc:
            data = encode(m.ErrorReply(id=message.id, code=exc.code, message=exc.message))
        if not self.writer.is_closing():
            self.writer.write(data)

    async def send(self, message: m.Reply) -> None:
        self.write(message)
        if self.writer.is_closing():
            return
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    async def run(self) -> None:
        sock = self.writer.get_extra_info("socket")
        pid, uid, gid = peer_credentials(sock)
        if uid != os.getuid():
            log.warning("refused a connection from pid %d uid %d", pid, uid)
            await self.send(
                m.ErrorReply(
                    id=None, code=m.ErrorCode.PEER_UID, message=f"uid {uid} may not use this broker"
                )
            )
            return
        refused = self.server.peers.admit(uid, pid)
        if refused is not None:
            self.server.note_refusal(refused)
            code = m.ErrorCode.TOO_MANY_CONNECTIONS
            await self.send(m.ErrorReply(id=None, code=code, message=refused))
            return
        try:
            await self._serve(pid, uid, gid)
        finally:
            self.server.peers.leave(uid, pid)

    async def _serve(self, pid: int, uid: int, gid: int) -> None:
        identify = self.server.identify or describe_peer
        self.requester = identify(pid, uid, gid, self.server.broker.config.host)
        peers = self.server.peers
        decoder = request_decoder()
        while True:
            try:
                data = await self.reader.read(_READ_CHUNK)
            except ConnectionError:
                data = b""
            items = decoder.feed(data) if data else decoder.feed_eof()
            for item in items:
                if isinstance(item, m.MessageError):
                    await self.send(item.to_reply())
                    continue
                refused = peers.start(uid, pid, id(self))
                if refused is not None:
                    self.server.note_refusal(refused)
                    code = m.ErrorCode.TOO_MANY_REQUESTS
                    await self.send(m.ErrorReply(id=item.id, code=code, message=refused))
                    continue
                task = asyncio.create_task(self.handle(item))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                task.add_done_callback(lambda _t: peers.finish(uid, pid, id(self)))
            if not data:
                break

    async def handle(self, req: m.Request) -> None:
        assert self.requester is not None
        broker = self.server.broker
        try:
            reply: m.Reply
            if isinstance(req, m.PingRequest):
                reply = m.PongReply(id=req.id)
            elif isinstance(req, m.StatusRequest):
                reply = broker.status(req)
            elif broker.closing:
                reply = m.ErrorReply(
                    id=req.id, code=m.ErrorCode.SHUTTING_DOWN, message="the broker is shutting down"
                )
            elif isinstance(req, m.ElevateRequest):

                def progress(state: m.ProgressState) -> None:
                    # Written now, not from a task: a notice must precede the decision.
                    self.write(m.ProgressNotice(id=req.id, state=state))

                reply = await broker.elevate(req, self.requester, progress)
            elif isinstance(req, m.ActionRequest):

                def action_progress(state: m.ProgressState) -> None:
                    self.write(m.ProgressNotice(id=req.id, state=state))

                reply = await broker.action(req, self.requester, action_progress)
            elif isinstance(req, m.AskpassRequest):
                reply = await broker.askpass(req, self.requester)
            elif isinstance(req, m.SudoResultRequest):
                reply = broker.sudo_result(req)
            elif isinstance(req, m.OpenBrowserRequest):
                reply = self.server.open_browser(req)
            else:  # pragma: no cover - the decoder only yields the types above
                reply = m.ErrorReply(id=req.id, code=m.ErrorCode.UNKNOWN_OP, message="unknown op")
        except m.MessageError as exc:
            reply = exc.to_reply()
        except asyncio.CancelledError:
            if broker.closing:
                # Shutdown: the requester still gets its denial before the close.
                await self.send(
                    m.DecisionReply(
                        id=req.id,
                        decision=m.Decision.DENY,
                        reason="the broker is shutting down",
                        by=m.DecidedBy.SHUTDOWN,
                    )
                )
            raise
        except Exception as exc:
            log.exception("internal error while handling %s", req.op)
            reply = m.ErrorReply(
                id=req.id,
                code=m.ErrorCode.INTERNAL,
                message=f"internal error: {type(exc).__name__}",
            )
        await self.send(reply)

    async def cancel_all(self) -> None:
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class BrokerServer:
    """Owns the socket file while it runs; :meth:`close` denies what is pending."""

    def __init__(
        self,
        broker: Broker,
        path: Path,
        *,
        on_open_browser: Callable[[], None] | None = None,
        identify: Callable[[int, int, int, str], Requester] | None = None,
        limits: FloodLimits | None = None,
    ) -> None:
        self.broker = broker
        self.path = path
        self.on_open_browser = on_open_browser
        # Who a peer is (pid, uid, gid, broker host → Requester); default describe_peer.
        # ollie-remote's hook labels connections forwarded over ssh as remote.
        self.identify = identify
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._closing = False
        self._inode: int | None = None
        self.closed = asyncio.Event()
        self.peers = PeerBook(limits or FloodLimits())
        self._refusals = Throttle()

    def note_refusal(self, why: str) -> None:
        """Log a cap refusal, at most once per second (a flood must not fill the log)."""
        held = self._refusals.ready()
        if held is not None:
            more = f" (and {held} more refusals in the last second)" if held else ""
            log.warning("refused: %s%s", why, more)

    async def start(self, sock: socket.socket | None = None) -> None:
        """Serve on ``sock`` (already bound to ``path`` by :func:`bind_socket`) or bind now."""
        if sock is None:
            sock = bind_socket(self.path)
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(QuietAcceptErrors(log, loop.get_exception_handler()))
        self._inode = os.stat(self.path).st_ino
        self._server = await asyncio.start_unix_server(
            self._accept, sock=sock, limit=m.MAX_FRAME, backlog=_BACKLOG
        )

    def open_browser(self, req: m.OpenBrowserRequest) -> m.Reply:
        if self.on_open_browser is None:
            return m.ErrorReply(
                id=req.id, code=m.ErrorCode.UNSUPPORTED, message="this broker has no Tool Browser"
            )
        self.on_open_browser()
        return m.AckReply(id=req.id)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:  # accepted just before close(): nothing more is served
            writer.close()
            return
        conn = _Connection(self, reader, writer)
        self._connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            await conn.run()
        except Exception:
            log.exception("connection failed")
        finally:
            await conn.cancel_all()
            self._connections.discard(conn)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def close(self) -> None:
        """Deny everything pending, close every connection, remove the socket file."""
        self.broker.begin_shutdown()
        self._closing = True
        if self._server is not None:
            self._server.close()
        await asyncio.sleep(0)  # handlers of connections accepted just now start, and stop
        for conn in list(self._connections):
            await conn.cancel_all()
        for conn in list(self._connections):
            conn.writer.close()
        # Let the handlers see their closed streams and finish: a handler still
        # running when the loop ends is cancelled, and asyncio prints a traceback.
        handlers = [t for t in self._handlers if t is not asyncio.current_task()]
        if handlers:
            await asyncio.wait(handlers, timeout=2.0)
        self._remove_socket()
        self.closed.set()

    def _remove_socket(self) -> None:
        # Under the start-up lock: a new instance cannot bind between our check and unlink.
        with contextlib.suppress(OSError, OllieError), exclusive(lock_path_for(self.path), 5.0):
            if self._inode is not None and os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    @property
    def connection_count(self) -> int:
        return len(self._connections)
