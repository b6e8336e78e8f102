"""Discover ``.meta`` files on ``$OLLIE_TOOLS_PATH`` and build registry snapshots.

:class:`RegistryLoader` keeps a parse cache keyed by each file's stat
identity (device, inode, size, mtime, ctime): a full
:meth:`~RegistryLoader.load` re-reads only files whose key changed.  When a
file watcher says exactly what changed, :meth:`~RegistryLoader.refresh`
re-examines only those names and shares every other :class:`Tool` with the
previous snapshot.

Given a cache directory (the product's entry points pass the user's), a
loader also remembers across processes what it learnt from each file, so a
new process rebuilds an unchanged file's tool without reading it and reads
its prompt and args only on demand (see scan_cache.py).

Not thread-safe: one loader per owner; the snapshots it returns may be read
from any thread.
"""

from __future__ import annotations

import gc
import os
import stat
import time
import zlib
from collections.abc import Callable, Container, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from registry_core import paths
from registry_core.errors import MetaError
from registry_core.registry.evaluate import evaluate
from registry_core.registry.fileread import read_careful, read_fast, stat_key
from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.meta import (
    ParsedMeta,
    meta_from_skeleton,
    parse_meta,
    parsed_from_problems,
    problems_of,
    skeleton_of,
)
from registry_core.registry.model import Status, Tool
from registry_core.registry.scan_cache import (
    CachedContent,
    Entries,
    FileKey,
    ScanCache,
    cache_file,
)
from registry_core.registry.snapshot import Registry

_Key = FileKey  # (device, inode, size, mtime_ns, ctime_ns)


class _Entry(NamedTuple):
    """A parse-cache entry (a tuple: immutable and ten thousand of them are cheap)."""

    key: _Key | None
    parsed: ParsedMeta
    # CRC-32 of the content when the scan cache may keep what it says about it:
    # flawless files and files broken by their content (not by a read error).
    crc: int | None = None


class RegistryLoader:
    """Builds :class:`Registry` snapshots for a list of tools directories.

    ``dirs`` defaults to ``$OLLIE_TOOLS_PATH`` from ``env``; ``facts_factory``
    describes the host for each scan (a simulated one for "What if");
    ``cache_dir`` is where the scan cache lives (``paths.scan_cache_dir``),
    ``None`` for none.
    """

    def __init__(
        self,
        dirs: Iterable[Path] | None = None,
        env: Mapping[str, str] | None = None,
        facts_factory: Callable[[], HostFacts] | None = None,
        cache_dir: Path | str | None = None,
    ) -> None:
        environ = dict(os.environ) if env is None else dict(env)
        chosen = dirs if dirs is not None else paths.tools_path(environ)
        # Absolute, so executables stay valid whatever the caller's cwd becomes.
        self.dirs = tuple(Path(os.path.abspath(d)) for d in chosen)
        self._facts_factory = facts_factory or (lambda: HostFacts(env=environ))
        self._cache: dict[str, _Entry] = {}  # by path string: no Path built to look up
        self._facts: HostFacts | None = None
        self._current = Registry(dirs=self.dirs)
        file = cache_file(Path(cache_dir), self.dirs) if cache_dir is not None else None
        self._scan_cache = ScanCache(file)

    @property
    def current(self) -> Registry:
        return self._current

    @property
    def facts(self) -> HostFacts:
        if self._facts is None:
            self._facts = self._facts_factory()
        return self._facts

    def _parsed(self, path: str, regular: bool) -> _Entry | None:
        """Parse ``path`` unless a cache already knows it unchanged; None if gone.

        ``regular``: the directory listing says this is a regular file (not a symlink).
        """
        cached = self._cache.get(path)
        if cached is not None and cached.key is not None and stat_key(path) == cached.key:
            return cached
        scan_cache = self._scan_cache
        if regular and cached is None and scan_cache.enabled:
            entry = self._from_scan_cache(path)
            if entry is not None:
                return entry
        fast = read_fast(path) if regular else None
        if fast is not None:
            key: _Key | None = fast[0]
            early: ParsedMeta | None = None
            data: bytes | None = fast[1]
        else:
            key, early, data = read_careful(path)
            if key is None and early is None:
                self._cache.pop(path, None)
                return None
        if cached is not None and key is not None and cached.key == key:
            return cached
        crc = None
        if early is not None:
            parsed = early
        else:
            body = data or b""
            parsed = parse_meta(path, body)
            if key is not None and scan_cache.enabled and (parsed.fast or parsed.meta is None):
                crc = zlib.crc32(body)
                scan_cache.learnt(key)
        entry = _Entry(key, parsed, crc)
        self._cache[path] = entry
        return entry

    def _from_scan_cache(self, path: str) -> _Entry | None:
        """The entry of an unchanged file the scan cache knows, without reading it."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        hit = self._scan_cache.lookup(path, key)
        if hit is None:
            return None
        crc, known = hit
        if type(known) is dict:  # a version broken by its content
            parsed = parsed_from_problems(path, known)
        else:
            name = path[path.rfind("/") + 1 : -5]
            meta = meta_from_skeleton(path, name, known, CachedContent(path, key, crc))
            parsed = None if meta is None else ParsedMeta(meta, (), (), fast=True)
        if parsed is None:
            return None
        entry = _Entry(key, parsed, crc)
        self._cache[path] = entry
        return entry

    def _build(
        self,
        name: str,
        sources: list[str],
        regular: Container[str] = (),
        listings: Mapping[str, Mapping[str, os.DirEntry[str]]] | None = None,
    ) -> Tool | None:
        """The Tool for ``name`` from its ``.meta`` files in search order.

        ``regular`` and ``listings`` come from a directory scan just made: which
        paths are plain files, and the names in each directory.  Whatever goes
        wrong with one tool's files makes that one tool broken: no exception
        from one file escapes the loader.
        """
        try:
            return self._build_tool(name, sources, regular, listings)
        except Exception as exc:  # one hostile file must not take the registry down
            self._cache.pop(sources[0], None)
            message = f"cannot be loaded: {type(exc).__name__}: {exc}"
            return Tool(
                name=name,
                source_file=sources[0],
                status=Status.BROKEN,
                errors=(MetaError(sources[0], message),),
                shadowed_files=tuple(sources[1:]),
            )

    def _build_tool(
        self,
        name: str,
        sources: list[str],
        regular: Container[str],
        listings: Mapping[str, Mapping[str, os.DirEntry[str]]] | None,
    ) -> Tool | None:
        for index, path in enumerate(sources):
            entry = self._parsed(path, path in regular)
            if entry is None:
                continue
            shadowed = tuple(sources[index + 1 :])
            parsed = entry.parsed
            if parsed.meta is None:
                return Tool(
                    name=name,
                    source_file=path,
                    status=Status.BROKEN,
                    errors=parsed.errors,
                    warnings=parsed.warnings,
                    shadowed_files=shadowed,
                )
            listing = listings.get(path.rpartition("/")[0]) if listings is not None else None
            return evaluate(parsed.meta, self.facts, shadowed, listing)
        return None

    def _scan_dirs(
        self,
    ) -> tuple[dict[str, list[str]], set[str], dict[str, dict[str, os.DirEntry[str]]]]:
        """Every ``.meta`` by tool name (search order), the plain files among them, and
        the names in each directory (for co-located executables)."""
        found: dict[str, list[str]] = {}
        regular: set[str] = set()
        listings: dict[str, dict[str, os.DirEntry[str]]] = {}
        for directory in self.dirs:
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError:
                continue
            listing = listings[str(directory)] = {e.name: e for e in entries}
            for file in sorted([n for n in listing if n.endswith(".meta")]):
                entry = listing[file]
                path = entry.path
                sources = found.get(file[:-5])
                if sources is None:
                    found[file[:-5]] = [path]
                else:
                    sources.append(path)
                try:
                    if entry.is_file(follow_symlinks=False):
                        regular.add(path)
                except OSError:
                    pass
        return found, regular, listings

    def load(self) -> Registry:
        """Full scan: every directory listed, every file stat'ed, changed files parsed."""
        # A load allocates many small objects that all live on; the cyclic collector
        # would only rescan them (~18% of a 10,000-tool load). It is resumed after,
        # unless somebody else had paused it.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._load()
        finally:
            if collecting:
                gc.enable()

    def _load(self) -> Registry:
        self._facts = self._facts_factory()
        found, regular, listings = self._scan_dirs()
        tools: dict[str, Tool] = {}
        for name, sources in found.items():
            tool = self._build(name, sources, regular, listings)
            if tool is not None:
                tools[name] = tool
        live = {p for sources in found.values() for p in sources}
        for stale in [p for p in self._cache if p not in live]:
            del self._cache[stale]
        self._current = Registry(tools, self.dirs, self.facts.describe())
        if self._scan_cache.pending:
            self._scan_cache.save(self._cache_entries(list(self._cache)), full_scan=True)
        return self._current

    def _cache_entries(self, paths: Iterable[str]) -> Entries:
        """What the scan cache should keep of these files' parse-cache entries."""
        now = time.time_ns()
        settled = ScanCache.settled
        out: Entries = {}
        for path in paths:
            e = self._cache.get(path)
            if e is None or e.crc is None or e.key is None or not settled(e.key, now):
                continue
            meta = e.parsed.meta
            known = problems_of(e.parsed) if meta is None else skeleton_of(meta)
            out[path] = [*e.key, e.crc, known]
        return out

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
                directory = str(path)
                names |= {
                    t.name
                    for t in self._current.tools.values()
                    if os.path.dirname(t.source_file) == directory
                }
            elif path.parent in self.dirs:
                names.add(path.name.removesuffix(".meta"))
                # A helper executable named by some tool's cmd changed.
                file = str(path)
                names |= {t.name for t in self._current.tools.values() if t.executable_file == file}
        # Conditions are answered afresh for what is re-examined (the files a
        # condition names may have changed too); $PATH stays indexed per scan.
        self.facts.condition_memo.clear()
        changes: dict[str, Tool | None] = {}
        touched: list[str] = []
        for name in names:
            sources = [os.path.join(d, f"{name}.meta") for d in self.dirs]
            touched += sources
            present = [p for p in sources if os.path.lexists(p)]
            changes[name] = self._build(name, present) if present else None
            for gone in set(sources) - set(present):
                self._cache.pop(gone, None)
        self._current = self._current.with_changes(changes)
        if self._scan_cache.pending:
            self._scan_cache.save(self._cache_entries(touched), full_scan=False)
        return self._current

    def lookup(self, name: str) -> Tool | None:
        """The tool ``name`` as :meth:`load` would build it, reading only its own files.

        Each tools directory is asked for ``<dir>/<name>.meta`` in search order
        (the first one found wins, the others are shadowed), so the cost does
        not depend on how many tools are installed.  ``None`` when no directory
        has such a file.  The scan cache is neither read nor written (one file
        is cheaper to read than the cache); the parse cache is used as by
        :meth:`load`.  :attr:`current` is not changed.
        """
        if "/" in name or "\0" in name:
            return None  # no directory entry can be called that
        file = f"{name}.meta"
        sources: list[str] = []
        regular: set[str] = set()
        for directory in self.dirs:
            path = os.path.join(directory, file)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            # A full scan lists each directory: one it may not list shows it no tools.
            if not os.access(directory, os.R_OK):
                continue
            sources.append(path)
            if stat.S_ISREG(st.st_mode):
                regular.add(path)
        if not sources:
            return None
        return self._build(name, sources, regular)

    def lookup_registry(self, name: str) -> Registry:
        """A snapshot holding only ``name`` (empty if there is none): what a caller
        that runs or shows one tool needs, with the same errors as a full one."""
        tool = self.lookup(name)
        tools = {name: tool} if tool is not None else {}
        return Registry(tools, self.dirs, self.facts.describe())


def load_registry(
    dirs: Iterable[Path] | None = None, env: Mapping[str, str] | None = None
) -> Registry:
    """One-shot convenience: scan and return a snapshot."""
    return RegistryLoader(dirs, env).load()
