"""The tray's menu and state, exported as our own StatusNotifierItem.

:class:`SniTray` reads the :class:`~ollie_tray.tray.TrayIcon` (its ``QMenu``
and state) and keeps the :class:`~ollie_tray.sni.export.SniExport` in step:
menu changes are noticed through an event filter on the menus and published
once per turn of the event loop (a rebuild that adds ten actions is one
update, and one that changes nothing is none); a host's click triggers the
``QAction`` that now holds the clicked item's key, so a click on an item that
was just rebuilt still does what its label says.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QSize, QTimer
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QMenu

from ollie_tray.app_id import APP_ID
from ollie_tray.icons import TrayState, state_icon
from ollie_tray.sni.export import SniExport
from ollie_tray.sni.item import ItemActions, ItemLook, Pixmap, Status
from ollie_tray.sni.menu_model import Entry, KeyMaker, MenuIds, index
from ollie_tray.tray import TrayIcon, tooltip_text
from registry_core.paths import resources_dir

ICON_NAMES = {
    TrayState.IDLE: APP_ID,
    TrayState.PENDING: "ollie-tray-pending",
    TrayState.PAUSED: "ollie-tray-paused",
    TrayState.ERROR: "ollie-tray-error",
}
PIXMAP_SIZES = (22, 32, 64)
_WATCHED = (QEvent.Type.ActionAdded, QEvent.Type.ActionChanged, QEvent.Type.ActionRemoved)


def argb32(image: QImage) -> bytes:
    """An image as the ARGB32 network-byte-order bytes a StatusNotifierItem pixmap holds."""
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    raw = bytearray(bytes(image.constBits())[: image.sizeInBytes()])
    # QImage keeps ARGB32 as native 32-bit words: BGRA in memory on little-endian.
    if sys.byteorder == "little":
        raw[0::4], raw[1::4], raw[2::4], raw[3::4] = raw[3::4], raw[2::4], raw[1::4], raw[0::4]
    return bytes(raw)


def look_of(tray: TrayIcon, pending: int) -> ItemLook:
    state = tray.state
    pixmaps = _pixmaps(state, pending)
    title = "Ollie Tray"
    if state is TrayState.PENDING:
        title = f"Ollie Tray ({pending} pending)"
    return ItemLook(
        status=Status.NEEDS_ATTENTION if state is TrayState.PENDING else Status.ACTIVE,
        icon_name=ICON_NAMES[state],
        attention_icon_name=ICON_NAMES[TrayState.PENDING],
        title=title,
        tooltip_title=title,
        tooltip_body=tooltip_text(state, pending, tray.detail),
        icon_pixmaps=pixmaps,
        attention_pixmaps=pixmaps if state is TrayState.PENDING else (),
    )


def _pixmaps(state: TrayState, count: int) -> tuple[Pixmap, ...]:
    icon = state_icon(state, count)
    out = []
    for size in PIXMAP_SIZES:
        image = icon.pixmap(QSize(size, size)).toImage()
        out.append((image.width(), image.height(), argb32(image)))
    return tuple(out)


class _MenuWatch(QObject):
    def __init__(self, changed: Callable[[], None]) -> None:
        super().__init__()
        self._changed = changed

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in _WATCHED:
            self._changed()
        return False


class SniTray:
    """Keeps ``export`` showing ``tray``'s state and menu."""

    def __init__(
        self,
        tray: TrayIcon,
        *,
        on_registered: Callable[[bool], None] | None = None,
        on_activation_token: Callable[[str], None] | None = None,
        on_activate: Callable[[], None] | None = None,
        bus_address: str | None = None,
    ) -> None:
        self.tray = tray
        self._ids = MenuIds()
        self._actions: dict[int, QAction] = {}
        self._watched: set[int] = set()
        self._watch = _MenuWatch(self.schedule_menu)
        self._timer = QTimer()
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self.sync_menu)
        self.export = SniExport(
            ItemActions(
                activate=on_activate or (lambda: None),
                activation_token=on_activation_token,
            ),
            self,
            icon_theme_path=str(resources_dir() / "icons"),
            on_registered=on_registered,
            bus_address=bus_address,
        )
        tray.state_listeners.append(self.sync_look)

    async def start(self) -> bool:
        self.sync_menu()
        self.sync_look()
        return await self.export.start()

    async def close(self) -> None:
        self._timer.stop()
        if self.sync_look in self.tray.state_listeners:
            self.tray.state_listeners.remove(self.sync_look)
        await self.export.close()

    # -- state -----------------------------------------------------------------------------

    def sync_look(self) -> None:
        self.export.item.show(look_of(self.tray, self.tray.pending_count))

    # -- menu ------------------------------------------------------------------------------

    def schedule_menu(self) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def sync_menu(self) -> None:
        self._actions = {}
        entries = self._entries(self.tray.menu, "")
        self.export.menu.publish(index(entries, self._ids))

    def _entries(self, menu: QMenu, parent: str) -> tuple[Entry, ...]:
        if id(menu) not in self._watched:
            menu.installEventFilter(self._watch)
            self._watched.add(id(menu))
        keys = KeyMaker(parent)
        out = []
        for action in menu.actions():
            key = keys.key(action.objectName(), action.text(), action.isSeparator())
            sub = action.menu()
            children: tuple[Entry, ...] = ()
            if isinstance(sub, QMenu):
                children = self._entries(sub, key)
            entry = Entry(
                key=key,
                label=action.text(),
                enabled=action.isEnabled(),
                visible=action.isVisible(),
                separator=action.isSeparator(),
                checkable=action.isCheckable(),
                checked=action.isChecked(),
                children=children,
                submenu=isinstance(sub, QMenu),
            )
            self._actions[self._ids.id_for(key)] = action
            out.append(entry)
        return tuple(out)

    # -- MenuBackend -------------------------------------------------------------------------

    def activate(self, item_id: int) -> None:
        self.sync_menu()  # the QAction that holds this key now
        action = self._actions.get(item_id)
        if action is not None and action.isEnabled():
            action.trigger()

    def about_to_show(self, item_id: int) -> bool:
        action = self._actions.get(item_id)
        sub = action.menu() if action is not None else None
        if isinstance(sub, QMenu):
            sub.aboutToShow.emit()
            self.sync_menu()
            return True
        return False
