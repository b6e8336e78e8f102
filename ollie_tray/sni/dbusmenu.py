"""``com.canonical.dbusmenu`` (version 3) over dbus-fast: the menu a StatusNotifierItem names.

The interface serves an indexed menu (:mod:`ollie_tray.sni.menu_model`) and
forwards a host's clicks and "about to show" to a :class:`MenuBackend`.
:meth:`DBusMenu.publish` takes a new menu and tells hosts only what changed:
``ItemsPropertiesUpdated`` for labels and check states, ``LayoutUpdated``
(once) when items appeared or vanished, nothing when a rebuild changed
nothing.  Runs on the asyncio loop (the Qt thread under qasync).

No ``from __future__ import annotations`` here: dbus-fast reads the
``Annotated`` signatures at class creation.
"""

import logging
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from dbus_fast import Variant
from dbus_fast.annotations import DBusSignature
from dbus_fast.constants import PropertyAccess
from dbus_fast.service import ServiceInterface, dbus_method, dbus_property, dbus_signal

from ollie_tray.sni.menu_model import ROOT_ID, Entry, Node, diff

log = logging.getLogger(__name__)

INTERFACE = "com.canonical.dbusmenu"
LAYOUT = "(ia{sv}av)"

Layout = Annotated[list[Any], DBusSignature(LAYOUT)]
LayoutReply = Annotated[list[Any], DBusSignature("u" + LAYOUT)]
Props = Annotated[dict[str, Variant], DBusSignature("a{sv}")]
GroupProps = Annotated[list[Any], DBusSignature("a(ia{sv})")]
Removed = Annotated[list[Any], DBusSignature("a(ias)")]
Ints = Annotated[list[int], DBusSignature("ai")]
Strs = Annotated[list[str], DBusSignature("as")]
Events = Annotated[list[Any], DBusSignature("a(isvu)")]
GroupReply = Annotated[list[Any], DBusSignature("aiai")]
DInt = Annotated[int, DBusSignature("i")]
DUInt = Annotated[int, DBusSignature("u")]
DStr = Annotated[str, DBusSignature("s")]
DBool = Annotated[bool, DBusSignature("b")]
DVar = Annotated[Variant, DBusSignature("v")]


class MenuBackend(Protocol):
    def activate(self, item_id: int) -> None:
        """A host clicked the item (called soon after the D-Bus call returned)."""

    def about_to_show(self, item_id: int) -> bool:
        """A host opens the item's submenu; True if the menu may have changed."""


_SIGNATURES = {
    "label": "s",
    "type": "s",
    "enabled": "b",
    "visible": "b",
    "toggle-type": "s",
    "toggle-state": "i",
    "children-display": "s",
}


def variants(props: dict[str, Any], names: list[str] | None = None) -> dict[str, Variant]:
    return {
        name: Variant(_SIGNATURES[name], value)
        for name, value in props.items()
        if not names or name in names
    }


class DBusMenu(ServiceInterface):
    def __init__(self, backend: MenuBackend, call_soon: Callable[[Callable[[], None]], Any]):
        super().__init__(INTERFACE)
        self._backend = backend
        self._call_soon = call_soon
        self._nodes: dict[int, Node] = {ROOT_ID: Node(ROOT_ID, Entry(key="", submenu=True), ())}
        self.revision = 1
        self.layout_updates = 0  # counted for tests and logs

    # -- publishing ------------------------------------------------------------------

    @property
    def nodes(self) -> dict[int, Node]:
        return self._nodes

    def publish(self, nodes: dict[int, Node]) -> None:
        change = diff(self._nodes, nodes)
        self._nodes = nodes
        if change.layout:
            self.revision += 1
            self.layout_updates += 1
            self.LayoutUpdated(self.revision, ROOT_ID)
        elif change.properties:
            self.ItemsPropertiesUpdated(
                [[i, variants(p)] for i, p in sorted(change.properties.items())], []
            )

    def _layout(self, item_id: int, depth: int, names: list[str]) -> list[Any]:
        node = self._nodes[item_id]
        children: list[Variant] = []
        if depth != 0:
            for child in node.children:
                children.append(Variant(LAYOUT, self._layout(child, depth - 1, names)))
        props = variants(node.entry.properties(), names)
        if node.children and item_id != ROOT_ID:
            props["children-display"] = Variant("s", "submenu")
        return [item_id, props, children]

    # -- methods -----------------------------------------------------------------------

    @dbus_method()
    def GetLayout(self, parent_id: DInt, recursion_depth: DInt, names: Strs) -> LayoutReply:
        if parent_id not in self._nodes:
            parent_id = ROOT_ID  # an id of an older layout: the host reloads from the root
        return [self.revision, self._layout(parent_id, recursion_depth, names)]

    @dbus_method()
    def GetGroupProperties(self, ids: Ints, names: Strs) -> GroupProps:
        wanted = ids or list(self._nodes)
        return [
            [i, variants(self._nodes[i].entry.properties(), names)]
            for i in wanted
            if i in self._nodes
        ]

    @dbus_method()
    def GetProperty(self, item_id: DInt, name: DStr) -> DVar:
        props = variants(self._nodes[item_id].entry.properties(), [name])
        if name not in props:
            raise ValueError(f"item {item_id} has no property {name!r}")
        return props[name]

    @dbus_method()
    def Event(self, item_id: DInt, event_id: DStr, data: DVar, timestamp: DUInt) -> None:
        self._event(item_id, event_id)

    @dbus_method()
    def EventGroup(self, events: Events) -> Ints:
        errors = []
        for item_id, event_id, _data, _ts in events:
            if item_id in self._nodes:
                self._event(item_id, event_id)
            else:
                errors.append(item_id)
        return errors

    def _event(self, item_id: int, event_id: str) -> None:
        if event_id != "clicked" or item_id not in self._nodes:
            return
        node = self._nodes[item_id]
        if node.entry.separator or not node.entry.enabled or node.children:
            return
        self._call_soon(lambda: self._backend.activate(item_id))

    @dbus_method()
    def AboutToShow(self, item_id: DInt) -> DBool:
        return item_id in self._nodes and self._backend.about_to_show(item_id)

    @dbus_method()
    def AboutToShowGroup(self, ids: Ints) -> GroupReply:
        updates = [i for i in ids if i in self._nodes and self._backend.about_to_show(i)]
        return [updates, [i for i in ids if i not in self._nodes]]

    # -- signals ---------------------------------------------------------------------------

    @dbus_signal()
    def ItemsPropertiesUpdated(
        self, updated: GroupProps, removed: Removed
    ) -> Annotated[list[Any], DBusSignature("a(ia{sv})a(ias)")]:
        return [updated, removed]

    @dbus_signal()
    def LayoutUpdated(
        self, revision: DUInt, parent: DInt
    ) -> Annotated[list[Any], DBusSignature("ui")]:
        return [revision, parent]

    # -- properties --------------------------------------------------------------------------

    @dbus_property(access=PropertyAccess.READ)
    def Version(self) -> DUInt:
        return 3

    @dbus_property(access=PropertyAccess.READ)
    def TextDirection(self) -> DStr:
        return "ltr"

    @dbus_property(access=PropertyAccess.READ)
    def Status(self) -> DStr:
        return "normal"

    @dbus_property(access=PropertyAccess.READ)
    def IconThemePath(self) -> Strs:
        return []
