"""Every store opens its file safely: FIFOs, devices, links, directories, huge files.

One test per store with each hostile kind, each bounded by a thread join (a
FIFO opened the old way blocks forever).  The policies file, the audit log and
``.meta`` files have their own tests beside their stores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry_core.errors import ProfileError
from registry_core.file_lock import LockTimeoutError, exclusive
from registry_core.registry.loader import RegistryLoader
from registry_core.registry.scan_cache import cache_file
from registry_core.remote.deploy import _cmds
from registry_core.remote.state import deployed_hosts, read_connection
from registry_core.safe_open import (
    FileTooLargeError,
    NotRegularFileError,
    open_regular,
    read_own_cache,
    read_regular,
)
from registry_core.sandbox.profiles import load_profile_file

KINDS = ["fifo", "device", "symlink", "directory", "huge"]


def make(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "symlink":
        target = path.with_name("target-of-" + path.name)
        target.write_text("{}")
        path.symlink_to(target)
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as fh:
            fh.truncate(256 * 1024 * 1024)  # sparse


def bounded(action: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(action())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "hung on a hostile file"
    return (out[0] if out else None), (errors[0] if errors else None)


@pytest.mark.parametrize("kind", ["fifo", "device", "symlink", "directory"])
def test_read_regular_names_what_it_found(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "f"
    make(path, kind)
    _, error = bounded(lambda: read_regular(path))
    assert isinstance(error, NotRegularFileError)
    assert str(path) in str(error)
    expected = {"fifo": "a FIFO", "device": "symbolic link", "symlink": "symbolic link"}
    assert expected.get(kind, "a directory") in str(error)


def test_followed_links_still_must_end_at_a_regular_file(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.symlink_to("/dev/zero")
    _, error = bounded(lambda: read_regular(dev, follow_symlinks=True))
    assert isinstance(error, NotRegularFileError)
    assert "a character device" in str(error)


def test_limits_hold_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "big"
    make(path, "huge")
    with pytest.raises(FileTooLargeError, match="too large"):
        read_regular(path, limit=1024)
    (tmp_path / "small").write_bytes(b"x" * 1024)
    assert read_regular(tmp_path / "small", limit=1024) == b"x" * 1024


def test_a_fifo_opened_for_writing_without_reader_is_named(tmp_path: Path) -> None:
    path = tmp_path / "out"
    os.mkfifo(path)
    with pytest.raises(NotRegularFileError, match="a FIFO"):
        open_regular(path, os.O_WRONLY | os.O_APPEND)


@pytest.mark.parametrize("kind", KINDS)
def test_sandbox_profile(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "sandbox" / "default.yaml"
    make(path, kind)
    result, error = bounded(lambda: load_profile_file(path))
    if kind == "symlink":  # profiles may be links to a regular file
        assert error is None
        assert result is not None
        return
    assert isinstance(error, ProfileError)
    assert str(path) in str(error)


@pytest.mark.parametrize("kind", KINDS)
def test_remote_connection_state(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "host.json"
    make(path, kind)
    result, error = bounded(lambda: read_connection(path))
    assert (result, error) == (None, None)


@pytest.mark.parametrize("kind", KINDS)
def test_remote_hosts_file(tmp_path: Path, kind: str) -> None:
    make(tmp_path / "ollie" / "remote-hosts.json", kind)
    result, error = bounded(lambda: deployed_hosts({"XDG_STATE_HOME": str(tmp_path)}))
    assert (result, error) == ([], None)


@pytest.mark.parametrize("kind", KINDS)
def test_deploy_reads_meta_safely(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "t.meta"
    make(path, kind)
    result, error = bounded(lambda: _cmds(path))
    assert (result, error) == ([], None)


@pytest.mark.parametrize("kind", KINDS)
def test_scan_cache(tmp_path: Path, kind: str) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "t.meta").write_text('{"description": "d"}')
    cache = tmp_path / "cache"
    make(cache_file(cache, [tools]), kind)
    loader = RegistryLoader([tools], env={}, cache_dir=cache)
    result, error = bounded(loader.load)
    assert error is None
    assert result.tools["t"].status.value == "available"


def test_a_lock_file_that_is_a_fifo_is_named(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    os.mkfifo(lock)
    _, error = bounded(lambda: exclusive(lock).__enter__())
    assert isinstance(error, NotRegularFileError)
    assert str(lock) in str(error)
    assert "a FIFO" in str(error)


def test_a_lock_timeout_names_the_lock_file(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    # flock locks belong to open file descriptions: a second open in this
    # process contends like another process would.
    with (
        exclusive(lock),
        pytest.raises(LockTimeoutError, match=r"could not lock .*x\.lock"),
        exclusive(lock, timeout=0.1),
    ):
        pass


def test_read_own_cache_refuses_every_untrusted_file(tmp_path: Path) -> None:
    """The one trust check of the scan and profile-parse caches: kind, owner, mode, size."""
    good = tmp_path / "good.json"
    good.write_bytes(b"x" * 100)
    good.chmod(0o600)
    assert read_own_cache(good, limit=100) == b"x" * 100
    assert read_own_cache(good, limit=99) is None  # too large
    assert read_own_cache(tmp_path / "missing", limit=100) is None
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert read_own_cache(link, limit=100) is None
    shared = tmp_path / "shared.json"
    shared.write_bytes(b"{}")
    for mode in (0o620, 0o602):
        shared.chmod(mode)
        assert read_own_cache(shared, limit=100) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo, 0o600)
    assert bounded(lambda: read_own_cache(fifo, limit=100)) == (None, None)
    assert read_own_cache(tmp_path, limit=100) is None  # a directory
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign.json"
        foreign.write_bytes(b"{}")
        foreign.chmod(0o600)
        os.chown(foreign, 65534, 65534)
        assert read_own_cache(foreign, limit=100) is None
