"""A minimal Wayland client over ``ctypes``: one xdg-shell window and xdg-activation tokens.

Used by ``kwin_notifier.py`` (run as the test user) to be "another
application that has the focus" on a real compositor, and to ask that
compositor for an ``xdg_activation_v1`` token for its own focused surface —
what a notification server does when the person clicks *Review*.  Nothing
here is faked: the window is an ordinary ``xdg_toplevel`` with a ``wl_shm``
buffer, and the token is whatever the compositor answers (KWin answers
``not-granted-666`` to a client whose surface does not have the focus).

The core interfaces (``wl_compositor``, ``wl_shm``, ``wl_surface``, …) come
from ``libwayland-client`` itself; the xdg-shell and xdg-activation
interfaces are described here, as ``wayland-scanner`` would generate them,
for the requests and events this client uses.  Like
``ollie_tray/wayland_globals.py``, requests are sent with
``wl_proxy_marshal_array*`` (no variadic calls).

Single-threaded: :meth:`Toplevel.dispatch` is called when the display's file
descriptor (:attr:`Toplevel.fd`) is readable; every request is flushed at once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Callable
from typing import Any

_U64 = ctypes.c_uint64
_VP = ctypes.c_void_p
_FORMAT_XRGB8888 = 1


class WaylandError(RuntimeError):
    """The display could not be used."""


class _Message(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("signature", ctypes.c_char_p), ("types", _VP)]


class _Interface(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("version", ctypes.c_int),
        ("method_count", ctypes.c_int),
        ("methods", ctypes.POINTER(_Message)),
        ("event_count", ctypes.c_int),
        ("events", ctypes.POINTER(_Message)),
    ]


_keep: list[Any] = []  # ctypes objects the C library points into


def _messages(spec: list[tuple[str, str]]) -> Any:
    array = (_Message * max(len(spec), 1))()
    for i, (name, sig) in enumerate(spec):
        count = sum(1 for c in sig if c.isalpha())
        types = (_VP * max(count, 1))()  # no argument needs its interface checked
        _keep.append(types)
        array[i] = _Message(name.encode(), sig.encode(), ctypes.cast(types, _VP))
    _keep.append(array)
    return array


def _interface(name: str, requests: list[tuple[str, str]], events: list[tuple[str, str]]) -> int:
    iface = _Interface(
        name.encode(),
        1,
        len(requests),
        _messages(requests),
        len(events),
        _messages(events),
    )
    _keep.append(iface)
    return ctypes.addressof(iface)


XDG_WM_BASE = _interface(
    "xdg_wm_base",
    [("destroy", ""), ("create_positioner", "n"), ("get_xdg_surface", "no"), ("pong", "u")],
    [("ping", "u")],
)
XDG_SURFACE = _interface(
    "xdg_surface",
    [
        ("destroy", ""),
        ("get_toplevel", "n"),
        ("get_popup", "n?oo"),
        ("set_window_geometry", "iiii"),
        ("ack_configure", "u"),
    ],
    [("configure", "u")],
)
XDG_TOPLEVEL = _interface(
    "xdg_toplevel",
    [("destroy", ""), ("set_parent", "?o"), ("set_title", "s"), ("set_app_id", "s")],
    [("configure", "iia"), ("close", "")],
)
XDG_ACTIVATION = _interface(
    "xdg_activation_v1",
    [("destroy", ""), ("get_activation_token", "n"), ("activate", "so")],
    [],
)
XDG_ACTIVATION_TOKEN = _interface(
    "xdg_activation_token_v1",
    [
        ("set_serial", "uo"),
        ("set_app_id", "s"),
        ("set_surface", "o"),
        ("commit", ""),
        ("destroy", ""),
    ],
    [("done", "s")],
)

_Global = ctypes.CFUNCTYPE(None, _VP, _VP, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32)
_GlobalRemove = ctypes.CFUNCTYPE(None, _VP, _VP, ctypes.c_uint32)
_Serial = ctypes.CFUNCTYPE(None, _VP, _VP, ctypes.c_uint32)
_TopConfigure = ctypes.CFUNCTYPE(None, _VP, _VP, ctypes.c_int32, ctypes.c_int32, _VP)
_Plain = ctypes.CFUNCTYPE(None, _VP, _VP)
_Text = ctypes.CFUNCTYPE(None, _VP, _VP, ctypes.c_char_p)


def _listener(*callbacks: Any) -> Any:
    fields = [(f"f{i}", type(cb)) for i, cb in enumerate(callbacks)]
    struct_type = type("Listener", (ctypes.Structure,), {"_fields_": fields})
    listener = struct_type(*callbacks)
    _keep.append((listener, callbacks))
    return listener


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("wayland-client") or "libwayland-client.so.0")
    signatures: dict[str, tuple[list[Any], Any]] = {
        "wl_display_connect": ([ctypes.c_char_p], _VP),
        "wl_display_disconnect": ([_VP], None),
        "wl_display_get_fd": ([_VP], ctypes.c_int),
        "wl_display_roundtrip": ([_VP], ctypes.c_int),
        "wl_display_dispatch": ([_VP], ctypes.c_int),
        "wl_display_flush": ([_VP], ctypes.c_int),
        "wl_proxy_marshal_array": ([_VP, ctypes.c_uint32, _VP], None),
        "wl_proxy_marshal_array_constructor": ([_VP, ctypes.c_uint32, _VP, _VP], _VP),
        "wl_proxy_marshal_array_constructor_versioned": (
            [_VP, ctypes.c_uint32, _VP, _VP, ctypes.c_uint32],
            _VP,
        ),
        "wl_proxy_add_listener": ([_VP, _VP, _VP], ctypes.c_int),
        "wl_proxy_destroy": ([_VP], None),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = result
    return lib


def _core(lib: ctypes.CDLL, name: str) -> int:
    return ctypes.addressof(ctypes.c_byte.in_dll(lib, f"{name}_interface"))


def _args(*values: int | bytes | None) -> Any:
    """A ``union wl_argument`` array: integers, object pointers, strings (kept alive)."""
    array = (_U64 * max(len(values), 1))()
    keep: list[Any] = []
    for i, value in enumerate(values):
        if isinstance(value, bytes):
            text = ctypes.create_string_buffer(value)
            keep.append(text)
            array[i] = ctypes.addressof(text)
        else:
            array[i] = (value or 0) & 0xFFFFFFFFFFFFFFFF
    _keep.append(keep)  # tiny, and only a few requests per test
    return array


class Toplevel:
    """One window of a solid colour, and tokens for it from ``xdg_activation_v1``."""

    def __init__(self, display_name: str, title: str, app_id: str, size: tuple[int, int]) -> None:
        self.lib = _library()
        self.display = self.lib.wl_display_connect(os.fsencode(display_name))
        if not self.display:
            raise WaylandError(f"cannot connect to Wayland display {display_name!r}")
        self.fd: int = self.lib.wl_display_get_fd(self.display)
        self.configured = False
        self.on_configured: Callable[[], None] | None = None
        self._globals: dict[str, tuple[int, int]] = {}
        self._bind_globals()
        self._open(title, app_id, size)

    # -- setup -------------------------------------------------------------------------

    def _bind_globals(self) -> None:
        lib = self.lib
        registry = lib.wl_proxy_marshal_array_constructor(
            self.display, 1, _args(None), _core(lib, "wl_registry")
        )

        def on_global(_d: object, _r: object, name: int, iface: bytes | None, ver: int) -> None:
            if iface:
                self._globals[iface.decode()] = (name, ver)

        lib.wl_proxy_add_listener(
            registry,
            ctypes.byref(_listener(_Global(on_global), _GlobalRemove(lambda *_a: None))),
            None,
        )
        if lib.wl_display_roundtrip(self.display) < 0:
            raise WaylandError("the registry round trip failed")
        wanted = {
            "wl_compositor": _core(lib, "wl_compositor"),
            "wl_shm": _core(lib, "wl_shm"),
            "xdg_wm_base": XDG_WM_BASE,
            "xdg_activation_v1": XDG_ACTIVATION,
        }
        missing = sorted(set(wanted) - set(self._globals))
        if missing:
            raise WaylandError(f"the compositor does not offer {', '.join(missing)}")
        self.compositor = self._bind(registry, "wl_compositor", wanted["wl_compositor"])
        self.shm = self._bind(registry, "wl_shm", wanted["wl_shm"])
        self.wm_base = self._bind(registry, "xdg_wm_base", XDG_WM_BASE)
        self.activation = self._bind(registry, "xdg_activation_v1", XDG_ACTIVATION)

        def ping(_d: object, wm_base: int, serial: int) -> None:
            self._request(wm_base, 3, serial)  # pong

        self.lib.wl_proxy_add_listener(self.wm_base, ctypes.byref(_listener(_Serial(ping))), None)

    def _bind(self, registry: int, name: str, interface: int) -> int:
        number, _version = self._globals[name]
        proxy = self.lib.wl_proxy_marshal_array_constructor_versioned(
            registry, 0, _args(number, name.encode(), 1, None), interface, 1
        )
        if not proxy:
            raise WaylandError(f"cannot bind {name}")
        return int(proxy)

    def _open(self, title: str, app_id: str, size: tuple[int, int]) -> None:
        lib = self.lib
        self.surface = self._new(self.compositor, 0, _core(lib, "wl_surface"))
        self.xdg_surface = self._new(self.wm_base, 2, XDG_SURFACE, None, self.surface)
        self.toplevel = self._new(self.xdg_surface, 1, XDG_TOPLEVEL, None)
        self._request(self.toplevel, 2, title.encode())
        self._request(self.toplevel, 3, app_id.encode())
        self._buffer = self._paint(size)

        def configure(_d: object, xdg_surface: int, serial: int) -> None:
            self._request(xdg_surface, 4, serial)  # ack_configure
            if not self.configured:
                self._request(self.surface, 1, self._buffer, 0, 0)  # attach
                self._request(self.surface, 2, 0, 0, size[0], size[1])  # damage
            self._request(self.surface, 6)  # commit
            if not self.configured:
                self.configured = True
                if self.on_configured is not None:
                    self.on_configured()

        lib.wl_proxy_add_listener(
            self.xdg_surface, ctypes.byref(_listener(_Serial(configure))), None
        )
        lib.wl_proxy_add_listener(
            self.toplevel,
            ctypes.byref(_listener(_TopConfigure(lambda *_a: None), _Plain(lambda *_a: None))),
            None,
        )
        self._request(self.surface, 6)  # the initial commit asks for a configure
        self.flush()

    def _paint(self, size: tuple[int, int]) -> int:
        width, height = size
        stride = width * 4
        length = stride * height
        fd = os.memfd_create("ollie-kwin-test-buffer")
        try:
            os.ftruncate(fd, length)
            with mmap.mmap(fd, length) as pixels:
                pixels.write(bytes((0x60, 0x40, 0x20, 0xFF)) * (width * height))
            pool = self._new(self.shm, 0, _core(self.lib, "wl_shm_pool"), None, fd, length)
        finally:
            os.close(fd)  # libwayland sent its own duplicate
        buffer = self._new(
            pool, 0, _core(self.lib, "wl_buffer"), None, 0, width, height, stride, _FORMAT_XRGB8888
        )
        self._request(pool, 1)  # wl_shm_pool.destroy: the buffer keeps the memory
        self.lib.wl_proxy_destroy(pool)
        return buffer

    # -- requests ------------------------------------------------------------------------

    def _new(self, proxy: int, opcode: int, interface: int, *values: int | bytes | None) -> int:
        made = self.lib.wl_proxy_marshal_array_constructor(proxy, opcode, _args(*values), interface)
        if not made:
            raise WaylandError(f"request {opcode} failed")
        return int(made)

    def _request(self, proxy: int, opcode: int, *values: int | bytes | None) -> None:
        self.lib.wl_proxy_marshal_array(proxy, opcode, _args(*values))

    def flush(self) -> None:
        if self.lib.wl_display_flush(self.display) < 0:
            raise WaylandError("the connection to the compositor broke")

    def dispatch(self) -> None:
        """Read and handle what the compositor sent (call when :attr:`fd` is readable)."""
        if self.lib.wl_display_dispatch(self.display) < 0:
            raise WaylandError("the connection to the compositor broke")
        self.flush()

    def request_token(self, on_done: Callable[[str], None]) -> None:
        """Ask for an activation token for this window's surface; ``on_done(token)`` later."""
        token = self._new(self.activation, 1, XDG_ACTIVATION_TOKEN, None)

        def done(_d: object, proxy: int, text: bytes | None) -> None:
            self._request(proxy, 4)  # destroy
            self.lib.wl_proxy_destroy(proxy)
            on_done((text or b"").decode())

        self.lib.wl_proxy_add_listener(token, ctypes.byref(_listener(_Text(done))), None)
        self._request(token, 2, self.surface)  # set_surface
        self._request(token, 3)  # commit
        self.flush()

    def close(self) -> None:
        self.lib.wl_display_disconnect(self.display)
