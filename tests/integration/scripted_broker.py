"""Test helpers for a live elevation broker: a scripted person, a server thread, raw clients.

- :class:`FakePrompter` is the person: scripted approvals and passwords, every
  question recorded (never a password), optionally "thinking" (held) until
  the test releases it.  It is thread-aware: the broker's loop runs in one
  thread, the test waits for events from another with deadlines.
- :class:`ServerThread` runs the real :class:`BrokerServer` + :class:`Broker`
  on a Unix socket in an asyncio loop of its own thread.
- :class:`RawClient` speaks the wire protocol with a plain blocking socket.
- Run as a program (``python scripted_broker.py --socket ... --events-fd N``),
  this module is the test-only broker launcher used across a process (and
  user) boundary: the real broker with a FakePrompter whose script arrives
  as one JSON line on stdin (so no password is ever in a file), its events
  leaving as JSON lines on ``--events-fd``.  Later stdin lines are commands:
  ``{"cmd": "release"}`` answers the oldest held question, ``{"cmd":
  "advance", "seconds": N}`` moves the broker's clock forward.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from registry_core.broker.ask.text import approval_text
from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.serve.flood import FloodLimits
from registry_core.broker.serve.server import BrokerServer
from registry_core.pinned import approved_argv
from registry_core.registry import RegistryLoader
from registry_core.trusted import trusted_program

T = TypeVar("T")
Event = dict[str, Any]
DEADLINE = 20.0


class FakePrompter:
    """A scripted person behind the broker's :class:`Prompter` seam.

    ``approvals`` / ``passwords`` are answered in order (an exception instance
    is raised instead, as a broken front-end would); once a script runs out,
    ``default`` (approval) or ``None`` (password: cancel) is used.  With
    ``hold_approvals`` / ``hold_passwords`` every such question waits for
    :meth:`release`, like a person thinking.
    """

    def __init__(
        self,
        approvals: Iterable[Approval | BaseException] = (),
        passwords: Iterable[str | BaseException | None] = (),
        *,
        default: Approval | None = None,
        available: bool = True,
        hold_approvals: bool = False,
        hold_passwords: bool = False,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.approvals: collections.deque[Approval | BaseException] = collections.deque(approvals)
        self.passwords: collections.deque[str | BaseException | None] = collections.deque(passwords)
        self.default = default or Approval(False, Remember.ONCE, "the script has no answer")
        self.is_available = available
        self.hold_approvals = hold_approvals
        self.hold_passwords = hold_passwords
        self.events: list[Event] = []
        self.requests: list[ApprovalRequest | PasswordRequest] = []
        self._on_event = on_event
        self._cond = threading.Condition()
        self._gates: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._credits = 0

    # --- the Prompter protocol ----------------------------------------------------

    @property
    def name(self) -> str:
        return "fake"

    def available(self) -> bool:
        return self.is_available

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        self._record(
            {
                "type": "approval",
                "id": request.id,
                "tool": request.tool,
                "kind": request.kind.value,
                "description": request.description,
                "executable": request.executable,
                "sha256": request.sha256,
                "argv": list(request.argv),
                "args": dict(request.args),
                "cwd": request.cwd,
                "code": request.code,
                "mismatches": list(request.mismatches),
                "timeout": request.timeout,
                "requester": request.requester.to_json(),
                # What the terminal, kdialog and zenity front-ends would show above it.
                "warnings": list(approval_text(request).warnings),
            },
            request,
        )
        await self._think(request.id, self.hold_approvals)
        answer = self.approvals.popleft() if self.approvals else self.default
        self._record({"type": "answered", "id": request.id})
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        self._record(
            {
                "type": "password",
                "id": request.id,
                "approval_id": request.approval.id,
                "tool": request.approval.tool,
                "attempt": request.attempt,
                "retry": request.retry,
                "retry_text": request.retry_text,
                "prompt": request.prompt,
                "user": request.user,
            },
            request,
        )
        await self._think(request.id, self.hold_passwords)
        answer = self.passwords.popleft() if self.passwords else None
        self._record({"type": "answered", "id": request.id})
        if isinstance(answer, BaseException):
            raise answer
        return PasswordAnswer(answer)

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        self._record({"type": "decided", "id": request_id, "approved": approved, "by": by})

    # --- for the tests ------------------------------------------------------------

    def release(self, count: int = 1) -> None:
        """Let the oldest ``count`` held questions be answered (thread-safe)."""
        with self._cond:
            for _ in range(count):
                if self._gates:
                    loop, gate = self._gates.pop(0)
                    loop.call_soon_threadsafe(gate.set)
                else:
                    self._credits += 1

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = DEADLINE) -> Event:
        """The first recorded event matching ``predicate``; waits up to ``timeout`` seconds."""
        found: list[Event] = []

        def match() -> bool:
            found[:] = [e for e in self.events if predicate(e)][:1]
            return bool(found)

        with self._cond:
            if not self._cond.wait_for(match, timeout):
                raise AssertionError(f"no matching prompter event in {timeout} s: {self.events}")
        return found[0]

    def of_type(self, kind: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e["type"] == kind]

    def _record(
        self, event: Event, request: ApprovalRequest | PasswordRequest | None = None
    ) -> None:
        with self._cond:
            self.events.append(event)
            if request is not None:
                self.requests.append(request)
            self._cond.notify_all()
        if self._on_event is not None:
            self._on_event(event)

    async def _think(self, request_id: str, hold: bool) -> None:
        if not hold:
            return
        gate = asyncio.Event()
        entry = (asyncio.get_running_loop(), gate)
        with self._cond:
            if self._credits:
                self._credits -= 1
                gate.set()
            else:
                self._gates.append(entry)
        try:
            await gate.wait()
        except asyncio.CancelledError:
            with self._cond:
                if entry in self._gates:
                    self._gates.remove(entry)
            self._record({"type": "cancelled", "id": request_id})
            raise


def make_broker(
    tools: Iterable[Path],
    state: Path,
    prompter: FakePrompter,
    *,
    prompt_timeout: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    cached_registry: bool = False,
) -> Broker:
    """The real broker over a tools path, with policies and audit under ``state``."""
    loader = RegistryLoader(list(tools), {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    registry = loader.load
    if cached_registry:
        snapshot = loader.load()

        def registry() -> Any:
            return snapshot

    return Broker(
        registry=registry,
        prompter=prompter,
        policies=PolicyStore(state / "config" / "ollie" / "policies.yaml"),
        audit=AuditLog(state / "state" / "ollie" / "audit.jsonl"),
        config=BrokerConfig(host="testhost", prompt_timeout=prompt_timeout),
        clock=clock,
    )


def audit_records(state: Path) -> list[dict[str, Any]]:
    path = state / "state" / "ollie" / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ServerThread:
    """A live :class:`BrokerServer` in its own event loop thread."""

    def __init__(
        self, make: Callable[[], Broker], path: Path, limits: FloodLimits | None = None
    ) -> None:
        self._make = make
        self.path = path
        self.limits = limits
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: BrokerServer | None = None

    def __enter__(self) -> ServerThread:
        self._thread.start()

        async def start() -> BrokerServer:
            server = BrokerServer(self._make(), self.path, limits=self.limits)
            await server.start()
            return server

        self.server = self.run(start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def broker(self) -> Broker:
        assert self.server is not None
        return self.server.broker

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = DEADLINE) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def close_server(self) -> None:
        if self.server is not None and not self.server.closed.is_set():
            self.run(self.server.close())

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.close_server()

        async def drain() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(drain())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(DEADLINE)
        self.loop.close()


class RawClient:
    """A blocking protocol client on a plain socket: frames in, JSON objects out."""

    def __init__(self, path: Path, timeout: float = DEADLINE) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self._buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.sock.sendall(data)

    def read_line(self) -> bytes | None:
        """The next frame (without its newline), or ``None`` at end of stream."""
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def receive(self) -> dict[str, Any] | None:
        line = self.read_line()
        return None if line is None else json.loads(line)

    def reply(self) -> dict[str, Any]:
        """The next message that is not a ``progress`` notice."""
        while True:
            message = self.receive()
            if message is None:
                raise AssertionError("the broker closed the connection without a reply")
            if message["op"] != "progress":
                return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.reply()


def run_argv(executable: str | Path) -> list[str]:
    """The argv the dispatcher sends for ``executable`` now (registry_core.pinned)."""
    exe = str(executable)
    return approved_argv(trusted_program("python3"), file_sha256(exe) or "", exe)


def elevate_message(request_id: Any, tool: str, argv: list[str], **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "v": 1,
        "id": request_id,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": argv,
        "args": {},
        "cwd": "/",
    }
    message.update(extra)
    return message


@contextlib.contextmanager
def live_server(
    tools: Iterable[Path],
    state: Path,
    path: Path,
    prompter: FakePrompter,
    limits: FloodLimits | None = None,
    **kw: Any,
) -> Iterator[ServerThread]:
    tool_list = list(tools)
    make = lambda: make_broker(tool_list, state, prompter, **kw)  # noqa: E731
    with ServerThread(make, path, limits) as thread:
        yield thread


@contextlib.contextmanager
def server_without_tools(base: Path, prompter: FakePrompter) -> Iterator[ServerThread]:
    """:func:`live_server` with no tools, state in ``base``, socket ``base/run/elevate.sock``."""
    tools = base / "tools"
    tools.mkdir()
    with live_server([tools], base, base / "run" / "elevate.sock", prompter) as thread:
        yield thread


# --- the launcher (a separate process, possibly another user) ---------------------


def _approval(data: dict[str, Any]) -> Approval:
    return Approval(bool(data["approved"]), Remember(data.get("remember", "once")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="test-only broker with a scripted person")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--tools", required=True, help="colon-separated tools path")
    parser.add_argument("--state", type=Path, required=True, help="policies + audit go here")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    script = json.loads(sys.stdin.readline())
    events = os.fdopen(args.events_fd, "w", buffering=1)
    lock = threading.Lock()

    def emit(event: Event) -> None:
        with lock:
            events.write(json.dumps(event) + "\n")

    prompter = FakePrompter(
        [_approval(a) for a in script.get("approvals", [])],
        script.get("passwords", []),
        default=_approval(script["default"]) if script.get("default") else None,
        hold_approvals=bool(script.get("hold_approvals")),
        hold_passwords=bool(script.get("hold_passwords")),
        on_event=emit,
    )
    del script  # the passwords now live in the prompter only
    offset = [0.0]

    def clock() -> float:
        return time.monotonic() + offset[0]

    async def serve() -> None:
        tools = [Path(p) for p in args.tools.split(":") if p]
        broker = make_broker(tools, args.state, prompter, prompt_timeout=args.timeout, clock=clock)
        server = BrokerServer(broker, args.socket)
        await server.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def commands() -> None:
            for line in sys.stdin:
                command = json.loads(line)
                if command["cmd"] == "release":
                    prompter.release()
                elif command["cmd"] == "advance":
                    offset[0] += float(command["seconds"])
                emit({"type": "command_done", "cmd": command["cmd"]})
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=commands, daemon=True).start()
        emit({"type": "ready", "pid": os.getpid(), "uid": os.getuid()})
        await stop.wait()
        await server.close()
        emit({"type": "stopped"})

    asyncio.run(serve())
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
