"""The broker's identify hook: a peer is remote only if it is a recorded ollie-remote ssh."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.broker.peer.identity import Requester
from registry_core.remote.identify import carrier, label_remote, make_identifier
from registry_core.remote.state import Connection, write_connection

# A stand-in supervisor (its command line says ollie-remote) whose child is a real ssh
# process kept waiting by a ProxyCommand that never answers.
SUPERVISOR = """
import subprocess, sys
ssh = subprocess.Popen(["ssh", "-F", "/dev/null", "-o", "BatchMode=yes",
                        "-o", "ProxyCommand=sleep 60", "never.invalid"],
                       stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(ssh.pid, flush=True)
sys.stdin.read()
ssh.terminate()
ssh.wait()
"""

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")


@pytest.fixture
def supervisor() -> Iterator[tuple[int, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, "ollie-remote", "connect", "laptop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    ssh_pid = int(proc.stdout.readline())
    deadline = time.monotonic() + 10
    while os.path.basename(os.readlink(f"/proc/{ssh_pid}/exe")) != "ssh":
        assert time.monotonic() < deadline, "ssh did not start"
        time.sleep(0.01)  # poll interval, bounded by the deadline
    try:
        yield proc.pid, ssh_pid
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(ssh_pid, signal.SIGTERM)
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


def record(directory: Path, pid: int, ssh_pid: int, host: str = "laptop") -> None:
    write_connection(
        directory,
        Connection(
            host=host,
            pid=pid,
            ssh_pid=ssh_pid,
            remote_socket="/run/user/1/ollie/elevate.sock",
            local_socket="/run/user/0/ollie/elevate.sock",
            since=0.0,
            connected=True,
            remote_user="alice",
            tools_dir="/home/alice/.config/ollie/tools",
        ),
    )


@needs_ssh
def test_the_recorded_ssh_child_of_a_supervisor_is_remote(
    tmp_path: Path, supervisor: tuple[int, int]
) -> None:
    pid, ssh_pid = supervisor
    record(tmp_path, pid, ssh_pid)
    found = carrier(ssh_pid, tmp_path)
    assert found is not None and found.host == "laptop"
    labelled = make_identifier(tmp_path)(ssh_pid, os.getuid(), os.getgid(), "desk")
    assert (labelled.remote, labelled.host, labelled.pid) == (True, "laptop", ssh_pid)
    assert (labelled.user, labelled.tools_dir) == ("alice", "/home/alice/.config/ollie/tools")
    assert labelled.exe.endswith("ssh")  # still the kernel's word about the peer


@needs_ssh
def test_records_that_do_not_match_the_processes_are_not_trusted(
    tmp_path: Path, supervisor: tuple[int, int]
) -> None:
    pid, ssh_pid = supervisor
    record(tmp_path, os.getpid(), ssh_pid)  # the ssh is not a child of the named pid
    assert carrier(ssh_pid, tmp_path) is None
    record(tmp_path, pid, pid)  # the "ssh" is the supervisor (python) itself
    assert carrier(pid, tmp_path) is None


def test_a_local_process_stays_local(tmp_path: Path) -> None:
    record(tmp_path, os.getppid(), os.getpid())  # a forged record naming this process
    me = Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), host="desk")
    assert label_remote(me, tmp_path) == me  # not an ssh, not a supervisor's child
    local = make_identifier(tmp_path / "none")(os.getpid(), os.getuid(), os.getgid(), "desk")
    assert (local.remote, local.host) == (False, "desk")
