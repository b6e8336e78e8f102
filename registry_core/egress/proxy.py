"""The egress proxy: HTTP (forwarding and CONNECT) and SOCKS5 on a Unix socket.

One :class:`EgressProxy` serves one sandboxed call: it listens on a Unix
socket bound into the sandbox, where the forwarder
(:mod:`registry_core.egress.forwarder`) relays the tool's connections to
``127.0.0.1:PORT`` of the namespace's own loopback.

For each connection it reads the request (first byte ``0x05``: SOCKS5, else
HTTP), resolves the name itself with the system resolver (``getaddrinfo`` in
a thread; injectable), decides with :class:`~registry_core.egress.rules.EgressRules`
and, for an unknown destination of a profile with ``ask: true``, the injected
``ask`` callback; then connects to an address it checked (never resolving
again: no DNS rebinding) and relays bytes both ways.  ``record`` is called
once at the decision and once at close (with the bytes relayed).

Refusals are visible to the tool: HTTP ``403`` with a plain-text body naming
``host:port`` and why; SOCKS5 reply ``0x02`` (not allowed by ruleset).
Malformed input gets ``400``/``431``/SOCKS ``0x01``/``0x07``/``0x08`` and never
stops the server.

Bounds (:class:`ProxyLimits`): request heads at most 16 KiB, read within
10 s; at most 64 connections still in their handshake -- a new one evicts
the oldest, so connections that stall (a flood, a slow client) cannot lock a
prompt one out; at most 256 connections in all (more are closed at once).
HTTP forwarding serves one request per connection (``Connection: close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import logging
import os
import socket
import stat
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from registry_core.egress.rules import (
    Destination,
    EgressRules,
    HostPattern,
    IPAddress,
    Verdict,
    destination,
    normalise_address,
)
from registry_core.errors import EgressRequestError, EgressSetupError, HostPatternError

log = logging.getLogger(__name__)

SOCKS_VERSION = 5
SOCKS_OK = 0x00
SOCKS_FAILURE = 0x01
SOCKS_NOT_ALLOWED = 0x02
SOCKS_NET_UNREACHABLE = 0x03
SOCKS_HOST_UNREACHABLE = 0x04
SOCKS_CONNECTION_REFUSED = 0x05
SOCKS_TTL_EXPIRED = 0x06
SOCKS_COMMAND_NOT_SUPPORTED = 0x07
SOCKS_ADDRESS_NOT_SUPPORTED = 0x08


class Decision(NamedTuple):
    """The answer of the ``ask`` callback: ``by`` says who decided (a person, a policy)."""

    allow: bool
    by: str
    reason: str = ""


class AskRequest(NamedTuple):
    """What ``ask`` is asked about: an unknown public destination of ``tool``."""

    tool: str
    host: str
    port: int
    addresses: tuple[str, ...]


class ConnectionRecord(NamedTuple):
    """One audit record: ``event`` is ``decision`` or ``close``."""

    event: str
    tool: str
    protocol: str  # http-connect, http-forward, socks5
    host: str
    port: int
    addresses: tuple[str, ...]
    decision: str  # allowed, refused
    by: str  # the rule's origin, "rules", or who answered ask
    reason: str
    bytes_in: int = 0  # to the tool
    bytes_out: int = 0  # from the tool
    seconds: float = 0.0


class ProxyLimits(NamedTuple):
    max_connections: int = 256
    max_handshakes: int = 64
    handshake_timeout: float = 10.0
    resolve_timeout: float = 10.0
    connect_timeout: float = 10.0
    ask_timeout: float = 600.0
    max_head_bytes: int = 16 * 1024
    buffer_bytes: int = 1024 * 1024


DEFAULT_LIMITS = ProxyLimits()
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
Asker = Callable[[AskRequest], Awaitable[Decision]]
Recorder = Callable[[ConnectionRecord], None]


async def system_resolve(host: str, port: int) -> Sequence[IPAddress]:
    """The system resolver's addresses (/etc/hosts, then DNS), in its order."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    out: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = normalise_address(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]))
            if address not in out:
                out.append(address)
    return out


class _Answered(Exception):
    """The client has had its answer already: close without another reply."""


class _Refused(Exception):
    """A decided refusal (403 / SOCKS 0x02) or a failure to reach an allowed host."""

    def __init__(
        self,
        reason: str,
        status: int = 403,
        socks_code: int = SOCKS_NOT_ALLOWED,
        *,
        by: str = "rules",
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.by = by
        self.status = status
        self.socks_code = socks_code


def _by(rule: HostPattern | None) -> str:
    return rule.origin if rule is not None and rule.origin else "rules"


class _Request(NamedTuple):
    protocol: str
    host: str
    port: int
    head: bytes  # sent upstream first (HTTP forwarding: the rewritten request)
    early: bytes  # bytes the client sent after its request


_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    504: "Gateway Timeout",
}
_HOP_HEADERS = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
        b"host",
    }
)


def _http_reply(status: int, body: str) -> bytes:
    data = body.encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + data


def _socks_reply(code: int) -> bytes:
    return bytes((SOCKS_VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0))


def _split_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        host, sep, rest = authority[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise EgressRequestError(f"bad authority {authority!r}")
        port_text = rest[1:] if rest else ""
    elif authority.count(":") == 1:
        host, _, port_text = authority.partition(":")
    elif ":" in authority:
        raise EgressRequestError(f"bad authority {authority!r} (IPv6 needs [brackets])")
    else:
        host, port_text = authority, ""
    if not port_text:
        if default_port is None:
            raise EgressRequestError(f"no port in {authority!r} (write host:port)")
        return host, default_port
    if not port_text.isdecimal() or not port_text.isascii() or not 0 < int(port_text) < 65536:
        raise EgressRequestError(f"bad port in {authority!r}")
    return host, int(port_text)


class _Conn:
    """A client socket with a bounded read buffer for the handshake."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, limit: int) -> None:
        self.loop = loop
        self.sock = sock
        self.limit = limit
        self.buf = bytearray()

    async def fill(self) -> None:
        if len(self.buf) >= self.limit:
            raise EgressRequestError("request head too large", status=431)
        data = await self.loop.sock_recv(self.sock, self.limit - len(self.buf))
        if not data:
            raise EgressRequestError("connection closed during the request")
        self.buf += data

    async def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self.fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def until(self, marker: bytes) -> bytes:
        start = 0
        while True:
            index = self.buf.find(marker, start)
            if index >= 0:
                out = bytes(self.buf[: index + len(marker)])
                del self.buf[: index + len(marker)]
                return out
            start = max(0, len(self.buf) - len(marker) + 1)
            await self.fill()

    async def send(self, data: bytes) -> None:
        await self.loop.sock_sendall(self.sock, data)


class EgressProxy:
    """The proxy of one sandboxed call of ``tool``, listening on ``socket_path``.

    ``ask`` answers unknown destinations when the rules ask (none: refused);
    ``record`` receives a :class:`ConnectionRecord` at each decision and close;
    ``resolve`` replaces the system resolver (tests).
    """

    def __init__(
        self,
        socket_path: str,
        rules: EgressRules,
        *,
        tool: str,
        ask: Asker | None = None,
        record: Recorder | None = None,
        resolve: Resolver | None = None,
        limits: ProxyLimits = DEFAULT_LIMITS,
    ) -> None:
        self.socket_path = socket_path
        self.rules = rules
        self.tool = tool
        self.ask = ask
        self.record = record
        self.resolve = resolve or system_resolve
        self.limits = limits
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        # Each connection's task and its socket (closed when the task is done, even
        # when it was cancelled before it ever ran).
        self._tasks: dict[asyncio.Task[None], socket.socket] = {}
        self._handshaking: dict[asyncio.Task[None], None] = {}  # insertion order: oldest first

    @property
    def connections(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        """Bind and listen (the socket is the caller's new path, mode 0600), start accepting."""
        if self._listener is not None:
            return
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                listener.bind(self.socket_path)
            finally:
                os.umask(old)
            listener.listen(512)
            listener.setblocking(False)
        except OSError as exc:
            listener.close()
            raise EgressSetupError(f"cannot listen on {self.socket_path}: {exc}") from exc
        self._listener = listener
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def close(self) -> None:
        """Stop accepting, end every connection, remove the socket."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(self.socket_path).st_mode):
                    os.unlink(self.socket_path)

    async def __aenter__(self) -> EgressProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            try:
                conn, _ = await loop.sock_accept(self._listener)
            except OSError as exc:  # EMFILE and the like: wait, do not spin
                log.warning("egress proxy: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            if len(self._tasks) >= self.limits.max_connections:
                conn.close()  # over the bound: closed at once (the tool sees a reset)
                continue
            if len(self._handshaking) >= self.limits.max_handshakes:
                oldest = next(iter(self._handshaking))
                self._handshaking.pop(oldest)
                oldest.cancel()
            task = loop.create_task(self._serve(conn))
            self._tasks[task] = conn
            self._handshaking[task] = None
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        conn = self._tasks.pop(task, None)
        if conn is not None:
            conn.close()
        self._handshaking.pop(task, None)

    def _handshake_over(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handshaking.pop(task, None)

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        client = _Conn(loop, sock, self.limits.max_head_bytes)
        protocol = "http"
        try:
            try:
                async with asyncio.timeout(self.limits.handshake_timeout):
                    first = await client.exactly(1)
                    protocol = "socks5" if first[0] == SOCKS_VERSION else "http"
                    client.buf[0:0] = first
                    if protocol == "socks5":
                        request = await self._socks_request(client)
                    else:
                        request = await self._http_request(client)
            except TimeoutError:
                raise EgressRequestError(
                    "request not received in time", status=408, socks_code=SOCKS_FAILURE
                ) from None
            self._handshake_over()
            await self._handle(client, request)
        except EgressRequestError as exc:
            with contextlib.suppress(OSError):
                if protocol == "socks5":
                    await client.send(_socks_reply(exc.socks_code))
                else:
                    await client.send(
                        _http_reply(exc.status, f"Ollie egress proxy: {exc.reason}\n")
                    )
        except (OSError, _Answered):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one connection stop the server
            log.exception("egress proxy: unexpected error")
        finally:
            sock.close()

    # --- protocols -----------------------------------------------------------

    async def _socks_request(self, client: _Conn) -> _Request:
        version, count = await client.exactly(2)
        methods = await client.exactly(count)
        if 0x00 not in methods:
            await client.send(bytes((SOCKS_VERSION, 0xFF)))  # "no acceptable methods"
            raise _Answered("SOCKS5: only 'no authentication' is offered")
        await client.send(bytes((SOCKS_VERSION, 0x00)))
        version, command, _, kind = await client.exactly(4)
        if version != SOCKS_VERSION:
            raise EgressRequestError("SOCKS5: bad version in the request")
        if kind == 1:
            host = str(ipaddress.IPv4Address(await client.exactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await client.exactly(16)))
        elif kind == 3:
            (length,) = await client.exactly(1)
            raw = await client.exactly(length)
            host = raw.decode("ascii", "replace")
        else:
            raise EgressRequestError(
                "SOCKS5: unknown address type", socks_code=SOCKS_ADDRESS_NOT_SUPPORTED
            )
        (port,) = struct.unpack("!H", await client.exactly(2))
        if command != 1:
            raise EgressRequestError(
                "SOCKS5: only CONNECT is supported", socks_code=SOCKS_COMMAND_NOT_SUPPORTED
            )
        if port == 0 or not host:
            raise EgressRequestError("SOCKS5: no host or port 0")
        early = bytes(client.buf)
        client.buf.clear()
        return _Request("socks5", host, port, b"", early)

    async def _http_request(self, client: _Conn) -> _Request:
        head = await client.until(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        try:
            method, target, version = lines[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            raise EgressRequestError("malformed request line") from None
        if not version.startswith("HTTP/1."):
            raise EgressRequestError(f"unsupported protocol {version!r}")
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip() or b" " in name:
                raise EgressRequestError("malformed header line")
            headers.append((name, value.strip()))
        early = bytes(client.buf)
        client.buf.clear()
        if method == "CONNECT":
            host, port = _split_authority(target, None)
            return _Request("http-connect", host, port, b"", early)
        if not target.lower().startswith("http://"):
            raise EgressRequestError(
                "only http:// URLs are forwarded; use CONNECT for https"
                if target.lower().startswith("https://")
                else f"expected an absolute http:// URL, got {target[:100]!r}"
            )
        parts = urlsplit(target)
        if parts.username is not None or parts.password is not None:
            raise EgressRequestError("credentials in the URL are not forwarded")
        host, port = _split_authority(parts.netloc, 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        drop = set(_HOP_HEADERS)
        for name, value in headers:
            if name.lower() == b"connection":
                drop.update(t.strip().lower() for t in value.split(b","))
        out = [f"{method} {path} {version}".encode("ascii"), b"Host: " + parts.netloc.encode()]
        out += [name + b": " + value for name, value in headers if name.lower() not in drop]
        out.append(b"Connection: close")
        return _Request("http-forward", host, port, b"\r\n".join(out) + b"\r\n\r\n", early)

    # --- deciding, connecting, relaying --------------------------------------

    def _record(self, event: str, request: _Request, **fields: object) -> None:
        if self.record is None:
            return
        values: dict[str, object] = {
            "event": event,
            "tool": self.tool,
            "protocol": request.protocol,
            "host": request.host,
            "port": request.port,
            "addresses": (),
            "decision": "refused",
            "by": "rules",
            "reason": "",
        }
        values.update(fields)
        try:
            self.record(ConnectionRecord(**values))  # type: ignore[arg-type]
        except Exception:  # the audit sink's failure must not hide the decision
            log.exception("egress proxy: record failed")

    async def _decide(self, request: _Request) -> tuple[Destination, tuple[IPAddress, ...], str]:
        """The destination, the addresses to connect to and who allowed it; raises _Refused."""
        try:
            dest = destination(request.host, request.port)
        except HostPatternError as exc:
            raise _Refused(f"not a valid host: {exc.reason}") from None
        early = self.rules.denied_by_name(dest)
        if early is not None:
            raise _Refused(early.reason, by=_by(early.rule))
        if dest.name is None:
            addresses: Sequence[IPAddress] = [ipaddress.ip_address(dest.host)]
        else:
            try:
                async with asyncio.timeout(self.limits.resolve_timeout):
                    addresses = await self.resolve(dest.name, dest.port)
            except (OSError, TimeoutError, UnicodeError) as exc:
                raise _Refused(
                    f"cannot resolve {dest.name}: {exc}", 502, SOCKS_HOST_UNREACHABLE
                ) from None
        decision = self.rules.decide(dest, addresses)
        if decision.verdict is Verdict.ALLOW:
            return dest, decision.addresses, _by(decision.rule)
        if decision.verdict is not Verdict.ASK:
            raise _Refused(decision.reason, by=_by(decision.rule))
        if self.ask is None:
            raise _Refused("not in allow_hosts, and nobody to ask")
        shown = tuple(str(a) for a in decision.addresses)
        try:
            async with asyncio.timeout(self.limits.ask_timeout):
                answer = await self.ask(AskRequest(self.tool, dest.host, dest.port, shown))
        except TimeoutError:
            raise _Refused(
                "not in allow_hosts, and the question was not answered", by="timeout"
            ) from None
        except Exception as exc:  # the asker failed: refused (fail closed), never crashed
            log.exception("egress proxy: ask failed")
            raise _Refused(f"not in allow_hosts, and asking failed: {exc}", by="ask") from None
        if not answer.allow:
            raise _Refused(answer.reason or f"refused by {answer.by}", by=answer.by)
        return dest, decision.addresses, answer.by

    async def _connect(self, addresses: Sequence[IPAddress], port: int) -> socket.socket:
        loop = asyncio.get_running_loop()
        error: BaseException | None = None
        for address in addresses:
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            upstream = socket.socket(family, socket.SOCK_STREAM)
            upstream.setblocking(False)
            try:
                async with asyncio.timeout(self.limits.connect_timeout):
                    await loop.sock_connect(upstream, (str(address), port))
            except (OSError, TimeoutError) as exc:
                upstream.close()
                error = exc
                continue
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return upstream
        if isinstance(error, ConnectionRefusedError):
            raise _Refused(f"connection refused: {error}", 502, SOCKS_CONNECTION_REFUSED)
        if isinstance(error, TimeoutError):
            raise _Refused("connection timed out", 504, SOCKS_TTL_EXPIRED)
        raise _Refused(f"cannot connect: {error}", 502, SOCKS_HOST_UNREACHABLE)

    async def _handle(self, client: _Conn, request: _Request) -> None:
        started = time.monotonic()
        target = f"{request.host}:{request.port}"
        try:
            dest, addresses, by = await self._decide(request)
        except _Refused as refused:
            self._record("decision", request, reason=refused.reason, by=refused.by)
            if request.protocol == "socks5":
                await client.send(_socks_reply(refused.socks_code))
            else:
                body = f"Ollie refused {target}: {refused.reason}\n"
                await client.send(_http_reply(refused.status, body))
            return
        shown = tuple(str(a) for a in addresses)
        self._record("decision", request, addresses=shown, decision="allowed", by=by)
        counts = [0, 0]  # in (to the tool), out (from the tool)
        reason = "closed"
        try:
            try:
                upstream = await self._connect(addresses, dest.port)
            except _Refused as failed:
                reason = failed.reason
                if request.protocol == "socks5":
                    await client.send(_socks_reply(failed.socks_code))
                else:
                    await client.send(_http_reply(failed.status, f"{target}: {failed.reason}\n"))
                return
            with upstream:
                if request.protocol == "socks5":
                    await client.send(_socks_reply(SOCKS_OK))
                elif request.protocol == "http-connect":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                first = request.head + request.early
                if first:
                    await client.loop.sock_sendall(upstream, first)
                    counts[1] += len(first)
                reason = await self._relay(client.sock, upstream, counts)
        finally:
            self._record(
                "close",
                request,
                addresses=shown,
                decision="allowed",
                by=by,
                reason=reason,
                bytes_in=counts[0],
                bytes_out=counts[1],
                seconds=round(time.monotonic() - started, 6),
            )

    async def _relay(
        self, client: socket.socket, upstream: socket.socket, counts: list[int]
    ) -> str:
        size = self.limits.buffer_bytes
        pump = _splice_pump if _SPLICE else _copy_pump

        async def one_way(src: socket.socket, dst: socket.socket, index: int) -> None:
            try:
                await pump(src, dst, counts, index, size)
            except OSError:
                for sock in (src, dst):  # wakes the other direction: both end
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                raise
            finally:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)

        results = await asyncio.gather(
            one_way(upstream, client, 0), one_way(client, upstream, 1), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, OSError):
                raise error
        return f"closed: {errors[0]}" if errors else "closed"


_SPLICE = hasattr(os, "splice") and hasattr(os, "SPLICE_F_NONBLOCK")


async def _copy_pump(
    src: socket.socket, dst: socket.socket, counts: list[int], index: int, size: int
) -> None:
    """Relay through a buffer of ours: two copies per chunk (no splice(2) here)."""
    loop = asyncio.get_running_loop()
    buf = bytearray(size)
    view = memoryview(buf)
    while True:
        n = await loop.sock_recv_into(src, buf)
        if not n:
            return
        await loop.sock_sendall(dst, view[:n])
        counts[index] += n


async def _ready(fd: int, *, write: bool) -> None:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await future
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _splice_pump(
    src: socket.socket, dst: socket.socket, counts: list[int], index: int, size: int
) -> None:
    """Relay socket to socket through a pipe with splice(2): the bytes never enter Python."""
    flags = os.SPLICE_F_NONBLOCK | os.SPLICE_F_MOVE
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, size)
        s, d = src.fileno(), dst.fileno()
        while True:
            try:
                n = os.splice(s, write_end, size, flags=flags)
            except BlockingIOError:
                await _ready(s, write=False)
                continue
            if not n:
                return
            left = n
            while left:
                try:
                    left -= os.splice(read_end, d, left, flags=flags)
                except BlockingIOError:
                    await _ready(d, write=True)
            counts[index] += n
    finally:
        os.close(read_end)
        os.close(write_end)
