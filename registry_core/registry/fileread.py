"""Reading one ``.meta`` file for the loader: stat identity, fast and careful reads."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from registry_core.errors import MetaError
from registry_core.registry.meta import MAX_META_BYTES, ParsedMeta
from registry_core.registry.scan_cache import FileKey
from registry_core.safe_open import UnsafeFileError, read_regular

_Key = FileKey  # (device, inode, size, mtime_ns, ctime_ns)


def broken(path: Path | str, message: str) -> ParsedMeta:
    return ParsedMeta(None, (MetaError(str(path), message),), ())


# O_NOFOLLOW: only names that scandir reported as regular files (not symlinks) take
# the fast path; if one was swapped for a symlink meanwhile, open fails and the
# careful path below decides.  O_NONBLOCK: never hang on a FIFO put there instead.
FAST_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def read_fast(path: str) -> tuple[_Key, bytes] | None:
    """open + fstat + read of a file the directory listing called regular.

    Half the system calls of stat-then-open; ``None`` for anything unusual, which
    :func:`read_careful` then examines and explains.
    """
    try:
        fd = os.open(path, FAST_OPEN)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if not stat.S_ISREG(st.st_mode) or size > MAX_META_BYTES:
            return None
        data = os.read(fd, size + 1)
        if len(data) != size:  # short read, or the file changed since fstat: read on
            parts, total = [data], len(data)
            while total <= MAX_META_BYTES:
                chunk = os.read(fd, MAX_META_BYTES + 1 - total)
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
            data = b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)
    return (st.st_dev, st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns), data


def stat_key(path: str) -> _Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_careful(path: Path | str) -> tuple[_Key | None, ParsedMeta | None, bytes | None]:
    """Stat and (when needed) read one file; errors become a broken ParsedMeta."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            return None, broken(path, f"dangling symlink to {target}"), None
        return None, None, None
    except OSError as exc:
        return None, broken(path, f"cannot stat: {exc.strerror}"), None
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if not stat.S_ISREG(st.st_mode):
        return key, broken(path, "not a regular file"), None
    if st.st_size > MAX_META_BYTES:
        return key, broken(path, f"file is {st.st_size} bytes, over the 1 MiB limit"), None
    try:
        # A symlinked .meta is followed (stat above did too); O_NONBLOCK and the
        # regular-file check catch a FIFO or device swapped in since the stat.
        data = read_regular(path, limit=MAX_META_BYTES, follow_symlinks=True)
    except UnsafeFileError as exc:
        return key, broken(path, exc.strerror or "not a regular file"), None
    except OSError as exc:
        reason = "permission denied" if exc.errno == errno.EACCES else exc.strerror
        return key, broken(path, f"cannot read: {reason}"), None
    return key, None, data
