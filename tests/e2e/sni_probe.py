"""A StatusNotifierItem client for the Wayland end-to-end tests (run as the test user).

Commands (JSON on stdout):

- ``items``: the watcher's ``RegisteredStatusNotifierItems``.
- ``props ITEM``: the item's properties (``ITEM`` is ``busname/path`` as the
  watcher lists it, or a bus name).
- ``layout ITEM``: the dbusmenu items, flattened: ``[{id, label, enabled,
  toggle-state, parent}]``.
- ``click ITEM ID``: send ``Event(ID, "clicked")``.
- ``about ITEM ID``: send ``AboutToShow(ID)``.
- ``monitor ITEM SECONDS``: print one JSON line per menu or status signal of
  the item for SECONDS (flushes each line), then exit.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

WATCHER = "org.kde.StatusNotifierWatcher"
ITEM = "org.kde.StatusNotifierItem"
MENU = "com.canonical.dbusmenu"


def split(item: str) -> tuple[str, str]:
    if "/" in item:
        name, path = item.split("/", 1)
        return name, "/" + path
    return item, "/StatusNotifierItem"


def plain(value: Any) -> Any:
    if isinstance(value, Variant):
        return plain(value.value)
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


async def call(
    bus: MessageBus,
    dest: str,
    path: str,
    iface: str,
    member: str,
    sig: str = "",
    body: list[Any] | None = None,
) -> list[Any]:
    reply = await bus.call(
        Message(
            destination=dest,
            path=path,
            interface=iface,
            member=member,
            signature=sig,
            body=body or [],
        )
    )
    assert reply is not None
    if reply.message_type is MessageType.ERROR:
        raise SystemExit(f"{member}: {reply.error_name} {reply.body}")
    return list(reply.body)


async def get_all(bus: MessageBus, dest: str, path: str, iface: str) -> dict[str, Any]:
    body = await call(bus, dest, path, "org.freedesktop.DBus.Properties", "GetAll", "s", [iface])
    return {k: plain(v) for k, v in body[0].items()}


def flatten(node: list[Any], parent: int, out: list[dict[str, Any]]) -> None:
    item_id, props, children = node
    entry = {"id": item_id, "parent": parent, **{k: plain(v) for k, v in props.items()}}
    out.append(entry)
    for child in children:
        flatten(plain(child) if not isinstance(child, Variant) else child.value, item_id, out)


async def main(argv: list[str]) -> Any:
    bus = await MessageBus().connect()
    cmd = argv[0]
    if cmd == "items":
        props = await get_all(bus, WATCHER, "/StatusNotifierWatcher", WATCHER)
        return props.get("RegisteredStatusNotifierItems", [])
    name, path = split(argv[1])
    if cmd == "props":
        return await get_all(bus, name, path, ITEM)
    item = await get_all(bus, name, path, ITEM)
    menu = str(item["Menu"])
    if cmd == "layout":
        body = await call(bus, name, menu, MENU, "GetLayout", "iias", [0, -1, []])
        out: list[dict[str, Any]] = []
        flatten(body[1], -1, out)
        return {"revision": body[0], "items": out}
    if cmd == "click":
        await call(
            bus,
            name,
            menu,
            MENU,
            "Event",
            "isvu",
            [int(argv[2]), "clicked", Variant("i", 0), int(time.time())],
        )
        return {"clicked": int(argv[2])}
    if cmd == "about":
        body = await call(bus, name, menu, MENU, "AboutToShow", "i", [int(argv[2])])
        return {"needs_update": body[0]}
    if cmd == "monitor":
        owner = (
            await call(
                bus,
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "GetNameOwner",
                "s",
                [name],
            )
        )[0]
        await call(
            bus,
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "AddMatch",
            "s",
            [f"type='signal',sender='{owner}'"],
        )

        def handler(msg: Message) -> None:
            if msg.message_type is MessageType.SIGNAL and msg.sender == owner:
                print(
                    json.dumps({"member": msg.member, "path": msg.path, "body": plain(msg.body)}),
                    flush=True,
                )

        bus.add_message_handler(handler)
        print(json.dumps({"member": "ready"}), flush=True)
        await asyncio.sleep(float(argv[2]))
        return {"member": "end"}
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
