"""A registry snapshot kept current by file-system events, for long-running readers.

The headless ``ollie-broker`` asks for the registry on every request.  Instead
of rescanning every tools directory each time, :class:`LiveRegistry` loads once
and then feeds what inotify reports (:mod:`registry_core.registry.watch`) to
:meth:`RegistryLoader.refresh`, the code the tray and the MCP server use: a
request costs one non-blocking read of the inotify descriptor, and an edit
re-reads only the files it touched.

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
        self._registry = loader.load()

    @property
    def watching(self) -> bool:
        return self._watcher is not None

    def current(self) -> Registry:
        """The snapshot with every change seen so far applied."""
        with self._lock:
            watcher = self._watcher
            if watcher is None:
                self._registry = self.loader.load()
                return self._registry
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
                self._registry = self.loader.refresh(changed)
            return self._registry

    def close(self) -> None:
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()
