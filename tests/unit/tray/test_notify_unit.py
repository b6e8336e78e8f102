"""Unit tests of ollie_tray.notify: message content, the notifier's bookkeeping, fallbacks.

A ``FakeBus`` stands in for dbus-fast's MessageBus: it records every method
call, answers like a notification server (or like a bus without one) and lets
a test deliver signals.  The real server is exercised in
tests/integration/test_notify_dbus.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from dbus_fast import ErrorType, Message, MessageType, Variant

from ollie_tray.notify import (
    ACTIONS,
    APP_NAME,
    Bus,
    Notifier,
    Urgency,
    build_notification,
)
from registry_core.elevation.identity import Requester
from registry_core.elevation.messages import Kind
from registry_core.elevation.prompter import ApprovalRequest

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
        "variant": None,
        "executable": "/opt/tools/deploy",
        "sha256": None,
        "argv": ("/opt/tools/deploy", "--token", SECRET),
        "args": {"token": SECRET, "target": "prod"},
        "cwd": "/home/alice",
        "requester": requester,
        "host": "laptop",
        "timeout": 60.0,
    }
    fields.update(overrides)
    return ApprovalRequest(**fields)


# --- content ---------------------------------------------------------------------------


def test_sandbox_request_content() -> None:
    content = build_notification(make_request())
    assert content.summary == "Approve deploy?"
    assert content.body == (
        "Asks to run outside the sandbox as you.\n"
        "Requester: /usr/bin/python3 (pid 4242)\n"
        "Host: laptop"
    )
    assert content.actions == ("default", "Review", "review", "Review", "deny", "Deny")
    assert content.urgency is Urgency.NORMAL
    assert content.expire_timeout == 60_000
    hints = content.hints()
    assert hints["urgency"] == Variant("y", 1)
    assert hints["desktop-entry"] == Variant("s", "ollie-tray")


def test_sudo_request_is_critical_and_does_not_expire() -> None:
    content = build_notification(make_request(kind=Kind.SUDO))
    assert content.summary == "Root access for deploy?"
    assert content.body.startswith("Asks to run as root via sudo.\n")
    assert content.urgency is Urgency.CRITICAL
    assert content.hints()["urgency"] == Variant("y", 2)
    assert content.expire_timeout == 0


def test_remote_host_is_labelled() -> None:
    assert build_notification(make_request(remote=True)).body.endswith("Host: laptop [REMOTE]")
    marked = build_notification(make_request(remote=True), markup=True)
    assert marked.body.endswith("Host: laptop <b>[REMOTE]</b>")


def test_arguments_never_reach_the_notification() -> None:
    for kind in Kind:
        for markup in (False, True):
            content = build_notification(make_request(kind=kind), markup=markup)
            text = content.summary + content.body
            assert SECRET not in text
            assert "prod" not in text
            assert "--token" not in text


def test_no_actions_when_the_server_has_none() -> None:
    assert build_notification(make_request(), actions=False).actions == ()


def test_markup_is_escaped_only_for_markup_servers() -> None:
    requester = Requester(pid=1, uid=0, gid=0, exe="/opt/a&b/<b>x</b>")
    plain = build_notification(make_request(requester=requester))
    assert "Requester: /opt/a&b/<b>x</b> (pid 1)" in plain.body
    marked = build_notification(make_request(requester=requester), markup=True)
    assert "Requester: /opt/a&amp;b/&lt;b&gt;x&lt;/b&gt; (pid 1)" in marked.body


def test_requester_text_cannot_fake_lines_or_reorder_text() -> None:
    exe = "/tmp/x\nHost: trusted-host\u202e\x1b[31m"
    requester = Requester(pid=9, uid=0, gid=0, exe=exe)
    content = build_notification(make_request(requester=requester, tool="a\nb"))
    assert content.body.count("\n") == 2
    assert "\u202e" not in content.body
    assert "\x1b" not in content.body
    assert content.summary == "Approve a b?"


def test_long_fields_are_shortened() -> None:
    requester = Requester(pid=9, uid=0, gid=0, exe="/x" * 500)
    content = build_notification(make_request(requester=requester, tool="t" * 300))
    assert len(content.summary) < 90
    assert len(content.body) < 400
    assert "\u2026" in content.body


def test_missing_exe_falls_back_to_command_line_then_unknown() -> None:
    requester = Requester(pid=5, uid=0, gid=0, cmdline=("agent", "--x"))
    assert "Requester: agent (pid 5)" in build_notification(make_request(requester=requester)).body
    nobody = Requester(pid=6, uid=0, gid=0)
    assert (
        "Requester: unknown program (pid 6)"
        in build_notification(make_request(requester=nobody)).body
    )


def test_no_timeout_means_server_default_expiry() -> None:
    assert build_notification(make_request(timeout=0)).expire_timeout == -1
    assert build_notification(make_request(timeout=1e12)).expire_timeout == 2**31 - 1


# --- a fake bus ---------------------------------------------------------------------------


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


# --- start, raise, decide ------------------------------------------------------------------


def test_start_subscribes_and_reads_capabilities() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        assert h.notifier.supports_actions
        assert h.notifier.capabilities == frozenset(CAPS)
        rules = [m.body[0] for m in h.bus.sent("AddMatch")]
        assert "interface='org.freedesktop.Notifications'" in rules[0]
        assert "NameOwnerChanged" in rules[1]
        assert "arg0='org.freedesktop.Notifications'" in rules[1]
        assert h.bus.members()[-1] == "GetCapabilities"
        await h.notifier.close()

    run(main)


def test_request_raised_sends_notify_with_everything() -> None:
    h = Harness(FakeBus(caps=["actions", "body"]), icon="/usr/share/icons/ollie tray.svg")

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1", kind=Kind.SUDO))
        (notify,) = h.bus.sent("Notify")
        assert notify.destination == "org.freedesktop.Notifications"
        assert notify.path == "/org/freedesktop/Notifications"
        assert notify.signature == "susssasa{sv}i"
        app, replaces, icon, summary, body, actions, hints, expire = notify.body
        assert app == APP_NAME
        assert replaces == 0
        assert icon == "file:///usr/share/icons/ollie%20tray.svg"
        assert summary == "Root access for deploy?"
        assert body.splitlines()[1] == "Requester: /usr/bin/python3 (pid 4242)"
        assert actions == list(ACTIONS)
        assert hints == {"urgency": Variant("y", 2), "desktop-entry": Variant("s", "ollie-tray")}
        assert expire == 0
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)
    assert h.fallbacks == []


def test_icon_name_by_default_and_markup_escaping_when_advertised() -> None:
    h = Harness()
    requester = Requester(pid=1, uid=0, gid=0, exe="/a&b")

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request(requester=requester))
        (notify,) = h.bus.sent("Notify")
        assert notify.body[2] == "ollie-tray"
        assert "/a&amp;b" in notify.body[4]
        await h.notifier.close()

    run(main)


def test_request_decided_closes_its_notification() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        await h.notifier.request_decided("r1")
        (close,) = h.bus.sent("CloseNotification")
        assert close.body == [10]
        assert close.signature == "u"
        assert h.notifier.notification_id("r1") is None
        assert h.notifier.notification_id("r2") == 11
        await h.notifier.request_decided("r1")  # twice: nothing more
        await h.notifier.request_decided("unknown")
        assert len(h.bus.sent("CloseNotification")) == 1
        await h.notifier.close()

    run(main)


def test_raising_the_same_request_again_replaces_its_notification() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r1"))
        assert [m.body[1] for m in h.bus.sent("Notify")] == [0, 10]
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)


def test_decided_while_notify_is_in_flight_closes_once_the_id_is_known() -> None:
    bus = FakeBus()
    h = Harness(bus)
    release = asyncio.Event()

    async def slow_call(msg: Message) -> Message | None:
        if msg.member == "Notify":
            await release.wait()
        return await FakeBus.call(bus, msg)

    bus.call = slow_call  # type: ignore[method-assign]

    async def main() -> None:
        await h.notifier.start()
        raised = asyncio.create_task(h.notifier.request_raised(make_request("r1")))
        await asyncio.sleep(0)
        await h.notifier.request_decided("r1")
        assert bus.sent("CloseNotification") == []
        release.set()
        await raised
        assert [m.body for m in bus.sent("CloseNotification")] == [[10]]
        assert h.notifier.notification_id("r1") is None
        await h.notifier.close()

    run(main)


# --- signals ---------------------------------------------------------------------------------


def test_actions_call_review_and_deny() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        h.bus.emit("ActionInvoked", "us", [10, "default"])
        h.bus.emit("ActionInvoked", "us", [10, "review"])
        h.bus.emit("ActionInvoked", "us", [11, "deny"])
        h.bus.emit("ActionInvoked", "us", [11, "something-else"])
        h.bus.emit("ActionInvoked", "us", [99, "deny"])  # not ours
        await h.notifier.close()

    run(main)
    assert h.review == ["r1", "r1"]
    assert h.deny == ["r2"]


def test_signals_from_other_senders_are_ignored() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("ActionInvoked", "us", [10, "deny"], sender=":1.99")
        h.bus.emit("NotificationClosed", "uu", [10, 2], sender=":1.99")
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)
    assert h.deny == []


def test_notification_closed_forgets_the_request() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("NotificationClosed", "uu", [10, 2])
        assert h.notifier.notification_id("r1") is None
        h.bus.emit("ActionInvoked", "us", [10, "deny"])  # late: ignored
        await h.notifier.request_decided("r1")
        assert h.bus.sent("CloseNotification") == []
        await h.notifier.close()

    run(main)
    assert h.deny == []


def test_async_callbacks_run_as_tasks_and_failures_are_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def review(request_id: str) -> None:
        seen.append(request_id)

    def deny(request_id: str) -> None:
        raise RuntimeError("callback broke")

    bus = FakeBus()

    async def connect() -> Bus:
        return bus

    notifier = Notifier(on_review=review, on_deny=deny, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.request_raised(make_request("r1"))
        bus.emit("ActionInvoked", "us", [10, "review"])
        bus.emit("ActionInvoked", "us", [10, "deny"])  # raises inside: logged
        await asyncio.sleep(0)
        await notifier.close()

    run(main)
    assert seen == ["r1"]
    assert "callback failed" in caplog.text


def test_malformed_signals_do_not_break_the_handler() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("ActionInvoked", "u", [10])
        h.bus.emit("NotificationClosed", "", [])
        h.bus.emit("ActionInvoked", "us", [10, "deny"])
        await h.notifier.close()

    run(main)
    assert h.deny == ["r1"]


def test_server_restart_forgets_notifications_and_probes_again() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.owner_changed(SERVER, "")
        assert not h.notifier.available
        assert h.notifier.notification_id("r1") is None
        await h.notifier.request_raised(make_request("r2"))
        assert h.notifier.available
        assert h.bus.members().count("GetCapabilities") == 2
        assert h.notifier.notification_id("r2") == 11
        await h.notifier.close()

    run(main)
    assert h.fallbacks == []


def test_owner_change_signals_not_from_the_bus_are_ignored() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("NameOwnerChanged", "sss", ["org.freedesktop.Notifications", SERVER, ""])
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)


# --- fallbacks ----------------------------------------------------------------------------------


def test_no_server_uses_the_fallback() -> None:
    h = Harness(FakeBus(server=False))

    async def main() -> None:
        await h.notifier.start()
        assert not h.notifier.available
        await h.notifier.request_raised(make_request("r1", kind=Kind.SUDO, remote=True))
        await h.notifier.request_decided("r1")
        assert h.bus.sent("Notify") == []
        await h.notifier.close()

    run(main)
    ((title, body),) = h.fallbacks
    assert title == "Root access for deploy?"
    assert body.endswith("Host: laptop [REMOTE]")  # plain text, no markup
    assert SECRET not in body


def test_no_action_support_uses_the_fallback_instead_of_a_dead_notification() -> None:
    h = Harness(FakeBus(caps=["body"]))

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        assert not h.notifier.supports_actions
        await h.notifier.request_raised(make_request("r1"))
        assert h.bus.sent("Notify") == []
        await h.notifier.close()

    run(main)
    assert [t for t, _ in h.fallbacks] == ["Approve deploy?"]


def test_no_action_support_and_no_fallback_sends_a_plain_notification() -> None:
    h = Harness(FakeBus(caps=["body"]), fallback=False)

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        (notify,) = h.bus.sent("Notify")
        assert notify.body[5] == []
        await h.notifier.close()

    run(main)


def test_connect_failure_uses_the_fallback_and_never_raises() -> None:
    fallbacks: list[tuple[str, str]] = []

    async def connect() -> Bus:
        raise FileNotFoundError("no bus socket")

    notifier = Notifier(
        on_review=print,
        on_deny=print,
        fallback=lambda t, b: fallbacks.append((t, b)),
        connect=connect,
    )

    async def main() -> None:
        await notifier.start()
        assert not notifier.available
        await notifier.request_raised(make_request())
        await notifier.request_decided("r1")
        await notifier.close()

    run(main)
    assert len(fallbacks) == 1


def test_notify_failure_falls_back() -> None:
    h = Harness(FakeBus(fail_notify=True))

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        assert h.notifier.notification_id("r1") is None
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


def test_a_hung_server_times_out_into_the_fallback() -> None:
    h = Harness(FakeBus(hang={"Notify"}), call_timeout=0.05)

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


def test_a_hung_bus_at_start_means_unavailable() -> None:
    h = Harness(FakeBus(hang={"GetCapabilities"}), call_timeout=0.05)

    async def main() -> None:
        await h.notifier.start()
        assert not h.notifier.available
        await h.notifier.close()

    run(main)


def test_a_failing_fallback_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    def broken(title: str, body: str) -> None:
        raise RuntimeError("no tray")

    async def connect() -> Bus:
        return FakeBus(server=False)

    notifier = Notifier(on_review=print, on_deny=print, fallback=broken, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.request_raised(make_request())
        await notifier.close()

    with caplog.at_level(logging.ERROR):
        run(main)
    assert "fallback failed" in caplog.text


def test_no_fallback_and_no_server_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(FakeBus(server=False), fallback=False)

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    with caplog.at_level(logging.INFO):
        run(main)
    assert "not announced" in caplog.text


def test_a_disconnected_bus_falls_back() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        h.bus.connected = False  # the bus daemon went away
        assert not h.notifier.available
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


# --- close -----------------------------------------------------------------------------------


def test_close_closes_open_notifications_and_disconnects() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        await h.notifier.close()
        assert sorted(m.body[0] for m in h.bus.sent("CloseNotification")) == [10, 11]
        assert not h.bus.connected
        assert h.bus.handlers == []
        assert not h.notifier.available
        await h.notifier.close()  # idempotent
        await h.notifier.request_raised(make_request("r3"))  # after close: fallback

    run(main)
    assert [t for t, _ in h.fallbacks] == ["Approve deploy?"]


def test_start_twice_connects_once() -> None:
    connects = 0
    bus = FakeBus()

    async def connect() -> Bus:
        nonlocal connects
        connects += 1
        return bus

    notifier = Notifier(on_review=print, on_deny=print, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.start()
        await notifier.close()

    run(main)
    assert connects == 1
