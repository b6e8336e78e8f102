"""What any same-user program can do over the accessibility bus: switch it on, press a button.

A real ``at-spi-bus-launcher`` (package ``at-spi2-core``) on a test's own
D-Bus session bus; :func:`switch_on` sets ``org.a11y.Status.IsEnabled`` the
way an attacker would, and :func:`press` walks the AT-SPI tree of every
registered application and calls ``org.a11y.atspi.Action.DoAction("Press")``
on the first push button with the given accessible name, exactly what
``pyatspi``/``accerciser`` do.  Uses ``dbus-fast`` (already a dependency).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import desktop_session as ds
from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
ROOT = "/org/a11y/atspi/accessible/root"
ACCESSIBLE = "org.a11y.atspi.Accessible"


@contextmanager
def accessibility_bus(env: dict[str, str], log: Path) -> Iterator[None]:
    """``at-spi-bus-launcher`` on the session bus of ``env`` until the block ends."""
    ds.require(LAUNCHER)
    with ds.running([LAUNCHER, "--launch-immediately"], env, log):
        ds.wait_until(lambda: ds.name_has_owner(env, "org.a11y.Bus"), "org.a11y.Bus")
        yield


async def _call(bus: MessageBus, message: Message) -> list[object]:
    reply = await bus.call(message)
    assert reply is not None
    if reply.message_type == MessageType.ERROR:
        raise RuntimeError(f"{message.member}: {reply.error_name}: {reply.body}")
    return list(reply.body)


async def _session(address: str) -> MessageBus:
    return await MessageBus(bus_address=address).connect()


async def _switch_on(address: str) -> None:
    bus = await _session(address)
    try:
        await _call(
            bus,
            Message(
                destination="org.a11y.Bus",
                path="/org/a11y/bus",
                interface="org.freedesktop.DBus.Properties",
                member="Set",
                signature="ssv",
                body=["org.a11y.Status", "IsEnabled", Variant("b", True)],
            ),
        )
    finally:
        bus.disconnect()


def switch_on(session_address: str) -> None:
    """Set ``org.a11y.Status.IsEnabled`` (no privilege needed: same user)."""
    asyncio.run(_switch_on(session_address))


async def _a11y_address(session_address: str) -> str:
    bus = await _session(session_address)
    try:
        body = await _call(
            bus,
            Message(
                destination="org.a11y.Bus",
                path="/org/a11y/bus",
                interface="org.a11y.Bus",
                member="GetAddress",
            ),
        )
    finally:
        bus.disconnect()
    return str(body[0])


async def _locate(bus: MessageBus, name: str) -> tuple[str, str] | None:
    """The (bus name, object path) of the first push button named ``name``, breadth first."""
    todo: list[tuple[str, str]] = [("org.a11y.atspi.Registry", ROOT)]
    while todo:
        dest, path = todo.pop(0)
        try:
            role = await _call(bus, _accessible(dest, path, "GetRoleName"))
            label = await _call(
                bus,
                Message(
                    destination=dest,
                    path=path,
                    interface="org.freedesktop.DBus.Properties",
                    member="Get",
                    signature="ss",
                    body=[ACCESSIBLE, "Name"],
                ),
            )
            children = await _call(bus, _accessible(dest, path, "GetChildren"))
        except RuntimeError:  # an object that went away while we walked
            continue
        value = label[0].value if isinstance(label[0], Variant) else label[0]
        if role[0] == "push button" and value == name:
            return dest, path
        todo.extend((str(c[0]), str(c[1])) for c in children[0])  # type: ignore[attr-defined]
    return None


def _accessible(dest: str, path: str, member: str) -> Message:
    return Message(destination=dest, path=path, interface=ACCESSIBLE, member=member)


async def _find_and_press(session_address: str, name: str, *, do_press: bool) -> bool:
    bus = await _session(await _a11y_address(session_address))
    try:
        found = await _locate(bus, name)
        if found is None:
            return False
        if not do_press:
            return True
        dest, path = found
        action = "org.a11y.atspi.Action"
        actions = await _call(
            bus, Message(destination=dest, path=path, interface=action, member="GetActions")
        )
        index = [str(a[0]) for a in actions[0]].index("Press")  # type: ignore[attr-defined]
        done = await _call(
            bus,
            Message(
                destination=dest,
                path=path,
                interface=action,
                member="DoAction",
                signature="i",
                body=[index],
            ),
        )
        return bool(done[0])
    finally:
        bus.disconnect()


def find_button(session_address: str, name: str) -> bool:
    """True if a push button named ``name`` is on the accessibility bus (not pressed)."""
    return asyncio.run(_find_and_press(session_address, name, do_press=False))


def press(session_address: str, name: str) -> bool:
    """``DoAction("Press")`` on the push button named ``name``; True if one was pressed."""
    return asyncio.run(_find_and_press(session_address, name, do_press=True))
