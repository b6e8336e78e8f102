"""Unit tests of requester identity: SO_PEERCRED and what /proc says about a process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.elevation.identity import (
    Requester,
    describe_peer,
    parent_chain,
    peer_credentials,
    process_info,
)


@pytest.fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that waits on its stdin, started in ``tmp_path``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "marker-arg"],
        stdin=subprocess.PIPE,
        cwd=tmp_path,
    )
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(10)


def test_peer_credentials_come_from_the_kernel() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.getuid(), os.getgid())


def test_process_info_of_a_child(child: subprocess.Popen[bytes]) -> None:
    info = process_info(child.pid)
    assert info.pid == child.pid
    assert info.exe == os.path.realpath(sys.executable)
    assert info.cmdline == (sys.executable, "-c", "import sys; sys.stdin.read()", "marker-arg")
    assert info.label().startswith(f"{child.pid} {sys.executable} -c")


def test_parent_chain_leads_back_through_this_process(child: subprocess.Popen[bytes]) -> None:
    chain = parent_chain(child.pid)
    assert chain[0].pid == os.getpid()
    assert chain[0].exe == os.path.realpath(sys.executable)
    assert [p.pid for p in chain[1:]] == [p.pid for p in parent_chain(os.getpid())]
    assert all(p.pid > 1 for p in chain)
    assert len(parent_chain(child.pid, limit=1)) == 1


def test_describe_peer_records_cwd_and_parents(
    child: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "laptop")
    assert (peer.pid, peer.uid, peer.gid, peer.host) == (
        child.pid,
        os.getuid(),
        os.getgid(),
        "laptop",
    )
    assert peer.cwd == str(tmp_path)
    assert peer.cmdline[-1] == "marker-arg"
    assert peer.parents[0].pid == os.getpid()
    data = peer.to_json()
    assert data["pid"] == child.pid
    assert data["cwd"] == str(tmp_path)
    assert data["parents"][0]["pid"] == os.getpid()  # type: ignore[index]
    assert data["remote"] is False


def test_a_vanished_process_gives_empty_facts() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)
    info = process_info(proc.pid)
    assert (info.exe, info.cmdline) == ("", ())
    assert parent_chain(proc.pid) == ()
    peer = describe_peer(proc.pid, os.getuid(), os.getgid(), "h")
    assert (peer.exe, peer.cwd, peer.parents) == ("", "", ())


def test_requester_defaults() -> None:
    plain = Requester(pid=7, uid=1, gid=1)
    assert plain.to_json()["cmdline"] == []
    assert plain.to_json()["parents"] == []
