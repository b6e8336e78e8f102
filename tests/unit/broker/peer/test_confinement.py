"""Telling a sandboxed requester apart: other namespaces, no_new_privs, unreadable → sandboxed.

Two kinds of test: a proc tree built in a temporary directory (each fact alone,
including entries that cannot be read), and real processes read through the real
``/proc`` by :func:`describe_peer` (a plain child, one with ``no_new_privs``, one
in a new user namespace, one that is gone).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from registry_core.broker.peer.confinement import (
    SANDBOX_LABEL,
    read_proc_file,
    sandbox_id,
    sandbox_reasons,
)
from registry_core.broker.peer.identity import describe_peer

DEADLINE = 10.0
OURS = {"user": "user:[4026531837]", "mnt": "mnt:[4026531832]", "pid": "pid:[4026531836]"}


def fake_process(
    proc: Path,
    pid: str,
    ns: dict[str, str | None] | None = None,
    no_new_privs: str | None = "0",
) -> None:
    """``proc/<pid>`` with namespace links (``None``: missing) and a status file."""
    (proc / pid / "ns").mkdir(parents=True)
    for name, target in {**OURS, **(ns or {})}.items():
        if target is not None:
            (proc / pid / "ns" / name).symlink_to(target)
    if no_new_privs is not None:
        (proc / pid / "status").write_text(
            f"Name:\ttool\nPid:\t{pid}\nNoNewPrivs:\t{no_new_privs}\nSeccomp:\t0\n"
        )


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    fake_process(root, "self")
    return root


def test_same_namespaces_and_no_flag_is_not_sandboxed(proc: Path) -> None:
    fake_process(proc, "42")
    assert sandbox_reasons(42, proc=proc) == ()


@pytest.mark.parametrize("name", ["user", "mnt", "pid"])
def test_another_namespace_is_sandboxed(proc: Path, name: str) -> None:
    fake_process(proc, "42", ns={name: f"{name}:[4026539999]"})
    assert sandbox_reasons(42, proc=proc) == (f"it runs in another {name} namespace",)


def test_no_new_privs_is_sandboxed(proc: Path) -> None:
    fake_process(proc, "42", no_new_privs="1")
    assert sandbox_reasons(42, proc=proc) == ("it runs with no_new_privs (NoNewPrivs: 1)",)


@pytest.mark.parametrize("name", ["user", "mnt", "pid"])
def test_an_unreadable_namespace_is_sandboxed(proc: Path, name: str) -> None:
    fake_process(proc, "42", ns={name: None})
    [reason] = sandbox_reasons(42, proc=proc)
    assert reason == f"cannot read its {name} namespace (No such file or directory)"


def test_an_unreadable_or_incomplete_status_is_sandboxed(proc: Path) -> None:
    fake_process(proc, "42", no_new_privs=None)
    [reason] = sandbox_reasons(42, proc=proc)
    assert reason.startswith("cannot read its NoNewPrivs flag")
    (proc / "42" / "status").write_text("Name:\ttool\n")  # a kernel without the field
    [reason] = sandbox_reasons(42, proc=proc)
    assert reason.startswith("cannot read its NoNewPrivs flag")


def test_a_vanished_process_is_sandboxed(proc: Path) -> None:
    reasons = sandbox_reasons(42, proc=proc)
    assert len(reasons) == 4  # three namespaces and the flag: nothing could be read


def test_the_broker_not_reading_its_own_namespaces_fails_closed(proc: Path) -> None:
    fake_process(proc, "42")
    shutil.rmtree(proc / "self" / "ns")
    assert sandbox_reasons(42, proc=proc) == tuple(
        f"cannot read the broker's own {name} namespace (No such file or directory)"
        for name in ("user", "mnt", "pid")
    )


# --- real processes, through the real /proc -------------------------------------------


def _started(
    argv: list[str], preexec_fn: Callable[[], None] | None = None
) -> subprocess.Popen[bytes]:
    """``argv`` running, once it printed ``ready`` (then it waits for its stdin)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=preexec_fn
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n", "the child did not start"
    return proc


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.kill()
        child.communicate(timeout=DEADLINE)  # reaps it and closes both pipes


WAIT_FOR_STDIN = "import sys; print('ready', flush=True); sys.stdin.read()"


def test_a_plain_child_is_not_sandboxed(children: list[subprocess.Popen[bytes]]) -> None:
    child = _started([sys.executable, "-c", WAIT_FOR_STDIN])
    children.append(child)
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert (peer.sandboxed, peer.sandbox_reasons, peer.origin) == (False, (), "")


def _no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, as Landlock needs
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def test_a_child_with_no_new_privs_is_sandboxed(children: list[subprocess.Popen[bytes]]) -> None:
    child = _started([sys.executable, "-c", WAIT_FOR_STDIN], preexec_fn=_no_new_privs)
    children.append(child)
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert peer.sandboxed
    assert peer.sandbox_reasons == ("it runs with no_new_privs (NoNewPrivs: 1)",)
    assert peer.origin == SANDBOX_LABEL == "from inside the sandbox"
    assert peer.to_json()["sandboxed"] is True


def test_a_child_in_new_namespaces_is_sandboxed(children: list[subprocess.Popen[bytes]]) -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed")
    child = _started(
        [unshare, "--user", "--map-root-user", "--mount", sys.executable, "-c", WAIT_FOR_STDIN]
    )
    children.append(child)  # "ready" came from python, inside the new namespaces
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert peer.sandboxed
    assert "it runs in another user namespace" in peer.sandbox_reasons
    assert "it runs in another mnt namespace" in peer.sandbox_reasons


def test_a_peer_that_is_gone_is_sandboxed() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(DEADLINE)
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert peer.sandboxed


def test_a_status_text_without_the_flag_is_sandboxed(proc: Path) -> None:
    """describe_peer hands in the status it read once: an empty one (unreadable) fails closed."""
    fake_process(proc, "42")
    [reason] = sandbox_reasons(42, proc=proc, status=b"")
    assert reason == "cannot read its NoNewPrivs flag (no NoNewPrivs line)"  # as the dialog says
    assert sandbox_reasons(42, proc=proc, status=b"Name:\tx\nNoNewPrivs:\t1\n") == (
        "it runs with no_new_privs (NoNewPrivs: 1)",
    )
    assert sandbox_reasons(42, proc=proc, status=b"Name:\tx\nNoNewPrivs:\t1") == (
        "it runs with no_new_privs (NoNewPrivs: 1)",  # the last line, without a newline
    )
    [reason] = sandbox_reasons(42, proc=proc, status=b"Name:\tx\nNoNewPrivs:\n")
    assert reason.startswith("cannot read its NoNewPrivs flag")


# --- reading /proc files: at most 64 KiB, in as many reads as it takes -----------------


def test_a_proc_file_is_read_up_to_64_kib(tmp_path: Path) -> None:
    big = tmp_path / "cmdline"
    big.write_bytes(bytes(range(256)) * 400)  # 100 KiB: a huge command line
    assert read_proc_file(str(big)) == big.read_bytes()[:65536]
    small = tmp_path / "status"
    small.write_bytes(b"Name:\ttool\n")
    assert read_proc_file(str(small)) == b"Name:\ttool\n"


def test_short_reads_are_joined_and_still_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "cmdline"
    big.write_bytes(bytes(range(256)) * 400)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 1000)))  # like a pipe
    assert read_proc_file(str(big)) == big.read_bytes()[:65536]


# --- which sandbox: the key of its broker budget (finding 8) --------------------------

STAT = b"4242 (a (tricky) name) S 4000 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 777\n"


def test_a_sandbox_is_its_pid_namespace_when_that_is_not_the_brokers(proc: Path) -> None:
    fake_process(proc, "10", ns={"pid": "pid:[4026532999]"})
    assert sandbox_id(10, proc=proc, stat=STAT) == "pid namespace pid:[4026532999]"


def test_otherwise_a_sandbox_is_its_session(proc: Path) -> None:
    fake_process(proc, "10", no_new_privs="1")
    assert sandbox_id(10, proc=proc, stat=STAT) == "session 4242"
    (proc / "10" / "stat").write_bytes(STAT.replace(b" 4242 4242 0", b" 4242 17 0", 1))
    assert sandbox_id(10, proc=proc) == "session 17"  # read when not handed in


def test_a_sandbox_that_cannot_be_told_shares_one_key(proc: Path) -> None:
    fake_process(proc, "10", ns={"pid": None})
    assert sandbox_id(10, proc=proc) == "unidentified peers"
    assert sandbox_id(10, proc=proc, stat=b"10 (x) S 1") == "unidentified peers"
    assert sandbox_id(99, proc=proc) == "unidentified peers"


def test_a_real_sandboxed_child_is_keyed_by_its_session(
    children: list[subprocess.Popen[bytes]],
) -> None:
    child = _started([sys.executable, "-c", WAIT_FOR_STDIN], preexec_fn=_no_new_privs)
    children.append(child)
    peer = describe_peer(child.pid, os.getuid(), os.getgid(), "h")
    assert peer.sandbox == f"session {os.getsid(child.pid)}"
    plain = describe_peer(os.getpid(), os.getuid(), os.getgid(), "h")
    assert (plain.sandboxed, plain.sandbox) == (False, "")
