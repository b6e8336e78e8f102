"""Discover ``.meta`` files on ``$OLLIE_TOOLS_PATH`` and build registry snapshots.

:class:`RegistryLoader` keeps a parse cache keyed by each file's
(mtime, size, inode, ctime): a full :meth:`~RegistryLoader.load` re-reads only
files whose key changed.  When a file watcher says exactly what changed,
:meth:`~RegistryLoader.refresh` re-examines only those names and shares every
other :class:`Tool` with the previous snapshot.

Not thread-safe: one loader per owner; the snapshots it returns may be read
from any thread.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from registry_core import paths
from registry_core.errors import MetaError
from registry_core.registry.evaluate import evaluate
from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.meta import MAX_META_BYTES, ParsedMeta, parse_meta
from registry_core.registry.model import Status, Tool
from registry_core.registry.snapshot import Registry

_Key = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class _Entry:
    key: _Key | None
    parsed: ParsedMeta


def _broken(path: Path, message: str) -> ParsedMeta:
    return ParsedMeta(None, (MetaError(str(path), message),), ())


def _read(path: Path) -> tuple[_Key | None, ParsedMeta | None, bytes | None]:
    """Stat and (when needed) read one file; errors become a broken ParsedMeta."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            return None, _broken(path, f"dangling symlink to {target}"), None
        return None, None, None
    except OSError as exc:
        return None, _broken(path, f"cannot stat: {exc.strerror}"), None
    key = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    if not stat.S_ISREG(st.st_mode):
        return key, _broken(path, "not a regular file"), None
    if st.st_size > MAX_META_BYTES:
        return key, _broken(path, f"file is {st.st_size} bytes, over the 1 MiB limit"), None
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_META_BYTES + 1)
    except OSError as exc:
        reason = "permission denied" if exc.errno == errno.EACCES else exc.strerror
        return key, _broken(path, f"cannot read: {reason}"), None
    return key, None, data


class RegistryLoader:
    """Builds :class:`Registry` snapshots for a list of tools directories."""

    def __init__(
        self,
        dirs: Iterable[Path] | None = None,
        env: Mapping[str, str] | None = None,
        facts_factory: Callable[[], HostFacts] | None = None,
    ) -> None:
        environ = dict(os.environ) if env is None else dict(env)
        chosen = dirs if dirs is not None else paths.tools_path(environ)
        # Absolute, so executables stay valid whatever the caller's cwd becomes.
        self.dirs = tuple(Path(os.path.abspath(d)) for d in chosen)
        self._facts_factory = facts_factory or (lambda: HostFacts(env=environ))
        self._cache: dict[Path, _Entry] = {}
        self._facts: HostFacts | None = None
        self._current = Registry(dirs=self.dirs)

    @property
    def current(self) -> Registry:
        return self._current

    @property
    def facts(self) -> HostFacts:
        if self._facts is None:
            self._facts = self._facts_factory()
        return self._facts

    def _parsed(self, path: Path) -> ParsedMeta | None:
        """Parse ``path`` unless the cache already holds it unchanged; None if gone."""
        key, early, data = _read(path)
        if key is None and early is None:
            self._cache.pop(path, None)
            return None
        cached = self._cache.get(path)
        if key is not None and cached is not None and cached.key == key:
            return cached.parsed
        parsed = early if early is not None else parse_meta(path, data or b"")
        self._cache[path] = _Entry(key, parsed)
        return parsed

    def _build(self, name: str, sources: list[Path]) -> Tool | None:
        """The Tool for ``name`` from its ``.meta`` files in search order."""
        winner: Tool | None = None
        for index, path in enumerate(sources):
            parsed = self._parsed(path)
            if parsed is None:
                continue
            shadowed = tuple(sources[index + 1 :])
            if parsed.meta is None:
                winner = Tool(
                    name=name,
                    source=path,
                    status=Status.BROKEN,
                    errors=parsed.errors,
                    warnings=parsed.warnings,
                    shadowed=shadowed,
                )
            else:
                winner = evaluate(parsed.meta, self.facts, shadowed)
            break
        return winner

    def _scan_dirs(self) -> dict[str, list[Path]]:
        found: dict[str, list[Path]] = {}
        for directory in self.dirs:
            try:
                names = sorted(e.name for e in os.scandir(directory) if e.name.endswith(".meta"))
            except OSError:
                continue
            for filename in names:
                found.setdefault(filename[: -len(".meta")], []).append(directory / filename)
        return found

    def load(self) -> Registry:
        """Full scan: every directory listed, every file stat'ed, changed files parsed."""
        self._facts = self._facts_factory()
        found = self._scan_dirs()
        tools: dict[str, Tool] = {}
        for name, sources in found.items():
            tool = self._build(name, sources)
            if tool is not None:
                tools[name] = tool
        live = {p for sources in found.values() for p in sources}
        for stale in [p for p in self._cache if p not in live]:
            del self._cache[stale]
        self._current = Registry(tools, self.dirs, self.facts.describe())
        return self._current

    def refresh(self, changed: Iterable[Path]) -> Registry:
        """Re-examine only what ``changed`` names (files or whole tools directories)."""
        names: set[str] = set()
        for item in changed:
            path = Path(os.path.abspath(item))
            if path in self.dirs:
                try:
                    listed = {e.name[:-5] for e in os.scandir(path) if e.name.endswith(".meta")}
                except OSError:
                    listed = set()
                names |= listed
                names |= {t.name for t in self._current.tools.values() if t.directory == path}
            elif path.parent in self.dirs:
                names.add(path.name.removesuffix(".meta"))
        changes: dict[str, Tool | None] = {}
        for name in names:
            sources = [d / f"{name}.meta" for d in self.dirs]
            present = [p for p in sources if os.path.lexists(p)]
            changes[name] = self._build(name, present) if present else None
            for gone in set(sources) - set(present):
                self._cache.pop(gone, None)
        self._current = self._current.with_changes(changes)
        return self._current


def load_registry(
    dirs: Iterable[Path] | None = None, env: Mapping[str, str] | None = None
) -> Registry:
    """One-shot convenience: scan and return a snapshot."""
    return RegistryLoader(dirs, env).load()
