"""``ollie-askpass`` writes to stdout (the pipe sudo reads as the password) only a password.

Cancel, refusal, a broken or silent broker: nothing on stdout, status 1, a
reason on stderr.  The
program runs as a real process against a scripted socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ASKPASS = "from registry_core.cli.askpass import main_entry; main_entry()"


@contextlib.contextmanager
def scripted(path: Path, reply: dict[str, Any] | None) -> Iterator[None]:
    """Answer pings, then the askpass on ``path`` with ``reply`` (``None``: close instead)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(30)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    request = json.loads(line)
                    if request["op"] == "ping":  # askpass pings first
                        answer: dict[str, Any] = {"v": 1, "id": request["id"], "op": "pong"}
                    elif reply is None:
                        return
                    else:
                        answer = {"v": 1, "id": request["id"], **reply}
                    stream.write(json.dumps(answer).encode() + b"\n")
                    stream.flush()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield
    finally:
        server.close()
        worker.join(10)


def run_askpass(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OLLIE_ELEVATE_SOCKET": str(path), "OLLIE_GRANT": "g" * 32}
    return subprocess.run(
        [sys.executable, "-c", ASKPASS, "[sudo] password for me: "],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


DENY = {"op": "decision", "decision": "deny", "by": "user", "remember": None, "grant": None}


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({**DENY, "reason": "password entry cancelled"}, "password entry cancelled"),
        ({**DENY, "reason": "no password within 60 s", "by": "timeout"}, "no password within"),
        ({"op": "error", "code": "no_grant", "message": "unknown grant"}, "no_grant"),
        ({"op": "ack"}, ""),
        (None, "closed the connection"),
    ],
)
def test_nothing_but_a_password_reaches_stdout(
    tmp_path: Path, reply: dict[str, Any] | None, says: str
) -> None:
    path = tmp_path / "broker.sock"
    with scripted(path, reply):
        done = run_askpass(path)
    assert done.stdout == ""
    assert done.returncode == 1
    assert says in done.stderr


def test_a_password_reply_is_written_with_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "broker.sock"
    with scripted(path, {"op": "password", "password": "hunter2"}):
        done = run_askpass(path)
    assert (done.returncode, done.stdout) == (0, "hunter2\n")
