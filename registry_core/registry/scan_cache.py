"""Remember, across processes, what a scan learnt from each unchanged ``.meta``.

Every ``ollie-tools`` call, the broker and the tray load the whole registry,
and tools rarely change.  After a scan, a loader given a cache directory keeps
there, with a CRC-32 of its content, the *skeleton* of each flawless file
version (everything but the prompt and the args schema, see
``meta.skeleton_of``) and the errors of each version broken by its content
(``meta.problems_of``).  The next loader ``lstat``s every file; for a version
it finds in the cache it checks the skeleton instead of reading, decoding and
validating the file, and the tool's prompt and args are read only when
somebody asks for them (``model.ToolDocs``, :class:`CachedContent`).  The one
thing taken on trust is the proof, made when the version was first read,
that its ``args`` are valid JSON Schemas.

A file version is named by its stat identity (device, inode, size, mtime,
ctime).  Any write changes the ctime, which unprivileged processes cannot set,
and a version is recorded only once its ctime is :data:`SETTLE_NS` old, so a
second write in the same clock tick cannot pass for the first (git's "racily
clean" rule).  When the docs are read, the CRC-32 of the content must match
too; a file that changed after the scan raises ``ToolChangedError`` rather
than mixing two versions in one tool.

There is one cache file per tools path (the list of directories), holding
what the last full scan of that path met.  A file is trusted only if it is a
regular file owned by this user and writable by nobody else, and names this
format and the fingerprint of the rules it was made with (changing the
parser, the schema rules or the model, or Python, forgets the cache).  Anything else is
ignored and replaced at the next save.  Losing the cache only costs time.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from registry_core.errors import ToolChangedError
from registry_core.safe_open import read_own_cache

# (device, inode, size, mtime_ns, ctime_ns) of one file version.
FileKey = tuple[int, int, int, int, int]

FORMAT = "ollie-scan-cache"
VERSION = 1
SETTLE_NS = 2_000_000_000
MAX_BYTES = 64 * 1024 * 1024
MAX_FILES = 16  # cache files kept per user (one per tools path), oldest removed

_FINGERPRINT: list[str | None] = []


def rules_fingerprint() -> str | None:
    """sha256 of what decides a cached answer; ``None`` (no cache) if unreadable.

    That is the source of the modules that parse, check and model a ``.meta``
    and locate its problems, and the Python version (whose ``json`` words the
    syntax errors).
    """
    if not _FINGERPRINT:
        import hashlib  # here: a one-name lookup (ollie-tools call) needs no cache

        from registry_core.registry import jsonpos, meta, model, schema

        digest = hashlib.sha256(f"{FORMAT} {VERSION} {sys.version}\n".encode())
        try:
            for module in (meta, schema, model, jsonpos):
                digest.update(Path(module.__file__ or "").read_bytes())
        except OSError:
            _FINGERPRINT.append(None)
        else:
            _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def cache_file(directory: Path, dirs: Iterable[Path]) -> Path:
    """The cache file of the tools path ``dirs`` inside ``directory``."""
    import hashlib

    name = hashlib.sha256("\0".join(str(d) for d in dirs).encode()).hexdigest()[:32]
    return directory / f"{name}.json"


def _entries(file: Path, fingerprint: str) -> Entries:
    """The entries of a trustworthy cache file made with these rules, else {}."""
    data = read_own_cache(file, limit=MAX_BYTES)
    if data is None:
        return {}
    try:
        doc = json.loads(data)
        if (
            doc.get("format") != FORMAT
            or doc.get("version") != VERSION
            or doc.get("rules") != fingerprint
        ):
            return {}
        entries = doc["entries"]
    except (ValueError, AttributeError, KeyError):
        return {}
    # Each entry's shape is checked when it is used (lookup): most never are.
    return entries if isinstance(entries, dict) else {}


def _write_atomically(file: Path, data: bytes) -> None:
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:  # left by a process of this pid that died while writing
        tmp.unlink()
        fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _prune(directory: Path, keep: int) -> None:
    """Remove all but the ``keep`` most recently written cache files."""
    try:
        files = [e for e in os.scandir(directory) if e.name.endswith(".json") and e.is_file()]
        files.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
        for old in files[keep:]:
            os.unlink(old.path)
    except OSError:
        pass


class CachedContent(NamedTuple):
    """The content of a cached ``.meta`` version, read when a tool's docs are wanted.

    Raises :class:`ToolChangedError` unless the file still is that version: same
    stat identity and the same CRC-32 of its bytes.
    """

    path: str
    key: FileKey
    crc: int

    def content(self) -> bytes:
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            raise ToolChangedError(self.path, f"became unreadable ({exc.strerror})") from exc
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key != self.key:
                raise ToolChangedError(self.path, "changed")
            parts = []
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
        except OSError as exc:
            raise ToolChangedError(self.path, f"became unreadable ({exc.strerror})") from exc
        finally:
            os.close(fd)
        data = b"".join(parts)
        if zlib.crc32(data) != self.crc:
            raise ToolChangedError(self.path, "changed")
        return data


# path → [device, inode, size, mtime_ns, ctime_ns, CRC-32 of the content, skeleton]
Entries = dict[str, list[Any]]


class ScanCache:
    """The skeletons of flawless ``.meta`` versions met by scans of one tools path.

    The loader asks :meth:`lookup` about each file it meets, tells :meth:`learnt`
    about each flawless version it had to read in full, and after a scan hands
    :meth:`save` the entries to keep (it alone knows which files the scan met).
    """

    def __init__(self, file: Path | None) -> None:
        self.file = file
        self._rules = rules_fingerprint() if file is not None else None
        self._loaded: Entries | None = None  # read on first use (inside a paused-gc scan)
        self._new = 0

    @property
    def _entries(self) -> Entries:
        if self._loaded is None:
            file, rules = self.file, self._rules
            self._loaded = _entries(file, rules) if file is not None and rules is not None else {}
        return self._loaded

    @property
    def enabled(self) -> bool:
        return self._rules is not None

    def lookup(self, path: str, key: FileKey) -> tuple[int, Any] | None:
        """(content CRC, skeleton) if the cache knows ``path`` as the version ``key``."""
        entry = self._entries.get(path)
        if entry is None:
            return None
        try:
            # Cheapest first: most misses differ in mtime/ctime.
            if (
                entry[4] != key[4]
                or entry[3] != key[3]
                or entry[2] != key[2]
                or entry[1] != key[1]
                or entry[0] != key[0]
            ):
                return None
            crc = entry[5]
            return (crc, entry[6]) if type(crc) is int else None
        except (TypeError, IndexError, KeyError):
            return None

    @staticmethod
    def settled(key: FileKey, now_ns: int) -> bool:
        """Whether a version is old enough to be remembered (see the module doc)."""
        return key[4] <= now_ns - SETTLE_NS

    def learnt(self, key: FileKey, now_ns: int | None = None) -> None:
        """A flawless version was read in full: worth saving once it has settled."""
        now = time.time_ns() if now_ns is None else now_ns
        if self.enabled and self.settled(key, now):
            self._new += 1

    @property
    def pending(self) -> int:
        """Settled versions learnt since the last save."""
        return self._new

    def save(self, entries: Entries, full_scan: bool) -> bool:
        """Write the cache if something new was learnt; True if written.

        After a ``full_scan`` the file holds exactly ``entries`` (what that scan
        met); after a partial one (a refresh) they are added to what it held.  A
        failure to write is not an error: this is a cache.
        """
        if self.file is None or self._rules is None or not self._new:
            return False
        if not full_scan:
            entries = {**_entries(self.file, self._rules), **entries}
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "rules": self._rules,
            "entries": entries,
        }
        data = json.dumps(doc, separators=(",", ":")).encode()
        if len(data) > MAX_BYTES:
            return False
        try:
            _write_atomically(self.file, data)
        except OSError:
            return False
        _prune(self.file.parent, MAX_FILES)
        self._loaded = entries
        self._new = 0
        return True
