"""A running egress proxy (own event loop thread) with the forwarder in front, and
local upstream servers on 127.0.0.1: no outside address is ever used."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from registry_core.egress import forwarder
from registry_core.egress.proxy import (
    DEFAULT_LIMITS,
    AskRequest,
    ConnectionRecord,
    Decision,
    EgressProxy,
    ProxyLimits,
)
from registry_core.egress.rules import EgressRules, IPAddress


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = f"hello {self.path} host={self.headers.get('Host')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    """A local HTTP server; its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


class Harness:
    """The proxy in a loop thread; ``port`` is the forwarder's on 127.0.0.1."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket_path = str(directory / "egress.sock")
        self.names: dict[str, list[str]] = {}
        self.resolved: list[str] = []
        self.records: list[ConnectionRecord] = []
        self.asked: list[AskRequest] = []
        self.answer = Decision(False, "person", "no")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy: EgressProxy | None = None
        self.port = 0
        self._listeners: list[socket.socket] = []

    async def resolve(self, name: str, port: int) -> Sequence[IPAddress]:
        self.resolved.append(name)
        if name not in self.names:
            raise OSError(f"{name}: no such test name")
        return [ipaddress.ip_address(a) for a in self.names[name]]

    async def ask(self, request: AskRequest) -> Decision:
        self.asked.append(request)
        return self.answer

    def wait_records(self, count: int, timeout: float = 10.0) -> list[ConnectionRecord]:
        """The records once there are ``count`` (a close is recorded after the reply)."""
        deadline = time.monotonic() + timeout
        while len(self.records) < count:
            assert time.monotonic() < deadline, self.records
            time.sleep(0.005)
        return list(self.records)

    def run(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(30)

    def start(self, rules: EgressRules, limits: ProxyLimits = DEFAULT_LIMITS) -> None:
        self.stop_proxy()
        self.proxy = EgressProxy(
            self.socket_path,
            rules,
            tool="test-tool",
            ask=self.ask,
            record=self.records.append,
            resolve=self.resolve,
            limits=limits,
        )
        self.run(self.proxy.start())
        if not self._listeners:
            self.port, self._listeners = forwarder.start(0, self.socket_path)

    def stop_proxy(self) -> None:
        if self.proxy is not None:
            self.run(self.proxy.close())
            self.proxy = None

    def close(self) -> None:
        self.stop_proxy()
        forwarder.stop(self._listeners)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def harness() -> Iterator[Harness]:
    directory = Path(tempfile.mkdtemp(prefix="eg", dir="/tmp"))
    h = Harness(directory)
    yield h
    h.close()
    shutil.rmtree(directory, ignore_errors=True)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        data = sock.recv(65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


Starter = Callable[[EgressRules], None]
