"""``ollie-elevate`` under ollie-core's kill, as an ordinary (non-root) user.

Root can signal and reap anything, which would hide a keeper that only
works with privileges.  Here the broker (``scripted_broker.py`` as a
program) and the plugin both run as the throw-away account of
``sudo_user.py``; the test (root) only starts them, plays ollie-core's
SIGKILL, and checks that no process of the code is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sudo_user
from plugin_harness import DEADLINE, SPAWNER, alive, read_to_eof, wait_all_gone, wait_for_file
from sudo_user import SudoUser, UserDirs

APPROVE = {"approved": True, "remember": "once"}


@pytest.fixture(scope="module")
def user() -> Iterator[SudoUser]:
    with sudo_user.throwaway() as created:
        yield created


@pytest.fixture
def dirs(user: SudoUser, request: pytest.FixtureRequest) -> UserDirs:
    made = UserDirs(user, f"e-{request.node.name[:40]}")
    session = made.root / "session"
    session.mkdir(mode=0o700)
    os.chown(session, user.uid, user.gid)
    return made


@pytest.fixture
def start_broker(dirs: UserDirs, tmp_path: Path) -> Iterator[Any]:
    with sudo_user.broker_starter(dirs, tmp_path) as start:
        yield start


def start_plugin(dirs: UserDirs, code: str) -> subprocess.Popen[bytes]:
    return dirs.user.popen(
        [str(dirs.user.bin / "ollie-elevate"), "--", code],
        dirs.env(),
        dirs.root / "session",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_sigkill_while_running_leaves_no_process_of_the_users_code(
    dirs: UserDirs, start_broker: Any
) -> None:
    broker = start_broker({"approvals": [APPROVE]})
    proc = start_plugin(dirs, SPAWNER)
    session = dirs.root / "session"
    try:
        wait_for_file(session / "started")
        pids = [int(line) for line in (session / "pids").read_text().split()]
        assert len(pids) == 4 and all(alive(pid) for pid in pids)
        assert [e["uid"] for e in broker.of_type("ready")] == [dirs.user.uid]
        proc.kill()
        out, _err = read_to_eof(proc)
        assert out == b"running\n"
        assert proc.wait(DEADLINE) == -signal.SIGKILL
        wait_all_gone(pids)
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_sigkill_while_the_person_decides_runs_nothing(dirs: UserDirs, start_broker: Any) -> None:
    broker = start_broker({"hold_approvals": True, "default": APPROVE})
    proc = start_plugin(dirs, "touch ran")
    try:
        asked = broker.wait_for(lambda e: e["type"] == "approval")
        assert 0 < asked["timeout"] <= 30
        proc.kill()
        read_to_eof(proc)
        broker.wait_for(lambda e: e["type"] == "cancelled" and e["id"] == asked["id"])
        broker.release()
        assert proc.wait(DEADLINE) == -signal.SIGKILL
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert not (dirs.root / "session" / "ran").exists()
