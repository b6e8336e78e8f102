"""The exported menu as data: entries with stable keys, stable integer ids, and diffs.

Pure (no Qt, no D-Bus): :mod:`ollie_tray.sni.qt_menu` turns the tray's
``QMenu`` into :class:`Entry` trees, :mod:`ollie_tray.sni.dbusmenu` serves
them.  A tray menu is rebuilt from scratch on every change; hosts cache items
by id, so ids must survive a rebuild: each entry has a *key* (an object name
the tray gave it, else its parent's key, its label and its occurrence among
equal labels) and :class:`MenuIds` hands out one id per key for the life of
the menu.  :func:`diff` then says what a host must hear: nothing (a rebuild
that changed nothing), property updates only, or a new layout.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

ROOT_ID = 0


@dataclass(frozen=True)
class Entry:
    """One menu item as a host shows it."""

    key: str
    label: str = ""
    enabled: bool = True
    visible: bool = True
    separator: bool = False
    checkable: bool = False
    checked: bool = False
    children: tuple[Entry, ...] = ()
    submenu: bool = False

    def properties(self) -> dict[str, Any]:
        """The dbusmenu properties of this entry (Python values; D-Bus typing elsewhere)."""
        if self.separator:
            return {"type": "separator", "visible": self.visible}
        props: dict[str, Any] = {
            "label": dbusmenu_label(self.label),
            "enabled": self.enabled,
            "visible": self.visible,
        }
        if self.checkable:
            props["toggle-type"] = "checkmark"
            props["toggle-state"] = 1 if self.checked else 0
        if self.submenu:
            props["children-display"] = "submenu"
        return props


def dbusmenu_label(text: str) -> str:
    """Qt's ``&`` mnemonics as dbusmenu's ``_``; literal underscores doubled."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "&":
            if i + 1 < len(text) and text[i + 1] == "&":
                out.append("&")
                i += 2
                continue
            out.append("_")
        elif ch == "_":
            out.append("__")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def plain_label(text: str) -> str:
    """A label without mnemonics (for keys and logs)."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


class KeyMaker:
    """Keys for the children of one parent: the given name, else label and occurrence."""

    def __init__(self, parent: str) -> None:
        self.parent = parent
        self._seen: dict[str, int] = {}

    def key(self, name: str, label: str, separator: bool = False) -> str:
        if name:
            return name
        base = "---" if separator else plain_label(label)
        n = self._seen.get(base, 0)
        self._seen[base] = n + 1
        return f"{self.parent}/{base}#{n}"


@dataclass
class MenuIds:
    """One integer id per key for the life of the exported menu (0 is the root)."""

    _ids: dict[str, int] = field(default_factory=dict)
    _next: int = 1

    def id_for(self, key: str) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._next
            self._next += 1
            self._ids[key] = found
        return found


@dataclass(frozen=True)
class Node:
    """An entry placed in the tree: its id and its children's ids."""

    id: int
    entry: Entry
    children: tuple[int, ...]


def index(entries: Sequence[Entry], ids: MenuIds) -> dict[int, Node]:
    """The tree of ``entries`` under the root, by id."""
    nodes: dict[int, Node] = {}

    def place(items: Sequence[Entry]) -> tuple[int, ...]:
        placed = []
        for entry in items:
            item_id = ids.id_for(entry.key)
            if item_id in nodes:  # the same key twice: keep the first, never crash a host
                continue
            nodes[item_id] = Node(item_id, entry, ())
            nodes[item_id] = Node(item_id, entry, place(entry.children))
            placed.append(item_id)
        return tuple(placed)

    root = Entry(key="", submenu=True)
    nodes[ROOT_ID] = Node(ROOT_ID, root, ())
    nodes[ROOT_ID] = Node(ROOT_ID, root, place(entries))
    return nodes


@dataclass(frozen=True)
class Diff:
    """What changed between two indexed menus."""

    layout: bool
    properties: dict[int, dict[str, Any]]

    @property
    def empty(self) -> bool:
        return not self.layout and not self.properties


def diff(old: dict[int, Node], new: dict[int, Node]) -> Diff:
    """A new layout when any item appeared, vanished or moved; else changed properties."""
    layout = old.keys() != new.keys() or any(
        old[i].children != new[i].children for i in new if i in old
    )
    changed: dict[int, dict[str, Any]] = {}
    for item_id, node in new.items():
        before = old.get(item_id)
        if before is None:
            continue
        props = node.entry.properties()
        if props != before.entry.properties():
            changed[item_id] = props
    return Diff(layout, changed)


def walk(nodes: dict[int, Node], start: int = ROOT_ID) -> Iterator[Node]:
    node = nodes[start]
    yield node
    for child in node.children:
        yield from walk(nodes, child)
