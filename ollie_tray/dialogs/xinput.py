"""Where an X11 pointer event came from: a real device, or XTEST (``xdotool``)?

Qt reports every mouse event as coming from the master device ("Virtual
core pointer"), so widgets cannot tell a person's click from a program's.
The XInput2 events Qt receives on X11 carry the *source* (slave) device,
and the X server gives synthetic input its own slave devices ("Virtual core
XTEST pointer", one "… XTEST pointer" per master).  :class:`XInputOrigin`
is a native event filter that looks at each XI2 button/touch event before
Qt turns it into a ``QMouseEvent``, asks the server for the name of its
source device and remembers, by X server time, whether it was synthetic.
The approval dialog then asks :meth:`XInputOrigin.verdict` with the
``QMouseEvent``'s timestamp (Qt passes the X time through).

Fail closed: a core (non-XI2) button event, a ``SendEvent`` copy, an
unknown source device, or no record for that time all count as
"cannot tell", which does not approve.

Keys are not covered: Qt reads the keyboard through core ``KeyPress``
events, which name no device, so keyboard approval is off on X11
(see :mod:`ollie_tray.dialogs.real_input`).

Device names are asked through our own Xlib connection (``libX11`` +
``libXi`` through ctypes; no Python X library needed) at the moment the
event is seen, so a device added or removed later cannot be mistaken for
an earlier one.  Threading: everything runs on the Qt thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from PySide6.QtCore import QAbstractNativeEventFilter, QByteArray

log = logging.getLogger(__name__)

XCB_GE_GENERIC = 35
XCB_BUTTON_PRESS = 4
XCB_BUTTON_RELEASE = 5
XI_BUTTON_PRESS = 4
XI_BUTTON_RELEASE = 5
XI_TOUCH_BEGIN = 18
XI_TOUCH_END = 20
_PRESSES = (XI_BUTTON_PRESS, XI_TOUCH_BEGIN)
_RELEASES = (XI_BUTTON_RELEASE, XI_TOUCH_END)
_XI_ALL_DEVICES = 0
_REMEMBERED = 64


class Verdict(Enum):
    """What is known about the device behind one pointer event."""

    REAL = "real"
    SYNTHETIC = "synthetic"
    UNKNOWN = "unknown"


class Phase(Enum):
    PRESS = "press"
    RELEASE = "release"


def is_synthetic_device(name: str) -> bool:
    """True for the X server's XTEST slave devices ("Virtual core XTEST pointer"…)."""
    return "XTEST" in name.upper()


class _XIDeviceInfo(ctypes.Structure):
    _fields_ = [
        ("deviceid", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("use", ctypes.c_int),
        ("attachment", ctypes.c_int),
        ("enabled", ctypes.c_int),
        ("num_classes", ctypes.c_int),
        ("classes", ctypes.c_void_p),
    ]


class DeviceNames(Protocol):
    """The XInput major opcode and the server's devices by id (:class:`XDevices`)."""

    opcode: int

    def names(self) -> dict[int, str]: ...


class XInputUnavailable(RuntimeError):
    """libX11/libXi or the XInput2 extension is missing: pointer origin cannot be told."""


class XDevices:
    """A small Xlib connection that names XInput devices and knows the XI opcode."""

    def __init__(self, display: str | None) -> None:
        x11_name = ctypes.util.find_library("X11")
        xi_name = ctypes.util.find_library("Xi")
        if x11_name is None or xi_name is None:
            raise XInputUnavailable("libX11 or libXi is not installed")
        self._x11 = ctypes.CDLL(x11_name)
        self._xi = ctypes.CDLL(xi_name)
        self._x11.XOpenDisplay.restype = ctypes.c_void_p
        self._x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
        self._x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
        self._x11.XQueryExtension.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
        ]
        self._xi.XIQueryVersion.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
        ]
        self._xi.XIQueryDevice.restype = ctypes.POINTER(_XIDeviceInfo)
        self._xi.XIQueryDevice.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
        ]
        self._xi.XIFreeDeviceInfo.argtypes = [ctypes.POINTER(_XIDeviceInfo)]
        self._dpy = self._x11.XOpenDisplay(display.encode() if display else None)
        if not self._dpy:
            raise XInputUnavailable(f"cannot open X display {display!r}")
        opcode, event, error = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        found = self._x11.XQueryExtension(
            self._dpy,
            b"XInputExtension",
            ctypes.byref(opcode),
            ctypes.byref(event),
            ctypes.byref(error),
        )
        major, minor = ctypes.c_int(2), ctypes.c_int(2)
        version = ctypes.byref(major), ctypes.byref(minor)
        if not found or self._xi.XIQueryVersion(self._dpy, *version):
            self.close()
            raise XInputUnavailable("the X server has no XInput 2.2")
        self.opcode = opcode.value

    def names(self) -> dict[int, str]:
        """Every input device the server has now, by id."""
        count = ctypes.c_int()
        info = self._xi.XIQueryDevice(self._dpy, _XI_ALL_DEVICES, ctypes.byref(count))
        if not info:
            return {}
        try:
            return {
                info[i].deviceid: (info[i].name or b"").decode("utf-8", "replace")
                for i in range(count.value)
            }
        finally:
            self._xi.XIFreeDeviceInfo(info)

    def close(self) -> None:
        if self._dpy:
            self._x11.XCloseDisplay(self._dpy)
            self._dpy = None


@dataclass(frozen=True)
class _Seen:
    time: int
    phase: Phase
    verdict: Verdict
    device: str


class XInputOrigin(QAbstractNativeEventFilter):
    """Native event filter remembering the source device of recent pointer presses."""

    def __init__(self, devices: DeviceNames) -> None:
        super().__init__()
        self._devices = devices
        self._seen: deque[_Seen] = deque(maxlen=_REMEMBERED)

    def nativeEventFilter(
        self, eventType: QByteArray | bytes | bytearray | memoryview, message: int
    ) -> object:
        kind = eventType.data() if isinstance(eventType, QByteArray) else bytes(eventType)
        if kind == b"xcb_generic_event_t":
            try:
                self._look(int(message))
            except Exception:  # never break Qt's event loop; an unseen event is "unknown"
                log.exception("reading an X event's source device failed")
        return False, 0

    def _look(self, address: int) -> None:
        raw = ctypes.c_uint8.from_address(address).value
        kind = raw & 0x7F
        if kind in (XCB_BUTTON_PRESS, XCB_BUTTON_RELEASE):
            # A core button event names no device (and may come from SendEvent).
            time = ctypes.c_uint32.from_address(address + 4).value
            phase = Phase.PRESS if kind == XCB_BUTTON_PRESS else Phase.RELEASE
            self._seen.append(_Seen(time, phase, Verdict.UNKNOWN, "core event"))
            return
        if kind != XCB_GE_GENERIC:
            return
        if ctypes.c_uint8.from_address(address + 1).value != self._devices.opcode:
            return
        evtype = ctypes.c_uint16.from_address(address + 8).value
        if evtype not in _PRESSES and evtype not in _RELEASES:
            return
        # xcb_input_button_press_event_t (same layout for touch): time at 12,
        # sourceid at 56 (xcb adds full_sequence at 32).
        time = ctypes.c_uint32.from_address(address + 12).value
        source = ctypes.c_uint16.from_address(address + 56).value
        name = self._devices.names().get(source)
        if raw & 0x80 or name is None:
            verdict = Verdict.UNKNOWN
        elif is_synthetic_device(name):
            verdict = Verdict.SYNTHETIC
        else:
            verdict = Verdict.REAL
        phase = Phase.PRESS if evtype in _PRESSES else Phase.RELEASE
        self._seen.append(_Seen(time, phase, verdict, name or f"device {source}"))

    def verdict(self, timestamp: int, phase: Phase) -> Verdict:
        """The verdict for the Qt event with ``timestamp`` (ms, X server time)."""
        matches = [s for s in self._seen if s.time == timestamp and s.phase is phase]
        if not matches:
            return Verdict.UNKNOWN
        if any(s.verdict is Verdict.SYNTHETIC for s in matches):
            return Verdict.SYNTHETIC
        if any(s.verdict is Verdict.UNKNOWN for s in matches):
            return Verdict.UNKNOWN
        return Verdict.REAL

    def feed(self, event: bytes) -> None:
        """Look at one raw xcb event (for tests that build events by hand)."""
        buffer = ctypes.create_string_buffer(event, max(len(event), 64))
        self._look(ctypes.addressof(buffer))
