"""A cross-process advisory lock on a lock file, with a deadline.

``policies.yaml`` is rewritten by the broker, the tray and ``ollie-tools
policy``: three processes, each doing read, change, atomic rename.  A lock
held by threads of one process does not stop another process from reading
the old file between our read and our rename and then renaming its own
version over ours (a lost rule).  :func:`exclusive` takes ``flock(2)`` on a
lock file beside the data file (``policies.yaml.lock``), held across the
whole read-modify-write, so such writers take turns.

The lock file itself is never replaced or removed (removing it would let two
writers hold locks on two different files); it is opened without following
links and must be a regular file.  Waiting polls with ``LOCK_NB`` until a
deadline, so a stuck holder gives a clear :class:`LockTimeoutError` instead
of a hang.  The kernel drops the lock when its holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from registry_core.errors import OllieError
from registry_core.safe_open import open_regular

DEFAULT_TIMEOUT = 10.0
"""Seconds to wait for another process's lock before giving up."""


class LockTimeoutError(OllieError):
    """The lock could not be taken before the deadline."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(
            f"could not lock {path} within {timeout:g} s: another process holds it "
            "(a running ollie-tray, ollie-broker or ollie-tools)"
        )


def lock_path_for(path: Path) -> Path:
    """The lock file that guards ``path``: ``<name>.lock`` beside it."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def exclusive(lock_path: Path, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created 0600) for the ``with`` body.

    Raises :class:`LockTimeoutError` after ``timeout`` seconds, ``OSError``
    when the lock file cannot be created or is not a regular file.
    """
    lock_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = open_regular(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(lock_path, timeout) from None
                time.sleep(pause)  # flock has no timed wait: poll, backing off
                pause = min(pause * 2, 0.02)
        yield
    finally:
        os.close(fd)  # closing releases the lock
