"""The suite never touches the desktop of whoever runs it.

Tests that need D-Bus, X11 or Wayland start their own (``dbus-run-session``
copies, Xvfb, headless compositors) and pass the address explicitly.  So,
before any test module is imported:

- ``DBUS_SESSION_BUS_ADDRESS`` points at a socket that does not exist (unset,
  some libraries fall back to ``$XDG_RUNTIME_DIR/bus`` or X11 autolaunch),
  ``DISPLAY`` and ``WAYLAND_DISPLAY`` are removed, and ``XDG_RUNTIME_DIR``
  is a fresh private directory: child processes inherit none of the caller's;
- an audit hook watches every ``connect()`` of this process: one to the
  caller's session bus, X display or Wayland socket is refused (the test
  errors there) and recorded, and the suite fails at the end naming the test.

Child processes are covered by the environment only: they no longer learn
where the caller's desktop is.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CALLER_VARS = ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR")
_NO_BUS = "unix:path=/nonexistent/ollie-tests-have-no-session-bus"


def desktop_sockets(env: dict[str, str]) -> set[str]:
    """The socket addresses (paths; abstract ones start with NUL) of ``env``'s desktop."""
    found: set[str] = set()
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    for part in env.get("DBUS_SESSION_BUS_ADDRESS", "").split(";"):
        for key, value in re.findall(r"(path|abstract)=([^,]+)", part):
            found.add(value if key == "path" else "\0" + value)
    found.add(str(Path(runtime) / "bus"))  # where sd-bus and others look without the variable
    display = re.fullmatch(r"[^:]*:(\d+)(?:\.\d+)?", env.get("DISPLAY", ""))
    if display:
        found.add(f"/tmp/.X11-unix/X{display[1]}")
        found.add(f"\0/tmp/.X11-unix/X{display[1]}")
    wayland = env.get("WAYLAND_DISPLAY")
    if wayland:
        found.add(wayland if wayland.startswith("/") else str(Path(runtime) / wayland))
    return found


class DesktopGuard:
    """Refuses and records connections of this process to the caller's desktop sockets."""

    def __init__(self, sockets: set[str]) -> None:
        self.sockets = sockets
        self.current = "(collection)"
        self.hits: list[str] = []

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "socket.connect" or len(args) < 2:
            return
        address = args[1]
        if isinstance(address, bytes):
            address = address.decode("utf-8", "surrogateescape")
        if isinstance(address, str) and address in self.sockets:
            self.hits.append(f"{self.current}: connect({address!r})")
            raise PermissionError(f"tests must not reach the caller's desktop: {address!r}")


_private_runtime = tempfile.mkdtemp(prefix="ollie-tests-runtime-")
atexit.register(shutil.rmtree, _private_runtime, ignore_errors=True)


def _caller_env() -> dict[str, str]:
    """The caller's desktop variables, or none when this module runs a second time in
    one process (``make mutate``: mutmut calls ``pytest.main`` repeatedly): the
    variables are then already the suite's own, and the first import's hook still
    guards the caller's sockets."""
    if os.environ.get("DBUS_SESSION_BUS_ADDRESS") == _NO_BUS:
        return {}
    return dict(os.environ)


_guard = DesktopGuard(desktop_sockets(_caller_env()))
for _name in CALLER_VARS:
    os.environ.pop(_name, None)
os.environ["DBUS_SESSION_BUS_ADDRESS"] = _NO_BUS
os.environ["XDG_RUNTIME_DIR"] = _private_runtime
sys.addaudithook(_guard.hook)


_SYSTEM_OWNERS = ("/", "/tmp", "/usr")  # checked, never written


def _owners() -> list[tuple[str, int]]:
    return [(path, os.stat(path).st_uid) for path in _SYSTEM_OWNERS]


@pytest.fixture(autouse=True)
def _no_desktop_of_the_caller(request: pytest.FixtureRequest) -> Iterator[None]:
    _guard.current = request.node.nodeid
    before = len(_guard.hits)
    owners = _owners()
    yield
    hits = _guard.hits[before:]
    if hits:
        pytest.fail("reached the caller's desktop: " + "; ".join(hits), pytrace=False)
    if _owners() != owners:  # a harness handing "its" directories over went too far up
        changed = [f"{p}: uid {a} -> {b}" for (p, a), (_, b) in zip(owners, _owners(), strict=True)]
        pytest.fail("changed the owner of system directories: " + "; ".join(changed))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _guard.hits and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _guard.hits:
        terminalreporter.write_line("tests reached the caller's desktop:", red=True)
        for hit in _guard.hits:
            terminalreporter.write_line(f"  {hit}", red=True)


# --- running part of a test where file permissions apply ---------------------------------

NOBODY = 65534


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory an unprivileged child may use (``tmp_path`` is root's own, 0700)."""
    base = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
    made = Path(tempfile.mkdtemp(prefix="ollie-shared-", dir=base))
    if os.getuid() == 0:
        os.chown(made, NOBODY, NOBODY)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _run_unprivileged(action: Callable[[], None]) -> None:
    if os.getuid() != 0:
        action()
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged part failed"


@pytest.fixture
def unprivileged() -> Callable[[Callable[[], None]], None]:
    """Runs an action where permissions apply: here when not root, else in a forked
    child that gave up root (uid and gid nobody); the test fails when it raises."""
    return _run_unprivileged


@pytest.fixture(autouse=True)
def _no_logind_runtime_dir_of_the_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """In-process code never finds this machine's ``/run/user/<uid>``: whether a
    login session (or a test's systemd --user) made one must not change a test's
    paths.  tests/unit/test_paths_runtime.py points it at its own directory."""
    from registry_core import paths

    missing = tmp_path_factory.getbasetemp() / "no-run-user"
    monkeypatch.setattr(paths, "SYSTEM_RUNTIME_ROOT", str(missing))
