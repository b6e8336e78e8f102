"""Ask the Wayland compositor which globals it advertises to an ordinary client.

Whether any program on the desktop can type or click into our windows is
decided by the compositor: wlroots compositors (sway, …) advertise the
virtual keyboard and virtual pointer protocols to every client, KWin and
Mutter do not.  Rather than guess from the desktop's name, the tray opens
its own short connection to the display it runs on, reads the
``wl_registry`` globals (one round trip) and disconnects.

The binding is a few ``ctypes`` calls into ``libwayland-client`` (which the
Qt Wayland plugin loads anyway); no Qt, so it also runs as
``python -m ollie_tray.wayland_globals`` (prints JSON: what the end-to-end
tests ask as the desktop's user).

Fail safe: anything that prevents the check — no library, no display name,
the display handed over as an inherited socket (``WAYLAND_SOCKET``), a
refused connection, no answer within the deadline, a registry without
``wl_compositor`` — is reported as an error, and the caller warns as if
virtual input were offered.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

VIRTUAL_INPUT_GLOBALS = frozenset(
    {
        "zwp_virtual_keyboard_manager_v1",  # wlroots: any client may type (wtype)
        "zwlr_virtual_pointer_manager_v1",  # wlroots: any client may move and click
        "org_kde_kwin_fake_input",  # KWin hides it unless a client is allowed it
    }
)
"""Globals through which a client can inject input into other clients' windows."""

CHECK_TIMEOUT_S = 3.0
_GET_REGISTRY = 1  # wl_display request opcode of get_registry


class WaylandCheckError(RuntimeError):
    """The compositor's globals could not be read."""


_GlobalFn = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32
)
_GlobalRemoveFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)


class _RegistryListener(ctypes.Structure):
    _fields_ = [("global_", _GlobalFn), ("global_remove", _GlobalRemoveFn)]


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("wayland-client") or "libwayland-client.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise WaylandCheckError(f"cannot load libwayland-client: {exc}") from exc
    lib.wl_display_connect.argtypes = [ctypes.c_char_p]
    lib.wl_display_connect.restype = ctypes.c_void_p
    lib.wl_display_disconnect.argtypes = [ctypes.c_void_p]
    lib.wl_display_disconnect.restype = None
    lib.wl_display_roundtrip.argtypes = [ctypes.c_void_p]
    lib.wl_display_roundtrip.restype = ctypes.c_int
    # The header's wl_display_get_registry() is an inline wrapper of this call.
    lib.wl_proxy_marshal_array_constructor.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.wl_proxy_marshal_array_constructor.restype = ctypes.c_void_p
    lib.wl_proxy_add_listener.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.wl_proxy_add_listener.restype = ctypes.c_int
    lib.wl_proxy_destroy.argtypes = [ctypes.c_void_p]
    lib.wl_proxy_destroy.restype = None
    return lib


def display_name(env: Mapping[str, str]) -> str:
    """The display the app's own connection used, or :class:`WaylandCheckError`."""
    if env.get("WAYLAND_SOCKET"):
        raise WaylandCheckError("the display was handed over as a socket (WAYLAND_SOCKET)")
    name = env.get("WAYLAND_DISPLAY", "")
    if not name:
        raise WaylandCheckError("WAYLAND_DISPLAY is not set")
    return name


def advertised_globals(name: str) -> frozenset[str]:
    """The interface names of every global the compositor at ``name`` advertises."""
    lib = _library()
    display = lib.wl_display_connect(os.fsencode(name))
    if not display:
        raise WaylandCheckError(f"cannot connect to Wayland display {name!r}")
    found: set[str] = set()

    def on_global(_data: object, _reg: object, _id: int, iface: bytes | None, _v: int) -> None:
        if iface:
            found.add(iface.decode("ascii", "replace"))

    listener = _RegistryListener(_GlobalFn(on_global), _GlobalRemoveFn(lambda *_args: None))
    try:
        interface = ctypes.addressof(ctypes.c_byte.in_dll(lib, "wl_registry_interface"))
        new_id = (ctypes.c_uint64 * 1)(0)  # union wl_argument: the new object, filled in
        registry = lib.wl_proxy_marshal_array_constructor(display, _GET_REGISTRY, new_id, interface)
        if not registry:
            raise WaylandCheckError("wl_display.get_registry failed")
        try:
            if lib.wl_proxy_add_listener(registry, ctypes.byref(listener), None) != 0:
                raise WaylandCheckError("cannot listen to wl_registry")
            if lib.wl_display_roundtrip(display) < 0:
                raise WaylandCheckError(f"the round trip to {name!r} failed")
        finally:
            lib.wl_proxy_destroy(registry)
    finally:
        lib.wl_display_disconnect(display)
    return frozenset(found)


@dataclass(frozen=True)
class VirtualInputCheck:
    """What the compositor offers: the virtual-input globals, or why nobody knows."""

    offered: frozenset[str] = frozenset()
    error: str | None = None

    @property
    def warn(self) -> bool:
        """True unless the compositor was asked and offers no virtual input (fail safe)."""
        return self.error is not None or bool(self.offered)

    def describe(self) -> str:
        if self.error is not None:
            return f"cannot tell whether the compositor offers virtual input ({self.error})"
        if self.offered:
            return "the compositor offers virtual input to every client: " + ", ".join(
                sorted(self.offered)
            )
        return "the compositor offers no virtual input to clients"


def judge_globals(names: frozenset[str]) -> VirtualInputCheck:
    """The decision for one registry listing."""
    if "wl_compositor" not in names:
        return VirtualInputCheck(error="the registry listed no wl_compositor")
    return VirtualInputCheck(offered=names & VIRTUAL_INPUT_GLOBALS)


def check_virtual_input(
    env: Mapping[str, str],
    probe: Callable[[str], frozenset[str]] = advertised_globals,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> VirtualInputCheck:
    """Ask the compositor of ``env``'s display; a compositor that does not answer is an error."""
    try:
        name = display_name(env)
    except WaylandCheckError as exc:
        return VirtualInputCheck(error=str(exc))
    result: list[VirtualInputCheck] = []

    def ask() -> None:
        try:
            result.append(judge_globals(probe(name)))
        except Exception as exc:
            result.append(VirtualInputCheck(error=f"{type(exc).__name__}: {exc}"))

    # A thread, so that a compositor that never answers cannot hang the tray.
    worker = threading.Thread(target=ask, name="wayland-globals", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not result:
        return VirtualInputCheck(error=f"no answer from {name!r} within {timeout_s:g} s")
    return result[0]


def main() -> int:
    """Print the globals and the decision for ``$WAYLAND_DISPLAY`` as JSON."""
    check = check_virtual_input(os.environ)
    try:
        names = sorted(advertised_globals(display_name(os.environ)))
    except WaylandCheckError:
        names = []
    report = {
        "globals": names,
        "offered": sorted(check.offered),
        "error": check.error,
        "warn": check.warn,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
