"""Shared pieces of ollie_tray.notify's unit tests: sample requests and a fake bus.

A ``FakeBus`` stands in for dbus-fast's MessageBus: it records every method
call, answers like a notification server (or like a bus without one) and lets
a test deliver signals.  The real server is exercised in
tests/integration/test_notify_dbus.py.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker_questions import approval_request
from dbus_fast import ErrorType, Message, MessageType

from ollie_tray.notify import Bus, Notifier
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind

SERVER = ":1.7"
SECRET = "hunter2-api-token"
CAPS = ["actions", "body", "body-markup"]


def make_request(request_id: str = "r1", **overrides: Any) -> ApprovalRequest:
    requester = overrides.pop(
        "requester",
        Requester(pid=4242, uid=1000, gid=1000, exe="/usr/bin/python3", cmdline=("python3",)),
    )
    fields: dict[str, Any] = {
        "id": request_id,
        "tool": "deploy",
        "kind": Kind.SANDBOX,
        "description": "Deploys",
        "executable": "/opt/tools/deploy",
        "sha256": None,
        "argv": ("/opt/tools/deploy", "--token", SECRET),
        "args": {"token": SECRET, "target": "prod"},
        "requester": requester,
        "host": "laptop",
    }
    return approval_request(**{**fields, **overrides})


class FakeBus:
    """Answers like a session bus with (or without) a notification server."""

    def __init__(
        self,
        caps: list[str] | None = None,
        *,
        server: bool = True,
        fail_notify: bool = False,
        hang: set[str] | None = None,
    ) -> None:
        self.caps = CAPS if caps is None else caps
        self.server = server
        self.fail_notify = fail_notify
        self.hang = hang or set()
        self.calls: list[Message] = []
        self.handlers: list[Callable[[Message], Any]] = []
        self.connected = True
        self.next_id = 10
        self.disconnected = asyncio.Event()

    def members(self) -> list[str]:
        return [m.member for m in self.calls if m.member is not None]

    def sent(self, member: str) -> list[Message]:
        return [m for m in self.calls if m.member == member]

    async def call(self, msg: Message) -> Message | None:
        self.calls.append(msg)
        msg.serial = msg.serial or len(self.calls)
        if msg.member in self.hang:
            await asyncio.Event().wait()
        if msg.destination == "org.freedesktop.DBus":
            return Message.new_method_return(msg)
        if not self.server:
            error = Message.new_error(msg, ErrorType.SERVICE_UNKNOWN, "no such name")
            error.sender = "org.freedesktop.DBus"
            return error
        if msg.member == "GetCapabilities":
            reply = Message.new_method_return(msg, "as", [self.caps])
        elif msg.member == "Notify":
            if self.fail_notify:
                return Message.new_error(msg, "org.example.Error.Broken", "broken")
            replaces = msg.body[1]
            nid = replaces or self.next_id
            self.next_id += 1
            reply = Message.new_method_return(msg, "u", [nid])
        else:
            reply = Message.new_method_return(msg)
        reply.sender = SERVER
        return reply

    def add_message_handler(self, handler: Callable[[Message], Any]) -> None:
        self.handlers.append(handler)

    def remove_message_handler(self, handler: Callable[[Message], Any]) -> None:
        self.handlers.remove(handler)

    def disconnect(self) -> None:
        self.connected = False
        self.disconnected.set()

    async def wait_for_disconnect(self) -> None:
        await self.disconnected.wait()

    def emit(self, member: str, signature: str, body: list[Any], sender: str = SERVER) -> None:
        msg = Message(
            message_type=MessageType.SIGNAL,
            path="/org/freedesktop/Notifications",
            interface="org.freedesktop.Notifications",
            member=member,
            signature=signature,
            body=body,
            sender=sender,
        )
        for handler in list(self.handlers):
            handler(msg)

    def owner_changed(self, old: str, new: str) -> None:
        msg = Message(
            message_type=MessageType.SIGNAL,
            path="/org/freedesktop/DBus",
            interface="org.freedesktop.DBus",
            member="NameOwnerChanged",
            signature="sss",
            body=["org.freedesktop.Notifications", old, new],
            sender="org.freedesktop.DBus",
        )
        for handler in list(self.handlers):
            handler(msg)


def _bus_is_a_bus(bus: FakeBus) -> Bus:
    return bus  # mypy checks FakeBus against the Protocol


class Harness:
    def __init__(self, bus: FakeBus | None = None, *, fallback: bool = True, **kw: Any) -> None:
        self.bus = bus or FakeBus()
        self.review: list[str] = []
        self.deny: list[str] = []
        self.fallbacks: list[tuple[str, str]] = []

        async def connect() -> Bus:
            return self.bus

        self.notifier = Notifier(
            on_review=self.review.append,
            on_deny=self.deny.append,
            fallback=(lambda t, b: self.fallbacks.append((t, b))) if fallback else None,
            connect=connect,
            **kw,
        )


def run(coro_fn: Callable[[], Any]) -> Any:
    return asyncio.run(coro_fn())
