"""The working directory and the paths inside it, opened once and used by descriptor.

A sandboxed tool can write its working directory, and the next call starts
there.  Between the check that a directory is safe and the moment bwrap binds
it and Landlock grants it, a tool of an earlier (or concurrent) call can
rename the directory away and put a symlink to ``$HOME`` in its place
(``RENAME_EXCHANGE`` makes it atomic): a path resolved twice is two answers.
So the working directory is opened once, component by component from ``/``
with ``O_NOFOLLOW`` (:func:`pin_directory`: a symlink anywhere in its real
path at that moment is refused), and every later decision uses that
descriptor: the dangerous-directory checks take the real path it was opened
at, bwrap binds it with ``--bind-fd``, Landlock's rule is added on it, and the
exec step inside compares the device and inode of its working directory with
it before it runs the tool.  Rule paths inside the working directory
(``{CWD}/.git``, ``{CWD}/build``) are opened the same way relative to it
(:func:`open_inside`); one that is a symlink there is not followed.

Every kernel Ollie supports has ``O_PATH`` and ``O_NOFOLLOW``; walking the
components with them gives what ``openat2(RESOLVE_NO_SYMLINKS)`` would, with
one code path (docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from registry_core.errors import SandboxError

_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ANY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class PinnedDirectory(NamedTuple):
    """A directory held open: its real path when opened, descriptor, device and inode."""

    path: str
    fd: int
    device: int
    inode: int

    @property
    def identity(self) -> str:
        """``DEVICE:INODE``, what the exec step compares its working directory with."""
        return f"{self.device}:{self.inode}"


def _walk(start: int, parts: Iterable[str], last: int) -> int:
    """Open ``parts`` one by one from ``start`` (never following a symlink); the
    last with ``last`` flags.  Returns a new descriptor; raises ``OSError``."""
    names = [part for part in parts if part]
    fd = os.dup(start)
    try:
        for index, name in enumerate(names):
            if name in (".", ".."):
                raise OSError(errno.EINVAL, f"'{name}' in a pinned path")
            following = os.open(name, last if index == len(names) - 1 else _DIR, dir_fd=fd)
            os.close(fd)
            fd = following
    except BaseException:
        os.close(fd)
        raise
    return fd


def pin_directory(cwd: str) -> PinnedDirectory:
    """Open ``cwd`` (its real path, resolved once) without following any symlink.

    Raises :class:`SandboxError` naming the directory when it is missing, not a
    directory, or when a component became a symlink after it was resolved.
    """
    real = cwd
    try:
        real = os.path.realpath(cwd)  # may fail while the path changes under it
        root = os.open("/", _DIR)
        try:
            fd = _walk(root, real.split("/"), _DIR)
        finally:
            os.close(root)
        info = os.fstat(fd)
    except OSError as exc:
        changed = exc.errno in (errno.ENOTDIR, errno.ELOOP)
        reason = "a part of it is now a symlink" if changed else exc.strerror or str(exc)
        raise SandboxError(f"cannot open the working directory {cwd} ({real}): {reason}") from exc
    if not stat.S_ISDIR(info.st_mode):  # pragma: no cover - O_DIRECTORY saw to it
        os.close(fd)
        raise SandboxError(f"the working directory {cwd} is not a directory")
    return PinnedDirectory(real, fd, info.st_dev, info.st_ino)


def open_inside(directory: PinnedDirectory, path: str) -> int | None:
    """A descriptor of ``path`` (beneath ``directory``), opened from it without
    following a symlink; ``None`` when it is missing or a symlink is on the way."""
    relative = os.path.relpath(path, directory.path)
    if relative == "." or relative.startswith(".."):
        return None
    with contextlib.suppress(OSError):
        fd = _walk(directory.fd, relative.split("/"), _ANY)
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd
    return None


class OpenedPaths:
    """The pinned working directory and the rule paths inside it, by path.

    ``fds`` maps a path to its descriptor (the working directory itself
    included); ``refused`` lists rule paths inside it that were not opened (a
    symlink on the way, or missing).  :meth:`close` closes everything.
    """

    def __init__(self, directory: PinnedDirectory, rule_paths: Iterable[str]) -> None:
        self.directory = directory
        self.fds: dict[str, int] = {directory.path: directory.fd}
        self.refused: list[str] = []
        for path in rule_paths:
            if path in self.fds or not _strictly_inside(path, directory.path):
                continue
            fd = open_inside(directory, path)
            if fd is None:
                self.refused.append(path)
            else:
                self.fds[path] = fd

    def open(self, path: str) -> int | None:
        """The descriptor of ``path`` inside the working directory, opened now if
        it was not (closed with the rest); ``None``: a symlink or missing."""
        if path not in self.fds:
            fd = open_inside(self.directory, path)
            if fd is None:
                return None
            self.fds[path] = fd
        return self.fds[path]

    def inside(self, path: str) -> bool:
        """Is ``path`` in the working directory (where only descriptors are used)?"""
        return path == self.directory.path or _strictly_inside(path, self.directory.path)

    def close(self) -> None:
        for path, fd in self.fds.items():
            if path != self.directory.path:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fds = {self.directory.path: self.directory.fd}


def _strictly_inside(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def same_directory(directory: PinnedDirectory) -> None:
    """Raise ``OSError`` unless the process's working directory is ``directory``
    (for the Landlock-only ``preexec_fn``, after ``subprocess`` changed into it)."""
    here = os.stat(".")
    if (here.st_dev, here.st_ino) != (directory.device, directory.inode):
        raise OSError(errno.ESTALE, f"{directory.path} is not the directory that was checked")


@contextlib.contextmanager
def pinned(cwd: str) -> Iterator[PinnedDirectory]:
    """:func:`pin_directory`, closed on leaving the block."""
    directory = pin_directory(cwd)
    try:
        yield directory
    finally:
        os.close(directory.fd)
