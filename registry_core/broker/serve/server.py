"""The broker's Unix socket server (asyncio): bytes in, bytes out, around :class:`Broker`.

Socket safety is :mod:`registry_core.broker.serve.listen`'s job (0700 directory,
0600 socket, live-instance detection, stale socket replacement).  Every
connection's peer uid comes from ``SO_PEERCRED``; another uid gets a
``peer_uid`` error and the connection is closed.

Requests are decided in batches (:meth:`BrokerServer.drain`), in the order
read, in one synchronous pass each: the frames of an event loop step's first
read at once, those of its further reads together when the step ends.  A
request that needs no person (ping, status, and every decision made by a
remembered policy, a pause, shutdown or an unknown tool) is answered in that
pass, without a task; one that waits for a person
runs in a task of its own, so one connection may have several in flight.
When the peer's stream ends, its unanswered requests are cancelled, which
withdraws their questions (denied, "client gone").

A batch is decided after every read that delivered it, so every change made
before a request was sent is seen by that request.  The batch's audit
records go to the file in one ``write``, and its replies leave after that
write, so no reply precedes its record.

Floods (:mod:`registry_core.broker.serve.flood`): connections are capped per
uid and per process, requests in flight per connection, per process and
per uid; a sandboxed peer also spends the budget of its sandbox and that of
all sandboxed peers of its uid (so the agent's share stays free whatever
sandboxed tools do); beyond a cap the peer gets a
typed ``error`` (``too_many_connections``, ``too_many_requests``) naming
the cap.  The caps every peer has are checked before the peer is read from
``/proc``, the sandbox's after.  Refusals and accept errors are logged at
most once per second with a count.  (The programs, ``ollie-tray`` and
``ollie-broker``, raise the descriptor limit at start, before the server is
made: its default caps are fitted to that limit, ``FloodLimits.fitted``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from registry_core.broker.decide.core import Broker
from registry_core.broker.peer.identity import Requester, describe_peer
from registry_core.broker.record.audit import AuditError
from registry_core.broker.serve.flood import (
    FloodLimits,
    PeerBook,
    QuietAcceptErrors,
    Throttle,
    descriptor_limit,
)
from registry_core.broker.serve.listen import (
    BrokerAlreadyRunningError,
    SocketSetupError,
    bind_socket,
    prepare_socket_dir,
    socket_is_live,
)
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.peercred import peer_credentials
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
from registry_core.broker.wire.codec import encode
from registry_core.broker.wire.framing import request_decoder

log = logging.getLogger(__name__)
# Many clients may connect at once (an agent's parallel calls, 5,000 in bench/broker.py);
# a short backlog makes non-blocking connects fail (asyncio clients get ENOTCONN).
_BACKLOG = socket.SOMAXCONN


class _Connection(asyncio.Protocol):
    """One client connection: decode, decide, write each reply.

    A protocol, not streams: bytes arrive in :meth:`data_received` and replies
    leave through the transport, with no task per connection.  Requests no
    person needs to answer (ping, status, and every decision made by a
    remembered policy, a pause, shutdown, an unknown tool) are answered there
    and then; a request that waits for a person runs in a task of its own.
    Replies are written the moment they exist, so what is written first
    arrives first.  A peer that stops reading its replies is not read from
    until the kernel has taken them (``pause_writing``)."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.requester: Requester | None = None
        self.decoder = request_decoder()
        # (uid, pid, sandbox) once admitted; sandbox None outside any (limits.PeerBook).
        self.peer: tuple[int, int, str | None] | None = None
        self.lost = asyncio.get_running_loop().create_future()

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections.add(self)
        if self.server.closing:  # accepted just before close(): nothing more is served
            transport.close()
            return
        try:
            self._admit(transport)
        except Exception:
            log.exception("connection failed")
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self.requester is None:  # refused, or closing: nothing is read
            return
        items = self.decoder.feed(data)
        if items:
            self.server.take(self, items)

    def eof_received(self) -> bool | None:
        if self.requester is not None:
            self.server.take(self, self.decoder.feed_eof())
        self.server.drain()  # this peer's requests decided, their replies out before the close
        # The peer is done sending: its unanswered requests are withdrawn, and the
        # transport closes once the replies written so far are out.
        self._cancel_tasks()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.drain()  # what this peer sent is decided (and recorded) as sent
        self._cancel_tasks()
        if self.peer is not None:
            uid, pid, sandbox = self.peer
            self.server.peers.leave(uid, pid, sandbox)
            self.peer = None
        self.server.connections.discard(self)
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # --- requests --------------------------------------------------------------------

    def _admit(self, transport: asyncio.Transport) -> None:
        pid, uid, gid = peer_credentials(transport.get_extra_info("socket"))
        if uid != os.getuid():
            log.warning("refused a connection from pid %d uid %d", pid, uid)
            message = f"uid {uid} may not use this broker"
            self._close_with(m.ErrorReply(id=None, code=m.ErrorCode.PEER_UID, message=message))
            return
        peers = self.server.peers
        # The caps every peer has first: a flood beyond them costs no /proc reads.
        refused = peers.connection_refusal(uid, pid)
        if refused is None:
            identify = self.server.identify or describe_peer
            requester = identify(pid, uid, gid, self.server.broker.config.host)
            # A sandboxed peer spends its sandbox's budget ("" from an identify hook
            # that did not say which sandbox: one shared key, never none).
            sandbox = (requester.sandbox or "unidentified peers") if requester.sandboxed else None
            refused = peers.admit(uid, pid, sandbox)
        if refused is not None:
            self._refuse_connection(refused)
            return
        self.peer = (uid, pid, sandbox)
        self.requester = requester

    def _refuse_connection(self, refused: str) -> None:
        self.server.note_refusal(refused)
        code = m.ErrorCode.TOO_MANY_CONNECTIONS
        self._close_with(m.ErrorReply(id=None, code=code, message=refused))

    def _close_with(self, message: m.Reply) -> None:
        self.send(encode(message))  # no decision: nothing to wait for
        assert self.transport is not None
        self.transport.close()

    def write(self, message: m.Reply) -> None:
        """Queue ``message`` at once, so what is written first arrives first (while
        the server holds a batch's audit records, after them: see ``BrokerServer``)."""
        try:
            data = encode(message)
        except m.MessageError as exc:
            data = encode(m.ErrorReply(id=message.id, code=exc.code, message=exc.message))
        if self.server.holding:
            self.server.held_replies.append((self, data))
        else:
            self.send(data)

    def send(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def dispatch(self, item: m.Request | m.MessageError) -> None:
        if isinstance(item, m.MessageError):
            self.write(item.to_reply())
            return
        assert self.peer is not None
        uid, pid, sandbox = self.peer
        peers = self.server.peers
        refused = peers.refusal(uid, pid, id(self), sandbox)
        if refused is not None:
            self.server.note_refusal(refused)
            code = m.ErrorCode.TOO_MANY_REQUESTS
            self.write(m.ErrorReply(id=item.id, code=code, message=refused))
            return
        question = self._answer_now(item)
        if question is None:
            return  # answered: it was never in flight
        peers.start(uid, pid, id(self), sandbox)  # admitted just above, in this same pass
        task = asyncio.create_task(question)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda _t: peers.finish(uid, pid, id(self), sandbox))

    def _answer_now(self, req: m.Request) -> Coroutine[Any, Any, None] | None:
        """Answer ``req`` now, or return the coroutine that will (it needs a person)."""
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
                first = broker.elevate_now(req, self.requester)
                if not isinstance(first, m.DecisionReply):
                    return self._answer_later(
                        req, broker.elevate_asked(req, first, self._notify(req))
                    )
                reply = first
            elif isinstance(req, m.ActionRequest):
                decided = broker.action_now(req, self.requester)
                if not isinstance(decided, m.DecisionReply):
                    return self._answer_later(
                        req, broker.action_asked(req, decided, self._notify(req))
                    )
                reply = decided
            elif isinstance(req, m.AskpassRequest):
                return self._answer_later(req, broker.askpass(req, self.requester))
            elif isinstance(req, m.SudoResultRequest):
                reply = broker.sudo_result(req)
            elif isinstance(req, m.OpenBrowserRequest):
                reply = self.server.open_browser(req)
            else:  # pragma: no cover - the decoder only yields the types above
                reply = m.ErrorReply(id=req.id, code=m.ErrorCode.UNKNOWN_OP, message="unknown op")
        except m.MessageError as exc:
            reply = exc.to_reply()
        except Exception as exc:
            reply = _internal_error(req, exc)
        self.write(reply)
        return None

    def _notify(self, req: m.ElevateRequest | m.ActionRequest) -> Callable[[m.ProgressState], None]:
        def progress(state: m.ProgressState) -> None:
            # Written now, not from a task: a notice must precede the decision.
            self.write(m.ProgressNotice(id=req.id, state=state))

        return progress

    async def _answer_later(self, req: m.Request, decision: Awaitable[m.Reply]) -> None:
        broker = self.server.broker
        try:
            reply = await decision
        except m.MessageError as exc:
            reply = exc.to_reply()
        except asyncio.CancelledError:
            if broker.closing:
                # Shutdown: the requester still gets its denial before the close.
                self.write(
                    m.DecisionReply(
                        id=req.id,
                        decision=m.Decision.DENY,
                        reason="the broker is shutting down",
                        by=m.DecidedBy.SHUTDOWN,
                    )
                )
            raise
        except Exception as exc:
            reply = _internal_error(req, exc)
        self.write(reply)

    def _cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    async def cancel_all(self) -> None:
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _internal_error(req: m.Request, exc: Exception) -> m.ErrorReply:
    log.error("internal error while handling %s", req.op, exc_info=exc)
    return m.ErrorReply(
        id=req.id, code=m.ErrorCode.INTERNAL, message=f"internal error: {type(exc).__name__}"
    )


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
        self.connections: set[_Connection] = set()
        self.closing = False
        self._inode: int | None = None
        self.closed = asyncio.Event()
        # Default caps fitted to the descriptor limit (raised before, by the programs).
        self.peers = PeerBook(limits or FloodLimits().fitted(descriptor_limit()))
        self._refusals = Throttle()
        # The requests read and not yet decided (see drain()), and while a batch is
        # decided, the replies held back until its audit records are written.
        self.taken: list[tuple[_Connection, m.Request | m.MessageError]] = []
        self.holding = False
        self.held_replies: list[tuple[_Connection, bytes]] = []
        self._stepping = False

    def take(self, conn: _Connection, items: list[m.Request | m.MessageError]) -> None:
        """Requests (and bad frames) ``conn`` sent: those of an event loop step's first
        read are decided at once (a lone request waits for nothing); those of its
        further reads together, when the step ends (:meth:`drain`)."""
        self.taken += [(conn, item) for item in items]
        if not self._stepping:
            self._stepping = True
            asyncio.get_running_loop().call_soon(self._end_step)
            self.drain()

    def _end_step(self) -> None:
        self._stepping = False
        self.drain()

    def drain(self) -> None:
        """Decide every request taken so far, in the order read, in one pass.

        The batch's audit records are written in one ``write``, then its replies
        leave: no reply precedes its record, and a busy loop writes the audit
        file once per batch, not once per decision."""
        if self.holding or not self.taken:
            return
        self.holding = True
        self.broker.audit.hold()
        try:
            while self.taken:
                batch, self.taken = self.taken, []
                for conn, item in batch:
                    conn.dispatch(item)
        finally:
            self.flush()

    def flush(self) -> None:
        """Write the held audit records, then the replies that waited for them."""
        if not self.holding:
            return
        self.holding = False
        try:
            self.broker.audit.release()
        except AuditError as exc:  # as for a single record: logged, never fatal
            log.error("could not write the audit log %s: %s", self.broker.audit.path, exc)
        replies, self.held_replies = self.held_replies, []
        for conn, data in replies:
            conn.send(data)

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
        self._server = await loop.create_unix_server(
            lambda: _Connection(self), sock=sock, backlog=_BACKLOG
        )

    def open_browser(self, req: m.OpenBrowserRequest) -> m.Reply:
        if self.on_open_browser is None:
            return m.ErrorReply(
                id=req.id, code=m.ErrorCode.UNSUPPORTED, message="this broker has no Tool Browser"
            )
        self.on_open_browser()
        return m.AckReply(id=req.id)

    async def close(self) -> None:
        """Deny everything pending, close every connection, remove the socket file."""
        self.drain()
        self.broker.begin_shutdown()
        self.closing = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.cancel_all()  # each pending request gets its denial written
        self.flush()  # the denials just written
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()  # after the replies already written
        # Wait for the replies to leave; a peer that never reads them is cut off.
        lost = [conn.lost for conn in self.connections]
        if lost:
            await asyncio.wait(lost, timeout=2.0)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        self._remove_socket()
        self.closed.set()

    def _remove_socket(self) -> None:
        # Under the start-up lock: a new instance cannot bind between our check and unlink.
        with contextlib.suppress(OSError, OllieError), exclusive(lock_path_for(self.path), 5.0):
            if self._inode is not None and os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    @property
    def connection_count(self) -> int:
        return len(self.connections)
