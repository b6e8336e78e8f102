"""Open the files we read (and append to) without hanging or following links.

Every store of the project (``policies.yaml``, the audit log, the scan
cache, ``.meta`` files, sandbox profiles, ollie-remote state) may find
something other than a regular file at its path: a FIFO (opening it for
reading blocks until a writer comes, forever), a device (reading
``/dev/zero`` never ends), a directory, or a symbolic link planted to
redirect a write.  The helpers here open with ``O_NONBLOCK`` (a FIFO or
device opens at once instead of blocking) and, unless the caller asks to
follow links, ``O_NOFOLLOW``; they then ``fstat`` the descriptor and refuse
anything but a regular file with :class:`NotRegularFileError`, which names
the path and what was found there.

Errors are ``OSError`` subclasses (and :class:`~registry_core.errors.OllieError`
ones), so callers that already report ``OSError`` with ``exc.strerror``
report these too, naming the condition as it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from registry_core.errors import OllieError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link (not followed)"),
)


class UnsafeFileError(OllieError, OSError):
    """A file we were about to read or write is unsafe to use; ``strerror`` says why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        OSError.__init__(self, errno.EINVAL, reason, os.fspath(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class NotRegularFileError(UnsafeFileError):
    """The path names a FIFO, device, socket, directory or (not followed) symbolic link."""


class FileTooLargeError(UnsafeFileError):
    """The file is larger than the reader accepts."""


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, for messages ("a FIFO", "a directory", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_regular(fd: int, path: str | os.PathLike[str]) -> os.stat_result:
    """The status of the file open on ``fd``; raises :class:`NotRegularFileError` otherwise."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(path, f"not a regular file ({kind_of(st.st_mode)})")
    return st


def open_regular(
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: int = 0o600,
    *,
    follow_symlinks: bool = False,
) -> int:
    """A descriptor on the regular file at ``path``; raises ``OSError``.

    ``flags`` are added to ``O_NONBLOCK | O_CLOEXEC`` (and ``O_NOFOLLOW``
    unless ``follow_symlinks``).  A symbolic link that is not followed is
    reported as such, not as "too many levels of symbolic links".
    """
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks and os.path.islink(path):
            reason = "not a regular file (a symbolic link, not followed)"
            raise NotRegularFileError(path, reason) from exc
        if exc.errno == errno.ENXIO:  # O_WRONLY|O_NONBLOCK on a FIFO without a reader
            raise NotRegularFileError(path, "not a regular file (a FIFO)") from exc
        raise
    try:
        check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(
    path: str | os.PathLike[str], *, limit: int | None = None, follow_symlinks: bool = False
) -> bytes:
    """The whole content of the regular file at ``path``; raises ``OSError``.

    With ``limit``, a file of more than ``limit`` bytes raises
    :class:`FileTooLargeError` (checked on the size and while reading, so a
    file growing meanwhile cannot exhaust memory).
    """
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise FileTooLargeError(path, f"too large ({size} bytes; the limit is {limit})")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, max(65536, size + 1 - total)):
            total += len(chunk)
            if limit is not None and total > limit:
                raise FileTooLargeError(path, f"too large (over the limit of {limit} bytes)")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_own_cache(path: str | os.PathLike[str], *, limit: int) -> bytes | None:
    """The content of a cache file we wrote for ourselves, or ``None`` if it cannot be trusted.

    Trusted means: a regular file (links are not followed, a FIFO does not
    block), owned by the effective user, not writable by group or others, and
    at most ``limit`` bytes (checked on the size and while reading).  Any
    ``OSError`` also gives ``None``: a cache that cannot be read is a miss.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & 0o022
            or st.st_size > limit
        ):
            return None
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, max(65536, st.st_size + 1 - total)):
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_own_cache(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the cache file at ``path`` with ``data`` (0600, never through a link).

    Best effort, as a cache is: any ``OSError`` leaves the old file (or none)
    and is ignored.  A temporary sibling named after this process is created
    exclusively and renamed over ``path``, so a reader sees the old content or
    the new one, never half of it.
    """
    target = os.fspath(path)
    tmp = f"{target}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
