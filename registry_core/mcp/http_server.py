"""``ollie-tools mcp --http``: the same server over streamable HTTP, on localhost only.

Bound to ``127.0.0.1`` (never another address); every request must carry
``Authorization: Bearer <token>``, a token made fresh at each start
(``secrets.token_urlsafe(32)``) and written, with the URL, to a 0600 file in
the runtime directory (``$XDG_RUNTIME_DIR/ollie/mcp-http.json``), never to
the terminal.  Other local users cannot read it; a web page cannot guess
it; and the SDK's DNS-rebinding protection accepts only ``Host:
127.0.0.1:PORT`` / ``localhost:PORT``.  A wrong or missing token is a 401
before the SDK sees the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from registry_core import paths
from registry_core.mcp.server import RegistryServer

HOST = "127.0.0.1"
PATH = "/mcp"
TOKEN_FILE = "mcp-http.json"  # noqa: S105 (a file name)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def token_file(env: dict[str, str]) -> Path:
    return paths.runtime_dir(env) / "ollie" / TOKEN_FILE


def write_token_file(path: Path, url: str, token: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "token": token, "pid": os.getpid()}, handle)
    os.replace(tmp, path)


class BearerGate:
    """ASGI: pass only requests to :data:`PATH` with the right bearer token."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is handled by whoever runs us
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if scope.get("path") != PATH:
            await _plain(send, 404, b"not found")
        elif not hmac.compare_digest(given, self._expected):
            await _plain(send, 401, b"missing or wrong bearer token")
        else:
            await self._app(scope, receive, send)


def _remove_own(path: Path) -> None:
    """Remove the token file unless a later start has replaced it."""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


async def _plain(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_http(server: RegistryServer, port: int, env: dict[str, str]) -> None:
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    bound = sock.getsockname()[1]
    hosts = [f"{HOST}:{bound}", f"localhost:{bound}"]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )
    manager = StreamableHTTPSessionManager(app=server.server, security_settings=security)
    token = secrets.token_urlsafe(32)
    url = f"http://{HOST}:{bound}{PATH}"
    where = token_file(env)
    app = BearerGate(manager.handle_request, token)
    config = uvicorn.Config(app, lifespan="off", log_level="warning")
    web = uvicorn.Server(config)
    # uvicorn shuts down on SIGTERM/SIGINT, then raises the signal again for the
    # handler it found: ours, so the process ends normally and removes its token file.
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, setattr, web, "should_exit", True)
    async with manager.run():
        server.watch()
        write_token_file(where, url, token)
        print(f"ollie-tools mcp: serving {url}; token in {where}", file=sys.stderr, flush=True)
        try:
            await web.serve(sockets=[sock])
        finally:
            server.unwatch()
            _remove_own(where)
