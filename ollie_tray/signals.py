"""Unix signals (SIGTERM, SIGINT, SIGHUP) delivered into the Qt event loop.

Python runs signal handlers only between bytecodes, which never happens
while Qt sits in its C++ event loop; a wakeup fd watched by a
``QSocketNotifier`` makes the loop notice at once.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable

from PySide6.QtCore import QObject, QSocketNotifier


class SignalBridge(QObject):
    def __init__(self, handler: Callable[[int], None], signals: tuple[int, ...]) -> None:
        super().__init__()
        self._handler = handler
        self._rsock, self._wsock = socket.socketpair()
        self._rsock.setblocking(False)
        self._wsock.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._wsock.fileno())
        self._signals = signals
        self._previous = {sig: signal.signal(sig, lambda *_: None) for sig in signals}
        self._notifier = QSocketNotifier(self._rsock.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._readable)

    def _readable(self) -> None:
        try:
            data = self._rsock.recv(64)
        except BlockingIOError:
            return
        for byte in data:
            if byte in self._signals:
                self._handler(byte)

    def close(self) -> None:
        self._notifier.setEnabled(False)
        signal.set_wakeup_fd(self._previous_fd)
        for sig, previous in self._previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(sig, previous)
        self._rsock.close()
        self._wsock.close()
