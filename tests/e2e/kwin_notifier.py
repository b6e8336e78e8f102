"""Another application, the notification server and the panel, in one process (run as the user).

It is what the KWin test needs on the desktop besides the tray:

- a Wayland window (``wl_toplevel_client.Toplevel``) that has the focus while
  the approval request arrives — the person is busy in another app;
- ``org.freedesktop.Notifications`` on the user's session bus, with actions,
  so the tray's request notification lands here;
- ``org.kde.StatusNotifierWatcher``, its own host (Plasma's panel is both),
  so the tray's icon registers here;
- the click on *Review*: on command it asks the compositor for an
  ``xdg_activation_v1`` token for its own (focused) surface, then emits
  ``ActivationToken(id, token)`` and ``ActionInvoked(id, "review")`` as
  Plasma's notification server does; the click on the icon: the same token,
  then ``ProvideXdgActivationToken(token)`` and ``Activate(0, 0)`` on the
  item, as Plasma's panel does.  ``bogus`` sends a made-up token instead
  (the negative control), ``none`` sends no token at all.

Protocol: one JSON object per line.  Out (stdout): ``{"event": "ready"}``
once the bus names are owned and the window configured, ``{"event":
"notify", "id", "summary", "actions"}`` for each notification, ``{"event":
"item", "service"}`` when an icon registers, ``{"event": "invoked", "id",
"token"}`` / ``{"event": "clicked", "service", "token"}`` after a click went
out, ``{"event": "shot"}`` once a screenshot is written.  In (stdin):
``{"cmd": "review", "id": N, "token": "real" | "bogus" | "none"}``,
``{"cmd": "click", "service": S, "token": …}``, ``{"cmd": "shot", "path":
P}`` (KWin's picture of the screen, ``org.kde.KWin.ScreenShot2``, as a PNG
at ``P``).  Errors go to stderr and end the process with status 1.

Usage: ``python kwin_notifier.py TITLE``
"""

import asyncio
import json
import os
import secrets
import struct
import sys
import zlib
from typing import Annotated, Any

from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.constants import PropertyAccess
from dbus_fast.service import ServiceInterface, dbus_method, dbus_property, dbus_signal
from wl_toplevel_client import Toplevel

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
WATCHER = "org.kde.StatusNotifierWatcher"
APP_ID = "ollie-test-busy-app"
SIZE = (640, 480)

DStr = Annotated[str, DBusSignature("s")]
DUInt = Annotated[int, DBusSignature("u")]
DInt = Annotated[int, DBusSignature("i")]
DStrs = Annotated[list[str], DBusSignature("as")]
DHints = Annotated[dict[str, Any], DBusSignature("a{sv}")]
DInfo = Annotated[list[str], DBusSignature("ssss")]
DIdKey = Annotated[list[Any], DBusSignature("us")]
DIdReason = Annotated[list[Any], DBusSignature("uu")]
DBool = Annotated[bool, DBusSignature("b")]


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class Notifications(ServiceInterface):
    def __init__(self) -> None:
        super().__init__(NAME)
        self._next = 0

    @dbus_method()
    def GetCapabilities(self) -> DStrs:
        return ["actions", "body"]

    @dbus_method()
    def GetServerInformation(self) -> DInfo:
        return ["ollie-kwin-test", "ollie", "1", "1.2"]

    @dbus_method()
    def Notify(
        self,
        app_name: DStr,
        replaces_id: DUInt,
        app_icon: DStr,
        summary: DStr,
        body: DStr,
        actions: DStrs,
        hints: DHints,
        expire_timeout: DInt,
    ) -> DUInt:
        self._next += 1
        nid = replaces_id or self._next
        say("notify", id=nid, summary=summary, actions=actions)
        return nid

    @dbus_method()
    def CloseNotification(self, nid: DUInt) -> None:
        self.NotificationClosed(nid, 3)

    @dbus_signal()
    def ActionInvoked(self, nid: DUInt, key: DStr) -> DIdKey:
        return [nid, key]

    @dbus_signal()
    def ActivationToken(self, nid: DUInt, token: DStr) -> DIdKey:
        return [nid, token]

    @dbus_signal()
    def NotificationClosed(self, nid: DUInt, reason: DUInt) -> DIdReason:
        return [nid, reason]


class Watcher(ServiceInterface):
    """A StatusNotifierWatcher that is its own (only) host, as Plasma's panel is."""

    def __init__(self) -> None:
        super().__init__(WATCHER)
        self.items: list[str] = []

    @dbus_method()
    def RegisterStatusNotifierItem(self, service: DStr) -> None:
        # The tray registers with its well-known bus name (item path: /StatusNotifierItem).
        if service not in self.items:
            self.items.append(service)
            self.StatusNotifierItemRegistered(service)
        say("item", service=service)

    @dbus_method()
    def RegisterStatusNotifierHost(self, service: DStr) -> None:
        return None

    @dbus_property(access=PropertyAccess.READ)
    def RegisteredStatusNotifierItems(self) -> DStrs:
        return list(self.items)

    @dbus_property(access=PropertyAccess.READ)
    def IsStatusNotifierHostRegistered(self) -> DBool:
        return True

    @dbus_property(access=PropertyAccess.READ)
    def ProtocolVersion(self) -> DInt:
        return 0

    @dbus_signal()
    def StatusNotifierItemRegistered(self, service: DStr) -> DStr:
        return service

    @dbus_signal()
    def StatusNotifierHostRegistered(self) -> None:
        return None


async def token_for(window: Toplevel, kind: str) -> str:
    """A token from the compositor for our surface (``real``), a made-up one, or none."""
    if kind == "real":
        got: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        window.request_token(got.set_result)
        return await asyncio.wait_for(got, 10)
    if kind == "bogus":
        return f"kwin-bogus-{secrets.token_hex(4)}"
    return ""


async def review(window: Toplevel, server: Notifications, nid: int, kind: str) -> None:
    token = await token_for(window, kind)
    if token:
        server.ActivationToken(nid, token)
    server.ActionInvoked(nid, "review")
    say("invoked", id=nid, token=token)


async def click_icon(window: Toplevel, bus: MessageBus, service: str, kind: str) -> None:
    """What a StatusNotifierHost does on a click: hand over a token, then Activate."""
    token = await token_for(window, kind)
    calls: list[tuple[str, str, list[Any]]] = [("Activate", "ii", [0, 0])]
    if token:
        calls.insert(0, ("ProvideXdgActivationToken", "s", [token]))
    for member, signature, body in calls:
        reply = await bus.call(
            Message(
                destination=service,
                path="/StatusNotifierItem",
                interface="org.kde.StatusNotifierItem",
                member=member,
                signature=signature,
                body=body,
            )
        )
        if reply is None or reply.message_type is MessageType.ERROR:
            raise RuntimeError(f"{member} on {service}: {reply.body if reply else 'no reply'}")
    say("clicked", service=service, token=token)


def png(width: int, height: int, stride: int, pixels: bytes) -> bytes:
    """A PNG of 32-bit QImage pixels (RGB32/ARGB32: B, G, R, A bytes in memory)."""
    rows = bytearray()
    for y in range(height):
        row = pixels[y * stride : y * stride + width * 4]
        rgb = bytearray(width * 3)
        rgb[0::3], rgb[1::3], rgb[2::3] = row[2::4], row[1::4], row[0::4]
        rows += b"\0" + rgb

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows)))
        + chunk(b"IEND", b"")
    )


def _read_all(fd: int) -> bytes:
    data = bytearray()
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    return bytes(data)


async def screenshot(bus: MessageBus, path: str) -> None:
    """The active screen through KWin's ScreenShot2 D-Bus interface, as a PNG."""
    read_end, write_end = os.pipe()
    try:
        reading = asyncio.get_running_loop().run_in_executor(None, _read_all, read_end)
        reply = await bus.call(
            Message(
                destination="org.kde.KWin",
                path="/org/kde/KWin/ScreenShot2",
                interface="org.kde.KWin.ScreenShot2",
                member="CaptureActiveScreen",
                signature="a{sv}h",
                body=[{"native-resolution": Variant("b", True)}, 0],
                unix_fds=[write_end],
            )
        )
        os.close(write_end)
        write_end = -1
        if reply is None or reply.message_type is MessageType.ERROR:
            raise RuntimeError(f"ScreenShot2: {reply.body if reply else 'no reply'}")
        info = {k: v.value for k, v in reply.body[0].items()}
        if info.get("type") != "raw" or info.get("format") not in (4, 5, 6):
            raise RuntimeError(f"ScreenShot2: unexpected image {info}")
        pixels = await asyncio.wait_for(reading, 30)
    finally:
        if write_end >= 0:
            os.close(write_end)
    with open(path, "wb") as out:
        out.write(png(info["width"], info["height"], info["stride"], pixels))
    os.close(read_end)


async def main(title: str) -> int:
    loop = asyncio.get_running_loop()
    window = Toplevel(os.environ["WAYLAND_DISPLAY"], title, APP_ID, SIZE)
    broken: asyncio.Future[BaseException] = loop.create_future()

    def readable() -> None:
        try:
            window.dispatch()
        except Exception as exc:
            if not broken.done():
                broken.set_result(exc)

    loop.add_reader(window.fd, readable)
    bus = await MessageBus(bus_type=BusType.SESSION, negotiate_unix_fd=True).connect()
    server = Notifications()
    bus.export(PATH, server)
    await bus.request_name(NAME)
    bus.export("/StatusNotifierWatcher", Watcher())
    await bus.request_name(WATCHER)

    configured: asyncio.Future[None] = loop.create_future()
    window.on_configured = lambda: configured.set_result(None)
    if window.configured:
        configured.set_result(None)
    await asyncio.wait_for(configured, 30)
    say("ready", display=os.environ["WAYLAND_DISPLAY"])
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line_task = asyncio.ensure_future(reader.readline())
        done, _ = await asyncio.wait({line_task, broken}, return_when=asyncio.FIRST_COMPLETED)
        if broken in done:
            line_task.cancel()
            raise broken.result()
        line = line_task.result()
        if not line:
            return 0
        command = json.loads(line)
        if command["cmd"] == "review":
            await review(window, server, int(command["id"]), command["token"])
        elif command["cmd"] == "click":
            await click_icon(window, bus, command["service"], command["token"])
        elif command["cmd"] == "shot":
            await screenshot(bus, command["path"])
            say("shot", path=command["path"])
        else:
            raise ValueError(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
