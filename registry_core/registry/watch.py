"""Tell which files changed in the tools directories (Linux inotify through ctypes).

The tray and the headless broker feed the changed paths to
:meth:`RegistryLoader.refresh`, so an edit re-reads one file, not all of them.
The watcher is an fd to put in an event loop (``loop.add_reader``); reading
never blocks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from collections.abc import Iterable
from pathlib import Path

_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")


class DirectoryWatcher:
    """inotify on a set of directories; :meth:`changes` returns what changed since last read.

    A whole directory is reported (the directory path itself) when the queue
    overflowed or the directory was removed/moved: the caller then rescans it.
    """

    def __init__(self, directories: Iterable[Path]) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd: int | None = fd
        self._dirs: dict[int, Path] = {}
        self.missing: list[Path] = []
        for directory in directories:
            self.add(Path(directory))

    def add(self, directory: Path) -> bool:
        if self._fd is None:
            return False
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
        if wd < 0:
            self.missing.append(directory)
            return False
        self._dirs[wd] = directory
        return True

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("watcher is closed")
        return self._fd

    def changes(self) -> set[Path]:
        """Paths changed since the last call (files, or a whole directory to rescan)."""
        changed: set[Path] = set()
        if self._fd is None:
            return changed
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
                offset += _EVENT.size + length
                name = raw.rstrip(b"\0").decode("utf-8", "surrogateescape")
                directory = self._dirs.get(wd)
                if mask & IN_Q_OVERFLOW:
                    changed.update(self._dirs.values())
                elif directory is None:
                    continue
                elif mask & (IN_DELETE_SELF | IN_MOVE_SELF) or not name:
                    changed.add(directory)
                else:
                    changed.add(directory / name)
        return changed

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
