"""The broker's Unix socket server (asyncio): bytes in, bytes out, around :class:`Broker`.

Socket safety: the directory is created 0700 and must be ours; the socket
is bound under a 0177 umask (so it is never briefly wider than 0600); a
socket that answers belongs to a live instance and is left alone (start
fails); one that does not is stale and replaced.  Every connection's peer
uid comes from ``SO_PEERCRED``; another uid gets a ``peer_uid`` error and
the connection is closed.

Each request runs in its own task, so one connection may have several in
flight.  When the peer's stream ends, its unanswered requests are
cancelled, which withdraws their questions (denied, "client gone").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

from registry_core.elevation import messages as m
from registry_core.elevation.core import Broker
from registry_core.elevation.identity import Requester, describe_peer, peer_credentials
from registry_core.elevation.protocol import encode, request_decoder
from registry_core.errors import ElevationError

log = logging.getLogger(__name__)
_READ_CHUNK = 65536
# Many clients may connect at once (an agent's parallel calls, 500+ in the tests);
# a short backlog makes non-blocking connects fail (asyncio clients get ENOTCONN).
_BACKLOG = socket.SOMAXCONN


class BrokerAlreadyRunningError(ElevationError):
    """Another live broker answers on the socket."""


class SocketSetupError(ElevationError):
    """The socket directory or file is unsafe or cannot be created."""


def prepare_socket_dir(path: Path) -> None:
    """Create the socket's directory 0700, or check an existing one is ours and private."""
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = directory.stat()
    if st.st_uid != os.getuid():
        raise SocketSetupError(f"{directory} belongs to uid {st.st_uid}, not to you")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def socket_is_live(path: Path, timeout: float = 1.0) -> bool:
    """Does something accept connections on ``path``?"""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_socket(path: Path) -> socket.socket:
    """A listening socket at ``path`` (0600), replacing a stale one."""
    prepare_socket_dir(path)
    if os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise SocketSetupError(f"{path} exists and is not a socket; refusing to replace it")
        if socket_is_live(path):
            raise BrokerAlreadyRunningError(f"another broker is already listening on {path}")
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise SocketSetupError(f"cannot bind {path}: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(_BACKLOG)
    sock.setblocking(False)
    return sock


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
        identify = self.server.identify or describe_peer
        self.requester = identify(pid, uid, gid, self.server.broker.config.host)
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
                else:
                    task = asyncio.create_task(self.handle(item))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
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
    ) -> None:
        self.broker = broker
        self.path = path
        self.on_open_browser = on_open_browser
        # Who a peer is (pid, uid, gid, broker host → Requester); default describe_peer.
        # ollie-remote's hook labels connections forwarded over ssh as remote.
        self.identify = identify
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._inode: int | None = None
        self.closed = asyncio.Event()

    async def start(self) -> None:
        sock = bind_socket(self.path)
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
        conn = _Connection(self, reader, writer)
        self._connections.add(conn)
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
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            await conn.cancel_all()
        for conn in list(self._connections):
            conn.writer.close()
        self._remove_socket()
        self.closed.set()

    def _remove_socket(self) -> None:
        with contextlib.suppress(OSError):
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    @property
    def connection_count(self) -> int:
        return len(self._connections)
