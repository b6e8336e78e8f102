"""The sudo scenarios' side: the tray and the agent as the ordinary test user.

CI runs as root, and sudo's credential gate only means something for an
ordinary user, so scenarios 5 and 6 run ``ollie-tray`` *and* the agent's
``ollie-tools call`` as ``ollie-sudo-test-<hex>`` (created by
``tests/integration/sudo_user.py``: a sudoers drop-in, a runtime venv on an
interpreter the user can execute, copies of the tools it may run as root).

Here we add what the tray needs on top of that runtime:

- :func:`prepare_tray_runtime`: an ``ollie-tray`` entry point in the user's
  venv, and a check that the user can import the Qt app.  When the
  repository is not readable by the user, a copy of the packages and
  ``resources/`` goes under the user's runtime (the repository is never
  chmod-ed).
- :func:`user_session`: the user's own D-Bus session (root's bus refuses
  another uid) with an unlocked gnome-keyring on it, both run as the user
  and stopped by PID.  The X display is shared: Xvfb runs without access
  control for local clients, which the test checks first.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import desktop_session as ds
from e2e_driver import DEADLINE, E2EError, stop_process, wait_for
from sudo_user import SudoUser

REPO = Path(__file__).resolve().parents[2]
PROBE = "import ollie_tray.app, PySide6.QtWidgets, qasync, dbus_fast, keyring, yaml"


def run_as(
    user: SudoUser, argv: list[str], env: Mapping[str, str], cwd: Path | str = "/", **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        user=user.uid,
        group=user.gid,
        extra_groups=user.groups,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE * 2,
        check=False,
        **kw,
    )


def popen_as(
    user: SudoUser, argv: list[str], env: Mapping[str, str], cwd: Path | str, **kw: Any
) -> subprocess.Popen[Any]:
    return subprocess.Popen(
        argv,
        user=user.uid,
        group=user.gid,
        extra_groups=user.groups,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        **kw,
    )


def _pth_file(user: SudoUser) -> Path:
    found = list((user.base / "venv").glob("lib/python*/site-packages/ollie_test_paths.pth"))
    if not found:
        raise E2EError(f"sudo_user left no ollie_test_paths.pth under {user.base / 'venv'}")
    return found[0]


def prepare_tray_runtime(user: SudoUser) -> Path:
    """``ollie-tray`` runnable by ``user``; returns its path."""
    tray = user.bin / "ollie-tray"
    original = (Path(sys.executable).parent / "ollie-tray").read_text().splitlines(keepends=True)
    tray.write_text(f"#!{user.python}\n" + "".join(original[1:]))
    os.chmod(tray, 0o755)
    probe = [str(user.python), "-c", PROBE]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/"}
    if run_as(user, probe, env).returncode == 0:
        return tray
    # The repository is not readable by the user: run copies of what the tray needs.
    src = user.base / "src"
    for name in ("registry_core", "ollie_tray", "resources", "desktop"):
        if not (src / name).exists():
            shutil.copytree(REPO / name, src / name)
    pth = _pth_file(user)
    lines = [line for line in pth.read_text().splitlines() if line != str(src)]
    pth.write_text("\n".join([str(src), *lines]) + "\n")
    for path in [src, *src.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    result = run_as(user, probe, env)
    if result.returncode != 0:
        raise E2EError(f"{user.name} cannot import the tray: {result.stderr}")
    return tray


def _first_line(proc: subprocess.Popen[bytes], what: str) -> str:
    assert proc.stdout is not None
    data = b""
    deadline = time.monotonic() + DEADLINE
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in data and time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            data += chunk
    if b"\n" not in data:
        raise E2EError(f"{what} printed no address")
    return data.split(b"\n", 1)[0].decode().strip()


def name_owned(user: SudoUser, env: Mapping[str, str], name: str) -> bool:
    return ds.owned(run_as(user, ds.name_has_owner_argv(name), env))


@contextmanager
def user_session(
    user: SudoUser, root: Path, env: Mapping[str, str], logs: Path, *, unlock: bool = True
) -> Iterator[dict[str, str]]:
    """A D-Bus session bus and an unlocked gnome-keyring, both as ``user``.

    ``root`` is a directory of the user's; ``env`` its HOME/XDG environment.
    With ``unlock=False`` the keyring starts without a login collection, as on a
    desktop that never used one: any use of it would need a ``Prompt``
    ("choose a password for the new keyring").
    Yields ``env`` plus ``DBUS_SESSION_BUS_ADDRESS``."""
    bus_dir = root / "bus"
    bus_dir.mkdir(mode=0o755)
    (bus_dir / "dbus").mkdir(mode=0o700)
    os.chown(bus_dir / "dbus", user.uid, user.gid)
    config = ds.session_config(bus_dir)
    config.chmod(0o644)
    out = dict(env)
    with ExitStack() as stack:
        with open(logs / "user-dbus.log", "wb") as log:
            bus = popen_as(
                user,
                [
                    "dbus-daemon",
                    f"--config-file={config}",
                    "--nofork",
                    "--nopidfile",
                    "--print-address=1",
                ],
                out,
                root,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        stack.callback(stop_process, bus)
        assert bus.stdout is not None
        stack.callback(bus.stdout.close)
        out["DBUS_SESSION_BUS_ADDRESS"] = _first_line(bus, "the user's dbus-daemon")
        data = Path(out["HOME"]) / ".local" / "share"
        out.setdefault("XDG_DATA_HOME", str(data))
        with open(logs / "user-keyring.log", "wb") as log:
            keyring = popen_as(
                user,
                [
                    "gnome-keyring-daemon",
                    "--foreground",
                    *(["--unlock"] if unlock else []),
                    "--components=secrets",
                ],
                out,
                root,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
            )
        stack.callback(stop_process, keyring)
        assert keyring.stdin is not None
        if unlock:
            keyring.stdin.write(b"e2e-keyring-password")
        keyring.stdin.close()
        wait_for(
            lambda: keyring.poll() is not None or name_owned(user, out, ds.SECRETS),
            "gnome-keyring owning org.freedesktop.secrets as the user",
        )
        if keyring.poll() is not None:
            raise E2EError(f"gnome-keyring exited: {(logs / 'user-keyring.log').read_text()}")
        yield out
