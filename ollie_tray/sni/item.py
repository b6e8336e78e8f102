"""``org.kde.StatusNotifierItem`` over dbus-fast: the icon a StatusNotifierHost shows.

What Qt's own export cannot say, this one does: ``Status`` is
``NeedsAttention`` (with an attention icon) while a request waits, icons are
theme names (``ollie-tray``, ``ollie-tray-pending``, ``ollie-tray-paused``,
``ollie-tray-error``, found in ``IconThemePath`` or the hicolor theme) with
pixmaps as a fallback, and the title and tooltip carry the count.
:meth:`StatusNotifierItem.show` takes an :class:`ItemLook` and emits the
``New*`` signal of each part that changed, nothing else.

No ``from __future__ import annotations`` here: dbus-fast reads the
``Annotated`` signatures at class creation.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from dbus_fast.annotations import DBusSignature
from dbus_fast.constants import PropertyAccess
from dbus_fast.service import ServiceInterface, dbus_method, dbus_property, dbus_signal

from ollie_tray.app_id import APP_ID

INTERFACE = "org.kde.StatusNotifierItem"
ITEM_PATH = "/StatusNotifierItem"
MENU_PATH = "/MenuBar"

# (width, height, ARGB32 bytes in network byte order)
Pixmap = tuple[int, int, bytes]
Pixmaps = Annotated[list[Any], DBusSignature("a(iiay)")]
ToolTip = Annotated[list[Any], DBusSignature("(sa(iiay)ss)")]
DStr = Annotated[str, DBusSignature("s")]
DInt = Annotated[int, DBusSignature("i")]
DUInt = Annotated[int, DBusSignature("u")]
DBool = Annotated[bool, DBusSignature("b")]
DPath = Annotated[str, DBusSignature("o")]


class Status(StrEnum):
    PASSIVE = "Passive"
    ACTIVE = "Active"
    NEEDS_ATTENTION = "NeedsAttention"


@dataclass(frozen=True)
class ItemLook:
    """Everything a host shows of the item."""

    status: Status = Status.ACTIVE
    icon_name: str = APP_ID
    attention_icon_name: str = "ollie-tray-pending"
    title: str = "Ollie Tray"
    tooltip_title: str = "Ollie Tray"
    tooltip_body: str = ""
    icon_pixmaps: tuple[Pixmap, ...] = field(default=(), compare=True)
    attention_pixmaps: tuple[Pixmap, ...] = ()


@dataclass
class ItemActions:
    """What the host's clicks do (each called soon after the D-Bus call returned)."""

    activate: Callable[[], None]
    secondary_activate: Callable[[], None] | None = None
    activation_token: Callable[[str], None] | None = None


def _pixmaps(items: tuple[Pixmap, ...]) -> list[Any]:
    return [[w, h, data] for w, h, data in items]


class StatusNotifierItem(ServiceInterface):
    def __init__(
        self,
        item_id: str,
        actions: ItemActions,
        call_soon: Callable[[Callable[[], None]], Any],
        icon_theme_path: str = "",
    ) -> None:
        super().__init__(INTERFACE)
        self._id = item_id
        self._actions = actions
        self._call_soon = call_soon
        self._theme_path = icon_theme_path
        self.look = ItemLook()

    def show(self, look: ItemLook) -> None:
        old, self.look = self.look, look
        if (old.icon_name, old.icon_pixmaps) != (look.icon_name, look.icon_pixmaps):
            self.NewIcon()
        if (old.attention_icon_name, old.attention_pixmaps) != (
            look.attention_icon_name,
            look.attention_pixmaps,
        ):
            self.NewAttentionIcon()
        if old.title != look.title:
            self.NewTitle()
        if (old.tooltip_title, old.tooltip_body) != (look.tooltip_title, look.tooltip_body):
            self.NewToolTip()
        if old.status != look.status:
            self.NewStatus(look.status.value)

    # -- properties ---------------------------------------------------------------------

    @dbus_property(access=PropertyAccess.READ)
    def Category(self) -> DStr:
        return "SystemServices"

    @dbus_property(access=PropertyAccess.READ)
    def Id(self) -> DStr:
        return self._id

    @dbus_property(access=PropertyAccess.READ)
    def Title(self) -> DStr:
        return self.look.title

    @dbus_property(access=PropertyAccess.READ)
    def Status(self) -> DStr:
        return self.look.status.value

    @dbus_property(access=PropertyAccess.READ)
    def WindowId(self) -> DInt:
        return 0

    @dbus_property(access=PropertyAccess.READ)
    def IconThemePath(self) -> DStr:
        return self._theme_path

    @dbus_property(access=PropertyAccess.READ)
    def IconName(self) -> DStr:
        return self.look.icon_name

    @dbus_property(access=PropertyAccess.READ)
    def IconPixmap(self) -> Pixmaps:
        return _pixmaps(self.look.icon_pixmaps)

    @dbus_property(access=PropertyAccess.READ)
    def OverlayIconName(self) -> DStr:
        return ""

    @dbus_property(access=PropertyAccess.READ)
    def OverlayIconPixmap(self) -> Pixmaps:
        return []

    @dbus_property(access=PropertyAccess.READ)
    def AttentionIconName(self) -> DStr:
        return self.look.attention_icon_name

    @dbus_property(access=PropertyAccess.READ)
    def AttentionIconPixmap(self) -> Pixmaps:
        return _pixmaps(self.look.attention_pixmaps)

    @dbus_property(access=PropertyAccess.READ)
    def AttentionMovieName(self) -> DStr:
        return ""

    @dbus_property(access=PropertyAccess.READ)
    def ToolTip(self) -> ToolTip:
        look = self.look
        return [look.icon_name, _pixmaps(look.icon_pixmaps), look.tooltip_title, look.tooltip_body]

    @dbus_property(access=PropertyAccess.READ)
    def ItemIsMenu(self) -> DBool:
        return False

    @dbus_property(access=PropertyAccess.READ)
    def Menu(self) -> DPath:
        return MENU_PATH

    # -- methods ------------------------------------------------------------------------

    @dbus_method()
    def Activate(self, x: DInt, y: DInt) -> None:
        self._call_soon(self._actions.activate)

    @dbus_method()
    def SecondaryActivate(self, x: DInt, y: DInt) -> None:
        if self._actions.secondary_activate is not None:
            self._call_soon(self._actions.secondary_activate)

    @dbus_method()
    def ContextMenu(self, x: DInt, y: DInt) -> None:
        # Hosts show the exported menu themselves; an item without a window has none.
        return None

    @dbus_method()
    def Scroll(self, delta: DInt, orientation: DStr) -> None:
        return None

    @dbus_method()
    def ProvideXdgActivationToken(self, token: DStr) -> None:
        # Sent by the host just before Activate: lets the dialog we raise take focus.
        if self._actions.activation_token is not None:
            self._actions.activation_token(token)

    # -- signals ------------------------------------------------------------------------

    @dbus_signal()
    def NewTitle(self) -> None:
        return None

    @dbus_signal()
    def NewIcon(self) -> None:
        return None

    @dbus_signal()
    def NewAttentionIcon(self) -> None:
        return None

    @dbus_signal()
    def NewOverlayIcon(self) -> None:
        return None

    @dbus_signal()
    def NewToolTip(self) -> None:
        return None

    @dbus_signal()
    def NewStatus(self, status: DStr) -> DStr:
        return status
