"""Bind the broker's socket safely; light enough to run before anything else starts.

The tray binds (and listens) first thing, so agents can connect while the
rest of the application is still starting: their connections wait in the
kernel's backlog and are served as soon as the event loop runs (the same
idea as systemd socket activation). Binding here also decides the
single-instance question: a live socket means another broker runs.

Socket safety: the directory is created 0700 and must be ours; the socket
is bound under a 0177 umask (so it is never briefly wider than 0600); a
socket that answers belongs to a live instance and is left alone; one that
does not is stale and replaced.

Start-up race: probing, removing a stale socket, binding and listening all
happen under an ``flock`` on ``<socket>.lock`` beside the socket, so of two
instances starting at the same instant one binds and the other then finds
it live ("already running"); no instance can unlink a socket another has
just bound.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path

from registry_core.errors import ElevationError, OllieError
from registry_core.file_lock import exclusive, lock_path_for

_BACKLOG = socket.SOMAXCONN


class BrokerAlreadyRunningError(ElevationError):
    """Another live broker answers on the socket."""


class SocketSetupError(ElevationError):
    """The socket directory or file is unsafe or cannot be created."""


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and every missing parent 0700 (``Path.mkdir(parents=True)``
    would give the parents the umask's default mode)."""
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    for parent in reversed(missing):
        # Created meanwhile: the checks of prepare_socket_dir look at what is there.
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent, 0o700)


def prepare_socket_dir(path: Path) -> None:
    """Create the socket's directory 0700, or check an existing one is ours and private."""
    directory = path.parent
    make_private_dirs(directory)
    st = directory.stat()
    if st.st_uid != os.getuid():
        raise SocketSetupError(f"{directory} belongs to uid {st.st_uid}, not to you")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def socket_is_live(path: Path, timeout: float = 1.0) -> bool:
    """Does something listen on ``path`` (accepting, or with a full queue)?"""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except BlockingIOError:  # EAGAIN: a listener whose queue is full (stopped, swamped)
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_socket(path: Path) -> socket.socket:
    """A listening socket at ``path`` (0600), replacing a stale one."""
    prepare_socket_dir(path)
    try:
        with exclusive(lock_path_for(path), timeout=10.0):
            return _bind_locked(path)
    except (BrokerAlreadyRunningError, SocketSetupError):
        raise
    except (OllieError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SocketSetupError(f"cannot set up {path}: {reason}") from exc


def _bind_locked(path: Path) -> socket.socket:
    for _attempt in range(3):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            break
        if not stat.S_ISSOCK(st.st_mode):
            raise SocketSetupError(f"{path} exists and is not a socket; refusing to replace it")
        if socket_is_live(path):
            raise BrokerAlreadyRunningError(f"another broker is already listening on {path}")
        # Remove exactly the file found stale: if it was replaced meanwhile (by an
        # instance that does not take the lock), look again instead.
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_ino != st.st_ino:
                continue
            os.unlink(path)
        break
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:  # an instance that does not take the lock won
            raise BrokerAlreadyRunningError(
                f"another broker is already listening on {path}"
            ) from exc
        raise SocketSetupError(f"cannot bind {path}: {exc.strerror or exc}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(_BACKLOG)
    sock.setblocking(False)
    return sock
