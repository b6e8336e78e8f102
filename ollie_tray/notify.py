"""Desktop notifications for approval requests (``org.freedesktop.Notifications``).

A :class:`Notifier` tells the person that a request is waiting: one
notification per pending :class:`~registry_core.broker.question.ApprovalRequest`
with the actions *Review* (opens the approval dialog; clicking the
notification body, the ``default`` action, does the same) and *Deny*.
Approval itself never happens in a notification.  The notification is closed
when the request is decided.

Threading and ordering: plain asyncio and dbus-fast, no Qt.  The tray runs it
on the Qt loop through qasync; tests run it with ``asyncio.run``.  Every
method is called on the loop's thread; the action callbacks run there too
(a callback returning an awaitable is scheduled as a task).  ``start`` and
``request_raised`` never raise for bus or server trouble: without a session
bus, without a notification server, or with a server that has no action
support, the injected ``fallback(title, body)`` (the tray passes
``QSystemTrayIcon.showMessage``) is used instead, and nothing crashes.  A
server that appears later (autostart order at login) is found on the next
request; a server that restarts loses our notifications, so we forget them.

What a notification says is deliberately little: the tool name, the
requester's executable and pid, the host, and what is asked.  Never the call's
arguments (they may hold secrets).  Text from the requester is stripped of
control and bidi characters and shortened, so it cannot fake extra lines, and
escaped when the server interprets markup.

Signals are only believed from the unique bus name that owns the
notification service (the sender of our ``Notify`` replies): another client on
the session bus cannot click "Deny" for the person.
"""

from __future__ import annotations

import asyncio
import html
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Protocol

from dbus_fast import Message, MessageType, Variant

from ollie_tray.app_id import APP_ID
from registry_core.broker.ask.chars import reveal
from registry_core.broker.decide.denials import Denial, summary_text
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = "org.freedesktop.Notifications"
_DBUS = "org.freedesktop.DBus"
_DBUS_PATH = "/org/freedesktop/DBus"

APP_NAME = "Ollie Tray"
ICON_NAME = APP_ID
DESKTOP_ENTRY = APP_ID

ACTION_DEFAULT = "default"
ACTION_REVIEW = "review"
ACTION_DENY = "deny"
ACTIONS = (ACTION_DEFAULT, "Review", ACTION_REVIEW, "Review", ACTION_DENY, "Deny")
"""Key/label pairs; ``default`` is the click on the notification itself."""

_INT32_MAX = 2**31 - 1
_FIELD_LIMIT = 120  # characters of one requester-supplied field in the body
_TOOL_LIMIT = 64


class Urgency(IntEnum):
    """The ``urgency`` hint of the notification specification."""

    LOW = 0
    NORMAL = 1
    CRITICAL = 2


@dataclass(frozen=True)
class NotificationContent:
    """One notification, ready to send (or to hand to the fallback)."""

    summary: str
    body: str
    actions: tuple[str, ...]
    urgency: Urgency
    expire_timeout: int
    """Milliseconds; 0 = never expires, -1 = the server's default."""

    def hints(self) -> dict[str, Variant]:
        return {
            "urgency": Variant("y", int(self.urgency)),
            "desktop-entry": Variant("s", DESKTOP_ENTRY),
        }


def _clean(text: str, limit: int) -> str:
    """One line of untrusted text: hidden characters shown as ``<U+XXXX>``, at most ``limit``."""
    cleaned = reveal(text, lambda ch: f"<U+{ord(ch):04X}>").strip()
    if len(cleaned) > limit:
        cleaned = cleaned[: limit - 1] + "\u2026"
    return cleaned


def _clean_lines(text: str) -> str:
    return "\n".join(_clean(line, _FIELD_LIMIT) for line in text.splitlines())


def build_notification(
    request: ApprovalRequest, *, actions: bool = True, markup: bool = False
) -> NotificationContent:
    """What a notification for ``request`` says.

    ``actions``: the server supports actions (else none are listed).
    ``markup``: the server interprets body markup (``body-markup``), so text is
    escaped.  The call's arguments are never part of it.
    """
    tool = _clean(request.tool, _TOOL_LIMIT) or "a tool"
    sudo = request.kind is Kind.SUDO
    summary = f"Root access for {tool}?" if sudo else f"Approve {tool}?"

    requester = request.requester
    exe = requester.exe or (requester.cmdline[0] if requester.cmdline else "") or "unknown program"
    host = _clean(request.host, _FIELD_LIMIT) or "this computer"

    def esc(text: str) -> str:
        return html.escape(text, quote=False) if markup else text

    where = f", {SANDBOX_LABEL}" if request.sandboxed else ""
    remote = ""
    if request.remote:
        remote = " <b>[REMOTE]</b>" if markup else " [REMOTE]"
    body = "\n".join(
        (
            esc(f"Asks to {request.what}."),
            esc(f"Requester: {_clean(exe, _FIELD_LIMIT)} (pid {requester.pid}){where}"),
            esc(f"Host: {host}") + remote,
        )
    )
    action_list = ACTIONS if actions else ()
    # Every request asks to escape the sandbox or to become root: critical, so that
    # "do not disturb" modes (GNOME's among them) still show it.
    urgency = Urgency.CRITICAL
    if sudo:
        expire = 0
    else:
        expire = min(int(request.timeout * 1000), _INT32_MAX) if request.timeout > 0 else -1
    return NotificationContent(summary, body, action_list, urgency, expire)


class Bus(Protocol):
    """The part of ``dbus_fast.aio.MessageBus`` the notifier uses (a fake in tests)."""

    @property
    def connected(self) -> bool: ...

    async def call(self, msg: Message) -> Message | None: ...

    def add_message_handler(self, handler: Callable[[Message], Any]) -> None: ...

    def remove_message_handler(self, handler: Callable[[Message], Any]) -> None: ...

    def disconnect(self) -> None: ...

    async def wait_for_disconnect(self) -> Any: ...


Connect = Callable[[], Awaitable[Bus]]
RequestCallback = Callable[[str], object]
Fallback = Callable[[str, str], object]


class _CallFailed(Exception):
    """A D-Bus call answered with an error (or not at all)."""


def session_bus_connector(address: str | None = None) -> Connect:
    """Connect to the session bus (``$DBUS_SESSION_BUS_ADDRESS`` unless ``address``)."""

    async def connect() -> Bus:
        from dbus_fast.aio import MessageBus

        bus: Bus = await MessageBus(bus_address=address).connect()
        return bus

    return connect


class Notifier:
    """Notifications for approval requests; see the module docstring.

    ``icon``: an icon theme name (default ``ollie-tray``) or a file path (sent
    as a ``file://`` URI).  ``bus_address`` picks a bus other than the session
    bus of the environment; ``connect`` replaces the connection entirely
    (tests).  ``call_timeout`` bounds every D-Bus call, in seconds.
    """

    def __init__(
        self,
        *,
        on_review: RequestCallback,
        on_deny: RequestCallback,
        fallback: Fallback | None = None,
        icon: str | os.PathLike[str] | None = None,
        bus_address: str | None = None,
        connect: Connect | None = None,
        call_timeout: float = 5.0,
        on_activation_token: Callable[[str], None] | None = None,
    ) -> None:
        self._on_review = on_review
        self._on_token = on_activation_token
        self._on_deny = on_deny
        self._fallback = fallback
        if icon is None:
            self._icon = ICON_NAME
        elif isinstance(icon, os.PathLike) or os.path.isabs(icon):
            self._icon = Path(icon).absolute().as_uri()
        else:
            self._icon = icon
        self._connect = connect or session_bus_connector(bus_address)
        self._timeout = call_timeout
        self._bus: Bus | None = None
        self._server: str | None = None  # unique name of the notification server
        self._caps: frozenset[str] = frozenset()
        self._by_request: dict[str, int] = {}
        self._by_id: dict[int, str] = {}
        self._inflight: set[str] = set()
        self._decided_early: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- state ---------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """A notification server answered on a connected bus."""
        return self._bus is not None and self._bus.connected and self._server is not None

    @property
    def supports_actions(self) -> bool:
        return self.available and "actions" in self._caps

    @property
    def capabilities(self) -> frozenset[str]:
        return self._caps

    def notification_id(self, request_id: str) -> int | None:
        """The server's id of the open notification for ``request_id``, if any."""
        return self._by_request.get(request_id)

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Connect, read the server's capabilities, subscribe to its signals. Never raises."""
        if self._bus is not None:
            return
        try:
            bus = await asyncio.wait_for(self._connect(), self._timeout)
        except Exception as exc:
            log.info("notifications: no session bus (%s)", _describe(exc))
            return
        self._bus = bus
        bus.add_message_handler(self._on_message)
        try:
            await self._add_match(f"type='signal',interface='{INTERFACE}',path='{PATH}'")
            await self._add_match(
                f"type='signal',sender='{_DBUS}',interface='{_DBUS}',"
                f"member='NameOwnerChanged',arg0='{SERVICE}'",
            )
        except Exception as exc:
            log.warning("notifications: could not subscribe to signals (%s)", _describe(exc))
        await self._probe()

    async def close(self) -> None:
        """Close our open notifications and disconnect."""
        bus = self._bus
        if bus is None:
            return
        if self.available:
            for nid in list(self._by_id):
                await self._close_notification(nid)
        self._forget_all()
        bus.remove_message_handler(self._on_message)
        self._bus = None
        self._server = None
        bus.disconnect()
        try:
            await asyncio.wait_for(bus.wait_for_disconnect(), self._timeout)
        except Exception as exc:
            log.debug("notifications: disconnect: %s", _describe(exc))
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- requests --------------------------------------------------------------------

    async def request_raised(self, request: ApprovalRequest) -> None:
        """Tell the person about ``request`` (a notification, else the fallback)."""
        if self._bus is not None and self._bus.connected and self._server is None:
            await self._probe()  # a server may have started since
        if not self.available:
            self._fall_back(request, "no notification server")
            return
        if not self.supports_actions and self._fallback is not None:
            # A notification without buttons would only duplicate the tray's
            # message, which can at least be clicked.
            self._fall_back(request, "the notification server has no actions")
            return
        content = build_notification(
            request, actions=self.supports_actions, markup="body-markup" in self._caps
        )
        replaces = self._by_request.get(request.id, 0)
        self._inflight.add(request.id)
        try:
            nid = await self._notify(content, replaces)
        except Exception as exc:
            log.warning("notifications: Notify failed (%s)", _describe(exc))
            self._server = None  # ask again next time
            self._decided_early.discard(request.id)
            self._fall_back(request, "the notification could not be shown")
            return
        finally:
            self._inflight.discard(request.id)
        if replaces and replaces != nid:
            self._by_id.pop(replaces, None)
        self._by_request[request.id] = nid
        self._by_id[nid] = request.id
        if request.id in self._decided_early:
            self._decided_early.discard(request.id)
            await self.request_decided(request.id)

    async def notify_denials(self, batch: Sequence[Denial]) -> bool:
        """One low-urgency notification, without actions, for denials nobody made by hand.

        ``False`` when it could not be shown (no server, an error): the tray menu
        still lists them.  Tool names and reasons are cleaned like all text here.
        """
        if self._bus is not None and self._bus.connected and self._server is None:
            await self._probe()
        if not self.available or not batch:
            return False
        summary, body = summary_text(list(batch))
        markup = "body-markup" in self._caps
        body = _clean_lines(body)
        content = NotificationContent(
            _clean(summary, _FIELD_LIMIT),
            html.escape(body, quote=False) if markup else body,
            (),
            Urgency.LOW,
            -1,
        )
        try:
            await self._notify(content, 0)
        except Exception as exc:
            log.warning("notifications: Notify failed (%s)", _describe(exc))
            self._server = None
            return False
        return True

    async def request_decided(self, request_id: str) -> None:
        """The request is answered: take its notification away."""
        nid = self._by_request.pop(request_id, None)
        if nid is None:
            if request_id in self._inflight:
                self._decided_early.add(request_id)  # closed once Notify returns
            return
        self._by_id.pop(nid, None)
        if self.available:
            await self._close_notification(nid)

    # -- D-Bus -------------------------------------------------------------------------

    async def _call(self, msg: Message) -> Message:
        if self._bus is None:
            raise _CallFailed("not connected")
        reply = await asyncio.wait_for(self._bus.call(msg), self._timeout)
        if reply is None:
            raise _CallFailed("no reply")
        if reply.message_type is MessageType.ERROR:
            detail = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise _CallFailed(f"{reply.error_name}: {detail}".rstrip(": "))
        return reply

    async def _server_call(self, member: str, signature: str = "", *body: Any) -> Message:
        msg = Message(SERVICE, PATH, INTERFACE, member, signature=signature, body=list(body))
        return await self._call(msg)

    async def _add_match(self, rule: str) -> None:
        await self._call(Message(_DBUS, _DBUS_PATH, _DBUS, "AddMatch", signature="s", body=[rule]))

    async def _probe(self) -> None:
        """Ask the server for its capabilities; remember who it is."""
        try:
            reply = await self._server_call("GetCapabilities")
        except Exception as exc:
            log.info("notifications: no notification server (%s)", _describe(exc))
            self._server = None
            self._caps = frozenset()
            return
        body = reply.body[0] if reply.body else []
        self._caps = frozenset(c for c in body if isinstance(c, str))
        self._server = reply.sender
        log.debug("notifications: server %s, capabilities %s", reply.sender, sorted(self._caps))

    async def _notify(self, content: NotificationContent, replaces: int) -> int:
        reply = await self._server_call(
            "Notify",
            "susssasa{sv}i",
            APP_NAME,
            replaces,
            self._icon,
            content.summary,
            content.body,
            list(content.actions),
            content.hints(),
            content.expire_timeout,
        )
        if reply.sender and reply.sender != self._server:
            self._server = reply.sender  # the owner changed between calls
        nid = reply.body[0] if reply.body else None
        if not isinstance(nid, int):
            raise _CallFailed("Notify returned no id")
        return nid

    async def _close_notification(self, nid: int) -> None:
        try:
            await self._server_call("CloseNotification", "u", nid)
        except Exception as exc:
            log.debug("notifications: CloseNotification(%d): %s", nid, _describe(exc))

    # -- incoming signals ------------------------------------------------------------

    def _on_message(self, msg: Message) -> None:
        if msg.message_type is not MessageType.SIGNAL:
            return
        try:
            self._dispatch_signal(msg)
        except Exception:  # a broken signal must not break the bus's reader
            log.exception("notifications: could not handle %s.%s", msg.interface, msg.member)

    def _dispatch_signal(self, msg: Message) -> None:
        body: Sequence[Any] = msg.body or ()
        if msg.interface == _DBUS and msg.member == "NameOwnerChanged":
            if msg.sender == _DBUS and len(body) >= 3 and body[0] == SERVICE:
                # The server went away or was replaced: its ids mean nothing now.
                log.info("notifications: server changed (%s -> %s)", body[1], body[2])
                self._server = None
                self._caps = frozenset()
                self._forget_all()
            return
        if msg.interface != INTERFACE or msg.path != PATH:
            return
        if self._server is None or msg.sender != self._server:
            log.debug("notifications: ignoring %s from %s", msg.member, msg.sender)
            return
        if msg.member == "ActivationToken" and len(body) >= 2:
            # Sent just before ActionInvoked: lets the dialog that "review" raises
            # take the focus on Wayland compositors that prevent focus stealing.
            if body[0] in self._by_id and self._on_token is not None:
                self._on_token(str(body[1]))
        elif msg.member == "ActionInvoked" and len(body) >= 2:
            request_id = self._by_id.get(body[0])
            if request_id is None:
                return
            key = body[1]
            if key in (ACTION_DEFAULT, ACTION_REVIEW):
                self._run_callback(self._on_review, request_id)
            elif key == ACTION_DENY:
                self._run_callback(self._on_deny, request_id)
        elif msg.member == "NotificationClosed" and body:
            request_id = self._by_id.pop(body[0], None)
            if request_id is not None:
                self._by_request.pop(request_id, None)

    def _run_callback(self, callback: RequestCallback, request_id: str) -> None:
        try:
            result = callback(request_id)
        except Exception:
            log.exception("notifications: action callback failed")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("notifications: action callback failed", exc_info=task.exception())

    # -- fallback ------------------------------------------------------------------------

    def _fall_back(self, request: ApprovalRequest, why: str) -> None:
        if self._fallback is None:
            log.info("notifications: %s and no fallback; request %s not announced", why, request.id)
            return
        content = build_notification(request, actions=False, markup=False)
        try:
            self._fallback(content.summary, content.body)
        except Exception:
            log.exception("notifications: fallback failed")

    def _forget_all(self) -> None:
        self._by_request.clear()
        self._by_id.clear()
        self._decided_early.clear()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
