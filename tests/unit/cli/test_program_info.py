"""Every console script answers ``--version`` and ``--help`` and never acts on them.

Each program runs as a real process (the installed entry point) with the broker
socket pointing at a listening socket of the test's: ``--help`` and
``--version`` must exit 0 with their text and leave that socket untouched.
A real request (``ollie-elevate -- --help``: code, not an option) is shown to
reach it, so the check can fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.version import version

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
_project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
PROGRAMS = sorted([*_project["scripts"], *_project["gui-scripts"]])


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[socket.socket, dict[str, str]]]:
    path = tmp_path / "elevate.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.setblocking(False)
    env = {
        **os.environ,
        "OLLIE_ELEVATE_SOCKET": str(path),
        "OLLIE_ELEVATE_TIMEOUT": "2",
        "XDG_RUNTIME_DIR": str(tmp_path),
        "HOME": str(tmp_path),
        "DISPLAY": "",
        "WAYLAND_DISPLAY": "",
    }
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    yield listener, env
    listener.close()


def _connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _run(program: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / program), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_every_console_script_is_known() -> None:
    assert "ollie-tray" in PROGRAMS and "ollie-elevate" in PROGRAMS and len(PROGRAMS) == 7


@pytest.mark.parametrize("program", PROGRAMS)
def test_version_prints_the_distributions_version_and_touches_nothing(
    program: str, broker: tuple[socket.socket, dict[str, str]]
) -> None:
    listener, env = broker
    done = _run(program, "--version", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [program, "(Ollie", "Tray)", version()]
    assert not _connected(listener)


@pytest.mark.parametrize("program", PROGRAMS)
def test_help_prints_usage_and_touches_nothing(
    program: str, broker: tuple[socket.socket, dict[str, str]]
) -> None:
    listener, env = broker
    done = _run(program, "--help", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {program}")
    assert not _connected(listener)


def test_elevate_reads_options_only_before_the_code(
    broker: tuple[socket.socket, dict[str, str]],
) -> None:
    listener, env = broker
    assert _run("ollie-elevate", "--version", "--", "true", env=env).returncode == 0
    assert not _connected(listener)
    done = _run("ollie-elevate", "--", "--help", env=env)
    assert done.returncode == 77  # a request: the test's socket never answers it
    assert _connected(listener)


def test_askpass_takes_a_prompt_that_merely_contains_an_option(
    broker: tuple[socket.socket, dict[str, str]],
) -> None:
    _, env = broker
    done = _run("ollie-askpass", "[sudo] --help password: ", env=env)
    assert done.returncode == 1  # no grant in the environment: refused, no help
    assert "usage:" not in done.stdout
