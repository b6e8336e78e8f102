"""The running tray's commands on the session bus, for the launcher's actions.

Desktops without a tray (GNOME without the AppIndicator extension) give a
person no icon to click, so everything the menu does must be reachable from
the launcher: ``ollie-tray --browser``, ``--pause`` and ``--quit`` (the
desktop file's actions) ask the running instance over D-Bus.  The session bus
is the right door: tools in the sandbox cannot see it (only the broker socket
is bound into their namespace), so no tool can pause or quit the broker.

One name per broker socket (``<APP_ID>.s<hash>``): two brokers on
different sockets (``OLLIE_ELEVATE_SOCKET``) run side by side, and a launcher
action reaches the one its environment names.

No ``from __future__ import annotations`` here: dbus-fast reads the
``Annotated`` signatures at class creation.
"""

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.service import ServiceInterface, dbus_method

from ollie_tray.app_id import APP_ID

INTERFACE = f"{APP_ID}.Control1"
PATH = "/" + APP_ID.replace(".", "/")
DBool = Annotated[bool, DBusSignature("b")]


class ControlError(RuntimeError):
    """The running tray could not be asked (message says why)."""


def bus_name(socket_path: Path) -> str:
    digest = hashlib.sha256(str(socket_path).encode()).hexdigest()[:16]
    return f"{APP_ID}.s{digest}"


class TrayControl(ServiceInterface):
    def __init__(
        self,
        show_browser: Callable[[], None],
        set_paused: Callable[[bool], None],
        quit_app: Callable[[], None],
    ) -> None:
        super().__init__(INTERFACE)
        self._show_browser = show_browser
        self._set_paused = set_paused
        self._quit = quit_app

    @dbus_method()
    def ShowBrowser(self) -> None:
        asyncio.get_running_loop().call_soon(self._show_browser)

    @dbus_method()
    def SetPaused(self, paused: DBool) -> None:
        asyncio.get_running_loop().call_soon(self._set_paused, paused)

    @dbus_method()
    def Quit(self) -> None:
        asyncio.get_running_loop().call_soon(self._quit)


async def _ask(socket_path: Path, member: str, signature: str, body: list[object]) -> None:
    try:
        bus = await asyncio.wait_for(MessageBus(bus_type=BusType.SESSION).connect(), 5)
    except Exception as exc:
        raise ControlError(f"no session bus ({exc})") from exc
    try:
        reply = await asyncio.wait_for(
            bus.call(
                Message(
                    destination=bus_name(socket_path),
                    path=PATH,
                    interface=INTERFACE,
                    member=member,
                    signature=signature,
                    body=body,
                )
            ),
            5,
        )
    finally:
        bus.disconnect()
    if reply is None or reply.message_type is MessageType.ERROR:
        detail = reply.body[0] if reply is not None and reply.body else "no reply"
        raise ControlError(f"the running Ollie Tray did not answer {member}: {detail}")


def ask_running(socket_path: Path, member: str, *args: bool) -> None:
    """Call ``member`` of the tray serving ``socket_path``; raises :class:`ControlError`."""
    signature = "b" * len(args)
    asyncio.run(_ask(socket_path, member, signature, list(args)))
