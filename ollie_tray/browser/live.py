"""Live registry updates for the Tool Browser: inotify → debounce → ``loader.refresh``.

Threading/ordering: everything runs on the Qt GUI thread.  The inotify fd of
a :class:`~registry_core.registry.watch.DirectoryWatcher` sits in a
``QSocketNotifier``; each wake-up drains the fd (never blocks) into a set of
changed paths and (re)starts a single-shot timer, so a burst of events (an
editor's save dance, ``cp -r``, ``git checkout``) becomes one
``loader.refresh(changed)`` about 100 ms after the last event.

:func:`plan_row_update` turns the refreshed list of rows into the fewest
model signals (removals, insertions, else a reset), so the list keeps its
selection and scroll position through a refresh.

A tools directory that does not exist yet (e.g. ``~/.config/ollie/tools``
before the first tool is installed) is watched through its nearest existing
ancestor; when it appears it is watched itself and scanned.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from registry_core.registry import Registry, RegistryLoader
from registry_core.registry.watch import DirectoryWatcher

_log = logging.getLogger(__name__)
DEBOUNCE_MS = 100
# Above this many inserted + removed rows a reset is cheaper than row signals.
RESET_THRESHOLD = 200


def ranges(rows: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous (first, last) runs of ascending row numbers."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


@dataclass(frozen=True)
class RowUpdate:
    """Remove ``removed`` (old numbering, last range first), then insert ``added``
    (new numbering, first range first); or, when ``reset``, start over."""

    reset: bool = False
    removed: list[tuple[int, int]] = field(default_factory=list)
    added: list[tuple[int, int]] = field(default_factory=list)


def plan_row_update(old: Sequence[Hashable], new: Sequence[Hashable]) -> RowUpdate:
    """How to turn the row keys ``old`` into ``new`` with row signals.

    Rows present in both must keep their relative order (else: reset), and
    a large change is a reset too.
    """
    if list(old) == list(new):
        return RowUpdate()
    new_set, old_set = set(new), set(old)
    removed = [i for i, k in enumerate(old) if k not in new_set]
    added = [j for j, k in enumerate(new) if k not in old_set]
    same_order = [k for k in old if k in new_set] == [k for k in new if k in old_set]
    if not old or not same_order or len(removed) + len(added) > RESET_THRESHOLD:
        return RowUpdate(reset=True)
    return RowUpdate(removed=ranges(removed), added=ranges(added))


def _nearest_existing(path: Path) -> Path | None:
    for candidate in path.parents:
        if candidate.is_dir():
            return candidate
    return None


class LiveRegistry(QObject):
    """Keeps ``loader.current`` up to date; emits :attr:`refreshed` after each refresh."""

    #: (new Registry, frozenset of the changed paths that were refreshed)
    refreshed = Signal(object, object)

    def __init__(
        self, loader: RegistryLoader, debounce_ms: int = DEBOUNCE_MS, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.loader = loader
        self.error = ""
        self._pending: set[Path] = set()
        self._waiting: list[Path] = []  # tools directories that do not exist yet
        self._ancestors: set[Path] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._timer.timeout.connect(self._flush)
        self._watcher: DirectoryWatcher | None = None
        self._notifier: QSocketNotifier | None = None
        try:
            self._watcher = DirectoryWatcher(())
        except OSError as exc:
            self.error = f"live updates are off: {exc}"
            _log.warning("%s", self.error)
            return
        for directory in loader.dirs:
            if not self._watcher.add(directory):
                self._waiting.append(directory)
        self._watch_ancestors()
        self._notifier = QSocketNotifier(self._watcher.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._readable)

    @property
    def active(self) -> bool:
        return self._watcher is not None

    @property
    def waiting_for(self) -> tuple[Path, ...]:
        """Tools directories that do not exist (yet)."""
        return tuple(self._waiting)

    def _watch_ancestors(self) -> None:
        if self._watcher is None:
            return
        for directory in self._waiting:
            ancestor = _nearest_existing(directory)
            fresh = ancestor is not None and ancestor not in self._ancestors
            if fresh and ancestor is not None and self._watcher.add(ancestor):
                self._ancestors.add(ancestor)

    def _readable(self) -> None:
        if self._watcher is None:
            return
        try:
            changes = self._watcher.changes()
        except OSError as exc:
            _log.warning("reading inotify events failed: %s", exc)
            return
        dirs = set(self.loader.dirs)
        relevant = {p for p in changes if p in dirs or p.parent in dirs}
        if self._waiting and changes - relevant:
            relevant |= self._adopt_new_dirs()
        if relevant:
            self._pending |= relevant
            self._timer.start()

    def _adopt_new_dirs(self) -> set[Path]:
        """Watch tools directories that appeared; they need a scan."""
        assert self._watcher is not None
        appeared = {d for d in self._waiting if os.path.isdir(d) and self._watcher.add(d)}
        self._waiting = [d for d in self._waiting if d not in appeared]
        self._watch_ancestors()
        return appeared

    def _flush(self) -> None:
        changed, self._pending = frozenset(self._pending), set()
        if not changed:
            return
        registry = self.loader.refresh(changed)
        self.refreshed.emit(registry, changed)

    def flush_now(self) -> Registry:
        """Apply pending changes at once (used by tests and before a manual reload)."""
        self._readable()
        self._timer.stop()
        self._flush()
        return self.loader.current

    def close(self) -> None:
        self._timer.stop()
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
