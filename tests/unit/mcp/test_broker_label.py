"""Progress names the broker that answers: the tray, ollie-broker, or the socket."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.broker.wire import client
from registry_core.broker.wire.client import broker_label, program_of


def _proc(tmp_path: Path, pid: int, *argv: str) -> Path:
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return proc


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (("/usr/bin/python3", "/home/me/.local/bin/ollie-tray", "--demo"), "ollie-tray"),
        (("/opt/venv/bin/ollie-broker", "--front-end", "none"), "ollie-broker"),
        (("/usr/bin/python3", "-m", "ollie_tray"), "ollie-tray"),
        (("/usr/sbin/sshd", "-D"), None),
        (("/usr/bin/python3", "x.py", "ollie-tray"), None),  # an argument is not the program
    ],
)
def test_program_of_reads_the_command_line(
    tmp_path: Path, argv: tuple[str, ...], program: str | None
) -> None:
    assert program_of(42, _proc(tmp_path, 42, *argv)) == program


def test_program_of_a_gone_process_is_unknown(tmp_path: Path) -> None:
    assert program_of(42, tmp_path) is None


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "elevate.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    yield path
    server.close()


def test_the_answering_process_is_named(listening: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def fake_program_of(pid: int, proc: Path = Path("/proc")) -> str | None:
        asked.append(pid)
        return "ollie-tray"

    monkeypatch.setattr(client, "program_of", fake_program_of)
    assert broker_label(listening) == "Ollie Tray"
    assert asked == [os.getpid()]  # the peer of the socket: this test process serves it
    monkeypatch.setattr(client, "program_of", lambda pid, proc=Path("/proc"): "ollie-broker")
    assert broker_label(listening) == "ollie-broker"


def test_another_program_is_named_by_its_socket(listening: Path) -> None:
    assert broker_label(listening) == f"the broker on {listening}"  # pytest is no broker


def test_nothing_listening_is_named_by_the_socket(tmp_path: Path) -> None:
    path = tmp_path / "none.sock"
    assert broker_label(path, timeout=0.5) == f"the broker on {path}"
