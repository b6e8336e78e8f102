"""Binding the broker's socket, every outcome in words, on real files and sockets.

Written against the mutants of ``listen.py``.  Paths live in a short directory
under ``/tmp``: a socket address holds at most 108 bytes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from registry_core.broker.serve import listen
from registry_core.broker.serve.listen import (
    BrokerAlreadyRunningError,
    SocketSetupError,
    bind_socket,
    make_private_dirs,
    prepare_socket_dir,
    socket_is_live,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def stale_socket(path: Path) -> int:
    """A socket file nobody listens on; a hard link beside it keeps its inode number
    taken (the file system would hand a freed one to the next file)."""
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    inode = os.lstat(path).st_ino
    os.link(path, path.with_name(f"{path.name}.{inode}"))
    return inode


def test_existing_parents_keep_their_mode_missing_ones_are_private(base: Path) -> None:
    (base / "open").mkdir(mode=0o755)
    os.chmod(base / "open", 0o755)
    make_private_dirs(base / "open" / "a" / "b")
    assert mode(base / "open") == 0o755
    assert (mode(base / "open" / "a"), mode(base / "open" / "a" / "b")) == (0o700, 0o700)
    make_private_dirs(base / "open" / "a" / "b")  # all there: nothing to do


def test_a_directory_another_instance_makes_meanwhile_is_no_error(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkdir = os.mkdir

    def another_instance_first(path: str | os.PathLike[str], mode: int = 0o777) -> None:
        real_mkdir(path, 0o700)  # made after our look, before our mkdir
        real_mkdir(path, mode)  # so ours finds it there: FileExistsError

    monkeypatch.setattr(listen.os, "mkdir", another_instance_first)
    make_private_dirs(base / "a" / "b")
    monkeypatch.undo()
    assert (mode(base / "a"), mode(base / "a" / "b")) == (0o700, 0o700)


def test_a_wide_socket_directory_of_ours_is_made_private(base: Path) -> None:
    directory = base / "run"
    directory.mkdir()
    os.chmod(directory, 0o750)
    prepare_socket_dir(directory / "elevate.sock")
    assert mode(directory) == 0o700


def test_a_private_directory_is_left_as_it_is(base: Path) -> None:
    directory = base / "run"
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o500)  # no group or other bits: not touched
    prepare_socket_dir(directory / "elevate.sock")
    assert mode(directory) == 0o500


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory away")
def test_a_socket_directory_of_another_user_is_refused_in_words(base: Path) -> None:
    directory = base / "theirs"
    directory.mkdir()
    os.chmod(directory, 0o777)
    os.chown(directory, 4321, 4321)
    with pytest.raises(SocketSetupError) as info:
        prepare_socket_dir(directory / "elevate.sock")
    assert str(info.value) == f"{directory} belongs to uid 4321, not to you"
    assert mode(directory) == 0o777  # refused, not repaired
    with pytest.raises(SocketSetupError) as bound:
        bind_socket(directory / "elevate.sock")
    assert str(bound.value) == str(info.value)


def test_socket_is_live_only_for_a_listening_socket(base: Path) -> None:
    path = base / "s"
    assert socket_is_live(path) is False  # nothing there
    stale_socket(path)
    assert socket_is_live(path) is False  # nobody listens
    path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        server.listen()
        assert socket_is_live(path) is True
    finally:
        server.close()


def test_a_fresh_socket_is_private_listening_and_non_blocking(base: Path) -> None:
    path = base / "run" / "elevate.sock"
    before = os.umask(0o022)
    try:
        sock = bind_socket(path)
        assert os.umask(0o022) == 0o022  # the caller's umask is back
    finally:
        os.umask(before)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode) and mode(path) == 0o600
        assert sock.getblocking() is False
        assert socket_is_live(path) is True
        assert sock.getsockname() == str(path)
    finally:
        sock.close()


def test_a_stale_socket_is_replaced(base: Path) -> None:
    path = base / "elevate.sock"
    old = stale_socket(path)
    sock = bind_socket(path)
    try:
        assert os.lstat(path).st_ino != old
        assert socket_is_live(path) is True
    finally:
        sock.close()


def test_a_live_broker_is_left_alone_in_words(base: Path) -> None:
    path = base / "elevate.sock"
    live = bind_socket(path)
    try:
        inode = os.lstat(path).st_ino
        with pytest.raises(BrokerAlreadyRunningError) as info:
            bind_socket(path)
        assert str(info.value) == f"another broker is already listening on {path}"
        assert os.lstat(path).st_ino == inode
        assert socket_is_live(path) is True
    finally:
        live.close()


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_anything_but_a_socket_is_never_replaced(base: Path, kind: str) -> None:
    path = base / "elevate.sock"
    if kind == "file":
        path.write_text("keep me")
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(base / "nowhere")
    with pytest.raises(SocketSetupError) as info:
        bind_socket(path)
    assert str(info.value) == f"{path} exists and is not a socket; refusing to replace it"
    assert os.path.lexists(path)
    if kind == "file":
        assert path.read_text() == "keep me"


def test_a_path_too_long_to_bind_is_refused_in_words(base: Path) -> None:
    path = base / ("x" * 120)
    with pytest.raises(SocketSetupError) as info:
        bind_socket(path)
    assert str(info.value) == f"cannot bind {path}: AF_UNIX path too long"
    assert not os.path.lexists(path)


def test_an_unusable_lock_file_is_refused_with_its_reason(base: Path) -> None:
    path = base / "elevate.sock"
    (base / "elevate.sock.lock").mkdir()
    with pytest.raises(SocketSetupError) as info:
        bind_socket(path)
    assert str(info.value) == f"cannot set up {path}: Is a directory"
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EISDIR


@pytest.mark.slow
def test_a_lock_held_for_ten_seconds_is_refused_in_words(base: Path) -> None:
    path = base / "elevate.sock"
    fd = os.open(base / "elevate.sock.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(SocketSetupError) as info:
            bind_socket(path)
        assert time.monotonic() - started >= 10.0
    finally:
        os.close(fd)
    lock = base / "elevate.sock.lock"
    assert str(info.value) == (
        f"cannot set up {path}: could not lock {lock} within 10 s: another process holds "
        "it (a running ollie-tray, ollie-broker or ollie-tools)"
    )
    assert not os.path.lexists(path)


def test_a_socket_bound_by_an_instance_without_the_lock_wins(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between removing the stale file and binding, an instance that does not take the
    lock binds first: ``bind`` then fails with EADDRINUSE, reported as already running."""
    path = base / "elevate.sock"
    stale_socket(path)
    winner: list[socket.socket] = []
    real_umask = os.umask

    def umask_while_another_binds(mask: int) -> int:
        if not winner and not os.path.lexists(path):
            other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            other.bind(str(path))
            other.listen()
            winner.append(other)
        return real_umask(mask)

    monkeypatch.setattr(listen.os, "umask", umask_while_another_binds)
    try:
        with pytest.raises(BrokerAlreadyRunningError) as info:
            bind_socket(path)
        assert str(info.value) == f"another broker is already listening on {path}"
        assert isinstance(info.value.__cause__, OSError)
        assert info.value.__cause__.errno == errno.EADDRINUSE
        monkeypatch.undo()
        assert socket_is_live(path) is True  # the winner's socket is untouched
    finally:
        for other in winner:
            other.close()


def test_a_stale_socket_replaced_by_a_stale_one_again_is_looked_at_again(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file found stale changed before the removal: it is examined afresh (here,
    stale again, so it is the one removed) and the bind succeeds."""
    path = base / "elevate.sock"
    stale_socket(path)
    probes: list[int] = []
    real_probe = listen.socket_is_live

    def probe_then_replace(p: Path, timeout: float = 1.0) -> bool:
        probes.append(os.lstat(p).st_ino)
        live = real_probe(p, timeout)
        if len(probes) == 1:
            p.unlink()
            stale_socket(p)  # another stale file in its place: another inode
        return live

    monkeypatch.setattr(listen, "socket_is_live", probe_then_replace)
    sock = bind_socket(path)
    try:
        assert len(probes) == 2 and probes[0] != probes[1]
        assert os.lstat(path).st_ino not in probes
    finally:
        sock.close()
