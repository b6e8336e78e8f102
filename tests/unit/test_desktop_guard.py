"""tests/conftest.py: the suite cannot reach the desktop of whoever runs it.

An inner pytest run (a subprocess, with a copy of the real conftest) plays a
suite started from a desktop session: its "session bus" and "X display" are
real listening sockets in a temporary directory.  A test that connects to
one must fail the run; the environment the tests see must not name them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

INNER = """
import os, socket

def test_env_names_no_desktop_of_the_caller():
    assert "DISPLAY" not in os.environ
    assert "WAYLAND_DISPLAY" not in os.environ
    assert os.environ["DBUS_SESSION_BUS_ADDRESS"] != "unix:path=" + BUS
    assert os.environ["XDG_RUNTIME_DIR"] != RUNTIME

def test_connecting_to_the_callers_bus():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(BUS)
    finally:
        s.close()
"""


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[dict[str, str]]:
    runtime = tmp_path / "run"
    runtime.mkdir()
    bus = socket.socket(socket.AF_UNIX)
    bus.bind(str(runtime / "bus"))
    bus.listen()
    try:
        yield {"bus": str(runtime / "bus"), "runtime": str(runtime)}
    finally:
        bus.close()


def run_inner(tmp_path: Path, desktop: dict[str, str], with_guard: bool) -> str:
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    if with_guard:
        shutil.copy(CONFTEST, suite / "tests" / "conftest.py")
    body = f"BUS = {desktop['bus']!r}\nRUNTIME = {desktop['runtime']!r}\n" + INNER
    (suite / "tests" / "test_inner.py").write_text(body)
    env = {
        **os.environ,
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={desktop['bus']}",
        "XDG_RUNTIME_DIR": desktop["runtime"],
        "DISPLAY": ":97",
        "WAYLAND_DISPLAY": "wayland-9",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return f"rc={done.returncode}\n{done.stdout}{done.stderr}"


def test_a_test_reaching_the_callers_bus_fails_the_suite(
    tmp_path: Path, desktop: dict[str, str]
) -> None:
    report = run_inner(tmp_path, desktop, with_guard=True)
    assert report.startswith("rc=1"), report
    assert "1 passed" in report  # the environment test
    assert "reached the caller's desktop" in report
    assert "test_connecting_to_the_callers_bus" in report


def test_without_the_guard_the_inner_suite_would_pass(
    tmp_path: Path, desktop: dict[str, str]
) -> None:
    # The inner suite is a real probe: unguarded, it reaches the bus unnoticed.
    report = run_inner(tmp_path, desktop, with_guard=False)
    assert "test_connecting_to_the_callers_bus PASSED" in report or "1 passed" in report, report
