"""Our StatusNotifierItem on the session bus, registered with whatever watcher runs now.

:class:`SniExport` connects with dbus-fast, exports the item at
``/StatusNotifierItem`` and its menu at ``/MenuBar``, owns
``org.kde.StatusNotifierItem-<pid>-1`` and registers that name with
``org.kde.StatusNotifierWatcher``.  It follows the watcher's name: when a
watcher appears (a panel started after us, or restarted) it registers
again; when it vanishes the item is unregistered until the next one comes.
``on_registered(bool)`` tells the app so it can show the XEmbed icon
instead.  Everything runs on the asyncio loop; nothing here raises into the
app: a bus that is missing or fails is logged and the export stays off.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from dbus_fast import BusType, Message, MessageType, NameFlag, RequestNameReply
from dbus_fast.aio import MessageBus
from dbus_fast.service import ServiceInterface

from ollie_tray.app_id import APP_ID
from ollie_tray.sni.dbusmenu import DBusMenu, MenuBackend
from ollie_tray.sni.item import ITEM_PATH, MENU_PATH, ItemActions, StatusNotifierItem

log = logging.getLogger(__name__)

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
_DBUS = "org.freedesktop.DBus"


class SniExport:
    def __init__(
        self,
        actions: ItemActions,
        menu: MenuBackend,
        *,
        icon_theme_path: str = "",
        on_registered: Callable[[bool], None] | None = None,
        bus_address: str | None = None,
        call_timeout: float = 5.0,
    ) -> None:
        loop_soon = self._soon
        self.item = StatusNotifierItem(APP_ID, actions, loop_soon, icon_theme_path)
        self.menu = DBusMenu(menu, loop_soon)
        self.name = f"org.kde.StatusNotifierItem-{os.getpid()}-1"
        self._on_registered = on_registered
        self._address = bus_address
        self._timeout = call_timeout
        self._bus: MessageBus | None = None
        self._watcher_owner = ""
        self.registered = False
        self._tasks: set[asyncio.Task[Any]] = set()

    @staticmethod
    def _soon(callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(callback)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> bool:
        """Connect, export, follow the watcher; False when there is no usable session bus."""
        try:
            if self._address:
                bus = MessageBus(bus_address=self._address)
            else:
                bus = MessageBus(bus_type=BusType.SESSION)
            await asyncio.wait_for(bus.connect(), self._timeout)
        except Exception as exc:
            log.info("tray icon: no session bus for StatusNotifierItem (%s)", exc)
            return False
        self._bus = bus
        bus.export(ITEM_PATH, self.item)
        bus.export(MENU_PATH, self.menu)
        bus.add_message_handler(self._on_message)
        try:
            await self._dbus_call(
                "AddMatch",
                "s",
                f"type='signal',sender='{_DBUS}',interface='{_DBUS}',"
                f"member='NameOwnerChanged',arg0='{WATCHER}'",
            )
            await asyncio.wait_for(bus.request_name(self.name), self._timeout)
            reply = await self._dbus_call("GetNameOwner", "s", WATCHER)
        except Exception as exc:
            log.warning("tray icon: StatusNotifierItem setup failed (%s)", exc)
            return True
        if reply.message_type is MessageType.METHOD_RETURN and reply.body:
            await self._watcher_changed(str(reply.body[0]))
        return True

    async def publish(self, path: str, interface: ServiceInterface, name: str) -> bool:
        """Serve another interface on this connection under the well-known ``name``."""
        if self._bus is None:
            return False
        self._bus.export(path, interface)
        try:
            reply = await asyncio.wait_for(
                self._bus.request_name(name, NameFlag.DO_NOT_QUEUE), self._timeout
            )
        except Exception as exc:
            log.warning("could not own %s on the session bus (%s)", name, exc)
            return False
        if reply not in (RequestNameReply.PRIMARY_OWNER, RequestNameReply.ALREADY_OWNER):
            log.warning("%s is owned by another process", name)
            return False
        return True

    async def close(self) -> None:
        bus, self._bus = self._bus, None
        if bus is None:
            return
        bus.remove_message_handler(self._on_message)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        bus.disconnect()
        try:
            await asyncio.wait_for(bus.wait_for_disconnect(), self._timeout)  # type: ignore[no-untyped-call]
        except Exception as exc:
            log.debug("tray icon: disconnect: %s", exc)
        self._set_registered(False)

    # -- the watcher -------------------------------------------------------------------------

    def _on_message(self, msg: Message) -> None:
        if (
            msg.message_type is MessageType.SIGNAL
            and msg.sender == _DBUS
            and msg.member == "NameOwnerChanged"
            and msg.body
            and msg.body[0] == WATCHER
        ):
            task = asyncio.ensure_future(self._watcher_changed(str(msg.body[2])))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _watcher_changed(self, owner: str) -> None:
        self._watcher_owner = owner
        if not owner:
            log.info("tray icon: the StatusNotifierWatcher went away")
            self._set_registered(False)
            return
        try:
            reply = await self._call(
                Message(
                    destination=WATCHER,
                    path=WATCHER_PATH,
                    interface=WATCHER,
                    member="RegisterStatusNotifierItem",
                    signature="s",
                    body=[self.name],
                )
            )
        except Exception as exc:
            log.warning("tray icon: could not register with the watcher (%s)", exc)
            return
        if reply.message_type is MessageType.ERROR:
            log.warning("tray icon: the watcher refused the item: %s", reply.body)
            return
        if owner == self._watcher_owner:
            log.info("tray icon: registered with the StatusNotifierWatcher (%s)", owner)
            self._set_registered(True)

    def _set_registered(self, value: bool) -> None:
        if value == self.registered:
            return
        self.registered = value
        if self._on_registered is not None:
            self._on_registered(value)

    # -- calls ---------------------------------------------------------------------------------

    async def _call(self, msg: Message) -> Message:
        if self._bus is None:
            raise ConnectionError("not connected")
        reply = await asyncio.wait_for(self._bus.call(msg), self._timeout)
        if reply is None:
            raise ConnectionError("no reply")
        return reply

    async def _dbus_call(self, member: str, signature: str, *body: Any) -> Message:
        return await self._call(
            Message(
                destination=_DBUS,
                path="/org/freedesktop/DBus",
                interface=_DBUS,
                member=member,
                signature=signature,
                body=list(body),
            )
        )
