"""A registry snapshot kept current by file-system events: the brokers' registry.

Both brokers, the headless ``ollie-broker`` and the tray's, ask for the
registry on every request through :meth:`LiveRegistry.current`.  Instead of rescanning every tools
directory each time, it loads once and then feeds what inotify reports
(:mod:`registry_core.registry.watch`) to :meth:`RegistryLoader.refresh`: a
request costs one non-blocking read of the inotify descriptor, an edit
re-reads only the files it touched, and an edit made before a request is
always seen by it.  The tray also calls :meth:`~LiveRegistry.current` when
the descriptor becomes readable (:meth:`~LiveRegistry.fileno`), so its
windows see changes without a request.  The snapshot is the loader's own
(``loader.current``): a full ``loader.load()`` by anyone (the tray's
periodic rescan, the Tool Browser's reload) is what the next request gets.

A tools directory that does not exist at start (or is removed later) cannot be
watched; each :meth:`LiveRegistry.current` checks (one ``stat`` each) whether
it has appeared, then watches and scans it.  Without inotify at all, every
:meth:`~LiveRegistry.current` rescans, as before: slower, never stale.

Thread-safe.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from registry_core.registry.loader import RegistryLoader
from registry_core.registry.snapshot import Registry
from registry_core.registry.watch import DirectoryWatcher

_log = logging.getLogger(__name__)


class LiveRegistry:
    """``loader``'s snapshot, refreshed from the changes inotify reports."""

    def __init__(self, loader: RegistryLoader) -> None:
        self.loader = loader
        self._lock = threading.Lock()
        self._watcher: DirectoryWatcher | None = None
        self._unwatched: list[Path] = []
        try:
            self._watcher = DirectoryWatcher(loader.dirs)
            self._unwatched = list(self._watcher.missing)
        except OSError as exc:
            _log.warning("not watching the tools directories (rescanning per request): %s", exc)
        loader.load()

    @property
    def watching(self) -> bool:
        return self._watcher is not None

    def fileno(self) -> int | None:
        """The inotify descriptor, readable when something changed (``None``: not watching)."""
        return None if self._watcher is None else self._watcher.fileno()

    def current(self) -> Registry:
        """The snapshot with every change seen so far applied."""
        with self._lock:
            watcher = self._watcher
            if watcher is None:
                return self.loader.load()
            changed = watcher.changes()
            for directory in list(self._unwatched):
                if os.path.isdir(directory) and watcher.add(directory):
                    self._unwatched.remove(directory)
                    changed.add(directory)
            if changed:
                for directory in self.loader.dirs:
                    # Removed, moved or overflowed: watch the path again (a new
                    # directory there gets a new watch; an existing one keeps its own).
                    again = directory in changed and directory not in self._unwatched
                    if again and not watcher.add(directory):
                        watcher.missing.remove(directory)
                        self._unwatched.append(directory)
                return self.loader.refresh(changed)
            return self.loader.current

    def close(self) -> None:
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()
