"""Unit tests of requester identity: SO_PEERCRED and what /proc says about a process."""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.broker.peer import identity
from registry_core.broker.peer.identity import (
    Requester,
    describe_peer,
    parent_chain,
    process_info,
    start_time,
)
from registry_core.broker.wire.peercred import peer_credentials


@pytest.fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that waits on its stdin, started in ``tmp_path``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "marker-arg"],
        stdin=subprocess.PIPE,
        cwd=tmp_path,
    )
    # Popen returns once the exec began; the kernel sets the new command line up a
    # moment later (a loaded machine can show an empty /proc/<pid>/cmdline before).
    deadline = time.monotonic() + 10
    while b"marker-arg" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child never showed its command line"
        time.sleep(0.005)
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
    assert peer.ancestors()[0].pid == os.getpid()
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
    assert (peer.exe, peer.cwd, peer.ancestors()) == ("", "", ())


def test_requester_defaults() -> None:
    plain = Requester(pid=7, uid=1, gid=1)
    assert plain.to_json()["cmdline"] == []
    assert plain.to_json()["parents"] == []


def test_the_parent_chain_is_read_when_asked_and_only_of_the_same_process(
    child: subprocess.Popen[bytes],
) -> None:
    """describe_peer leaves the chain for the dialog; by then the pid must still name
    the process that connected (same start time), else no chain is shown."""
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert start_time(child.pid) != b""
    # A process that took over the pid has another start time: its ancestors never show.
    impostor = dataclasses.replace(
        peer, ancestry=identity._ancestry(child.pid, b"1" + start_time(child.pid))
    )
    assert impostor.ancestors() == ()
    assert [p.pid for p in peer.ancestors()] == [p.pid for p in parent_chain(child.pid)]
    assert peer.ancestors()[0].pid == os.getpid()


def test_a_peer_gone_before_its_chain_is_asked_shows_none() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        peer = describe_peer(proc.pid, os.getuid(), os.getgid(), "h")
        assert peer.exe
    finally:
        proc.communicate(b"", timeout=10)
    assert peer.ancestors() == ()


def test_start_time_of_a_command_name_with_spaces_and_parens(tmp_path: Path) -> None:
    """The stat line's command name may hold ") " — fields are counted after the last ")"."""
    odd = tmp_path / "a) 1 2 3 4"
    shutil.copy("/bin/sleep", odd)
    proc = subprocess.Popen([str(odd), "30"])  # returns once the exec is done
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
        assert b"(a) 1 2 3 4)" in stat
        assert start_time(proc.pid) == stat.rsplit(b")", 1)[1].split()[19]
        assert start_time(proc.pid) != b""
    finally:
        proc.kill()
        proc.wait(10)


def test_a_process_label_falls_back_to_its_executable_then_a_question_mark() -> None:
    assert identity.ProcessInfo(7, "/bin/x", ("x", "-v")).label() == "7 x -v"
    assert identity.ProcessInfo(7, "/bin/x", ()).label() == "7 /bin/x"
    assert identity.ProcessInfo(7, "", ()).label() == "7 ?"


def test_the_requester_record_of_the_audit_log() -> None:
    peer = Requester(
        pid=7,
        uid=1000,
        gid=1000,
        exe="/usr/bin/python3",
        cmdline=("python3", "agent.py"),
        cwd="/home/me",
        parents=(identity.ProcessInfo(6, "/bin/bash", ("bash",)),),
        host="laptop",
        sandboxed=True,
        sandbox_reasons=("it runs in another user namespace",),
    )
    assert peer.to_json() == {
        "pid": 7,
        "uid": 1000,
        "exe": "/usr/bin/python3",
        "cmdline": ["python3", "agent.py"],
        "cwd": "/home/me",
        "parents": [{"pid": 6, "exe": "/bin/bash", "cmdline": ["bash"]}],
        "host": "laptop",
        "remote": False,
        "sandboxed": True,
        "sandbox_reasons": ["it runs in another user namespace"],
    }


def test_the_parent_pid_is_read_from_its_line_wherever_it_is() -> None:
    assert identity._status_ppid(b"Name:\tx\nPPid:\t1234\nTracerPid:\t0\n") == 1234
    assert identity._status_ppid(b"Name:\tx\nPPid:\t1234") == 1234  # last, no newline
    assert identity._status_ppid(b"Name:\tx\n") == 0


def test_a_pid_taken_over_during_the_walk_shows_no_chain(
    child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = start_time(child.pid)
    answers = iter([started, b"1" + started])  # before the walk: the same; after: another

    monkeypatch.setattr(identity, "start_time", lambda pid: next(answers))
    assert identity._ancestry(child.pid, started)() == ()


def test_the_parent_chain_is_read_once_however_often_it_is_shown() -> None:
    calls: list[int] = []

    def ancestry() -> tuple[identity.ProcessInfo, ...]:
        calls.append(1)
        return (identity.ProcessInfo(6, "/bin/bash", ("bash",)),)

    peer = Requester(pid=7, uid=1, gid=1, ancestry=ancestry)
    assert peer.ancestors() == peer.ancestors() == ancestry()[:1]
    assert len(calls) == 2  # once by the requester, once by this test's comparison


def test_a_command_line_that_is_not_utf8_is_shown_with_replacement_characters() -> None:
    code = "import sys; sys.stdin.read()"
    arg = b"caf\xe9"  # Latin-1, not UTF-8
    proc = subprocess.Popen(
        [sys.executable.encode(), b"-c", code.encode(), arg], stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 10
        while arg not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():  # until it exec'd
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.01)
        peer = describe_peer(proc.pid, os.getuid(), os.getgid(), "h")
    finally:
        proc.communicate(b"", timeout=10)
    assert peer.cmdline[-1] == "caf\ufffd"
