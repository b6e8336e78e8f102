"""End-to-end harness: the real ``ollie-tray`` on a real desktop stack, driven like a person.

The fixtures (``conftest.py``) build on this module.  Session-scoped
(``desktop``: started once, stopped by PID at the end), from
``tests/integration/desktop_session.py``:

- a private D-Bus session bus without service auto-activation,
- Xvfb (the screen everything is shown on) with ``trayer`` as the system tray,
- dunst as the notification server (on its own Xvfb, as that harness runs it;
  its screen is photographed too),
- gnome-keyring (unlocked) as the Secret Service.

Module-scoped, for the sudo scenarios only (``test_sudo.py``): the test
user with a sudoers drop-in (``tests/integration/sudo_user.py``).

Per test, the :class:`E2E` fixture ``e2e``: fresh ``ollie-tray`` processes
(``--demo`` or on copies of the demo tools) with their own ``HOME``,
``XDG_RUNTIME_DIR`` (0700) under ``tmp_path``, each
waited for (the "listening on" line, the socket, a ping) and stopped by PID;
agent-side ``ollie-tools call`` / ``ollie-elevate`` subprocesses; screenshots
into ``$OLLIE_TEST_ARTIFACTS`` (``<test>-<name>.png``) when it is set.  Every
process started for a test carries a marker in its environment and runs in a
session of its own; after the test none may be left (checked, killed,
reported as an error).

Missing programs or Qt libraries skip with the exact ``apt-get install -y``
command; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
for _entry in (HERE, HERE.parent / "integration"):
    if str(_entry) not in sys.path:
        sys.path.insert(0, str(_entry))

import desktop_session as ds  # noqa: E402
import e2e_driver as drv  # noqa: E402

from ollie_tray.dialogs.real_input import ACCEPT_SYNTHETIC_ENV, ACCEPT_SYNTHETIC_VALUE  # noqa: E402
from registry_core.broker.wire.client import broker_alive  # noqa: E402

REPO = HERE.parents[1]
VENV_BIN = Path(sys.executable).parent
EXAMPLES = REPO / "resources" / "examples"
ARTIFACTS_VAR = "OLLIE_TEST_ARTIFACTS"

PROGRAMS = {
    **ds.PACKAGES,
    "xwininfo": "x11-utils",
    "xprop": "x11-utils",
    "desktop-file-validate": "desktop-file-utils",
}
NEEDED = (
    "Xvfb",
    "trayer",
    "xdotool",
    "xwininfo",
    "xprop",
    "import",
    "dbus-daemon",
    "dbus-send",
    "dunst",
    "dunstctl",
    "gnome-keyring-daemon",
    "desktop-file-validate",
)
QT_XCB_PACKAGES = [
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-keysyms1",
    "libxcb-image0",
    "libxcb-render-util0",
    "libxcb-shape0",
    "libxcb-randr0",
    "libxcb-xkb1",
    "libxcb-xfixes0",
    "libxcb-sync1",
    "libxcb-shm0",
    "libx11-xcb1",
    "libxkbcommon-x11-0",
    "libegl1",
    "libgl1",
    "libfontconfig1",
    "libglib2.0-0",
    "libdbus-1-3",
    "fonts-dejavu-core",
]


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run the end-to-end tests)")
    pytest.skip(message)


def _missing_debian_packages(packages: tuple[str, ...] | list[str]) -> list[str]:
    if shutil.which("dpkg-query") is None:
        return []  # not Debian: let Qt say what is missing
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Status}\\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {
        line.split()[0].split(":")[0]
        for line in result.stdout.splitlines()
        if line.endswith("install ok installed")
    }
    return [p for p in packages if p not in installed]


def require_desktop() -> None:
    """Skip (locally) or fail (CI) unless every program and Qt library is installed."""
    missing = [p for p in NEEDED if shutil.which(p) is None]
    packages = sorted({PROGRAMS.get(p, p) for p in missing})
    packages += _missing_debian_packages(QT_XCB_PACKAGES)
    if packages:
        _skip_or_fail(
            f"end-to-end tests need {', '.join(missing) or 'Qt xcb libraries'}; "
            f"install with: apt-get install -y {' '.join(packages)}"
        )


# --- session: the desktop -------------------------------------------------------------


@dataclass
class Desktop:
    env: dict[str, str]
    """Root's session bus (``DBUS_SESSION_BUS_ADDRESS``)."""
    display: str
    """The screen trays and dialogs appear on."""
    dunst_env: dict[str, str]
    """What the ``desktop_session.dunst_*`` helpers need."""
    base: Path
    """Logs of the session's programs."""


def trayer_panel(display: str) -> bool:
    """Whether trayer's panel window exists on ``display``."""
    result = subprocess.run(
        ["xwininfo", "-root", "-tree"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": display},
        capture_output=True,
        text=True,
        check=False,
    )
    return '"panel": ("panel" "trayer")' in result.stdout


# --- per test -------------------------------------------------------------------------


def _artifacts() -> Path | None:
    value = os.environ.get(ARTIFACTS_VAR)
    return Path(value) if value else None


def copy_demo_tools(dest: Path) -> str:
    """Copies of the bundled demo tool directories; the ``OLLIE_TOOLS_PATH`` of them."""
    dirs = []
    for name in ("tools", "broken", "shadowed"):
        shutil.copytree(EXAMPLES / name, dest / name)
        dirs.append(str(dest / name))
    return ":".join(dirs)


class E2E:
    """One test's trays, agent calls, screenshots and leak check (fixture ``e2e``)."""

    def __init__(self, desktop: Desktop, tmp_path: Path, test_name: str) -> None:
        self.desktop = desktop
        self.tmp = tmp_path
        self.marker = uuid.uuid4().hex
        prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name) + "-"
        shots = _artifacts()
        self.display = drv.Display(desktop.display, shots, prefix)
        self.dunst_display = drv.Display(desktop.dunst_env["DISPLAY"], shots, prefix + "dunst-")
        self.trays: list[drv.TrayProcess] = []
        self.calls: list[drv.AgentCall] = []
        self.sessions: set[int] = set()
        self._count = 0

    # --- the tray -----------------------------------------------------------------

    def _next_dir(self, name: str) -> Path:
        self._count += 1
        path = self.tmp / f"{name}{self._count}"
        path.mkdir()
        return path

    def start_tray(
        self,
        *,
        demo: bool = True,
        tools_path: str | None = None,
        countdown: int | None = None,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
        user: Any = None,
        cwd: Path | None = None,
        state_dir: Path | None = None,
        wait_icon: bool = False,
        synthetic_input: bool = True,
    ) -> drv.TrayProcess:
        """Start ``ollie-tray`` and wait until its socket answers.

        As root by default, with ``HOME``, ``XDG_RUNTIME_DIR`` (0700) and
        ``OLLIE_DEMO_HOME`` in a fresh directory.  With ``user`` (a
        ``SudoUser``), ``argv``, ``env``, ``cwd`` and ``state_dir`` (for the test
        state file) are the user's (see test_sudo.py)."""
        root = self._next_dir("tray")
        if state_dir is None:
            state_dir = root / "report"
            state_dir.mkdir()
        if user is None:
            home, runtime = root / "home", root / "run"
            home.mkdir()
            runtime.mkdir(mode=0o700)
            tray_env = {
                "PATH": f"{VENV_BIN}:/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "HOME": str(home),
                "XDG_RUNTIME_DIR": str(runtime),
                "TMPDIR": str(root),
                "DBUS_SESSION_BUS_ADDRESS": self.desktop.env["DBUS_SESSION_BUS_ADDRESS"],
            }
            if demo:
                # Not a first start: the Tool Browser must open only when a test asks.
                welcomed = home / ".local" / "state" / "ollie" / "welcome-shown"
                welcomed.parent.mkdir(parents=True, exist_ok=True)
                welcomed.touch()
            else:
                tray_env["XDG_CONFIG_HOME"] = str(home / ".config")
                tray_env["XDG_STATE_HOME"] = str(home / ".local" / "state")
                tray_env["OLLIE_TOOLS_PATH"] = tools_path or copy_demo_tools(root)
            tray_env.update(env or {})
            argv = [str(VENV_BIN / "ollie-tray")]
            if demo:
                argv.append("--demo")
        else:
            assert argv is not None and env is not None and cwd is not None
            tray_env = dict(env)
        if countdown is not None:
            argv = [*argv, "--countdown", str(countdown)]
        tray_env["DISPLAY"] = self.desktop.display
        tray_env[drv.MARKER_VAR] = self.marker
        if synthetic_input:
            tray_env[ACCEPT_SYNTHETIC_ENV] = ACCEPT_SYNTHETIC_VALUE
        else:
            tray_env.pop(ACCEPT_SYNTHETIC_ENV, None)
        tray_env["OLLIE_TRAY_TEST_STATE_FILE"] = str(state_dir / "state.json")
        log = root / "tray.log"
        ids: dict[str, Any] = {}
        if user is not None:
            ids = {"user": user.uid, "group": user.gid, "extra_groups": user.groups}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                env=tray_env,
                cwd=cwd or root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **ids,
            )
        self.sessions.add(proc.pid)
        socket_path = Path(
            tray_env.get("OLLIE_ELEVATE_SOCKET")
            or Path(tray_env["XDG_RUNTIME_DIR"]) / "ollie" / "elevate.sock"
        )
        tray = drv.TrayProcess(
            proc, tray_env, log, state_dir / "state.json", socket_path, self.display
        )
        self.trays.append(tray)

        def ready() -> bool:
            if proc.poll() is not None:
                raise drv.E2EError(f"ollie-tray exited ({proc.returncode}):\n{tray.log_text()}")
            if "listening on" not in tray.log_text() or not socket_path.exists():
                return False
            return user is not None or broker_alive(socket_path, timeout=1.0)

        drv.wait_for(ready, "ollie-tray listening on its socket", timeout=30)
        tray.wait_state(lambda s: True, "the first state report")
        if wait_icon:
            tray.wait_icon()
        return tray

    # --- the agent ----------------------------------------------------------------

    def agent_env(self, tray: drv.TrayProcess, tools_path: str | None = None) -> dict[str, str]:
        """An agent's environment reaching ``tray``: same HOME, the tray's socket."""
        tools = tools_path or tray.env.get("OLLIE_TOOLS_PATH", "").split(":")[0]
        agent_tmp = Path(tray.env["HOME"]).parent / "agent-tmp"
        agent_tmp.mkdir(exist_ok=True)
        return {
            "PATH": f"{VENV_BIN}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": tray.env["HOME"],
            "XDG_RUNTIME_DIR": tray.env["XDG_RUNTIME_DIR"],
            "OLLIE_ELEVATE_SOCKET": str(tray.socket),
            "OLLIE_TOOLS_PATH": tools or str(EXAMPLES / "tools"),
            "TMPDIR": str(agent_tmp),
        }

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path | None = None,
        user: Any = None,
    ) -> drv.AgentCall:
        """Run an agent-side command (its output captured) in a session of its own."""
        env = {**env, drv.MARKER_VAR: self.marker}
        ids: dict[str, Any] = {}
        if user is not None:
            ids = {"user": user.uid, "group": user.gid, "extra_groups": user.groups}
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd or env.get("HOME") or self.tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            **ids,
        )
        self.sessions.add(proc.pid)
        call = drv.AgentCall(proc, argv, started)
        self.calls.append(call)
        return call

    def start_call(
        self,
        tool: str,
        env: dict[str, str],
        args: str | None = None,
        cwd: Path | None = None,
        user: Any = None,
        program: Path | None = None,
    ) -> drv.AgentCall:
        """``ollie-tools call <tool> [--args JSON]`` as an agent would run it."""
        argv = [str(program or VENV_BIN / "ollie-tools"), "call", tool]
        if args is not None:
            argv += ["--args", args]
        return self.start(argv, env, cwd, user)

    # --- pictures -----------------------------------------------------------------

    def shot(self, name: str, window: int | None = None) -> None:
        """A screenshot of the screen the tray's windows are on (once ``window`` is painted)."""
        if self.display.shots is None:
            return
        if window is not None:
            self.display.wait_painted(window)
        self.display.screenshot(name)

    def shot_notifications(self, name: str) -> None:
        """A screenshot of dunst's screen (its own Xvfb)."""
        self.dunst_display.screenshot(name)

    # --- cleanup ------------------------------------------------------------------

    def close(self) -> list[str]:
        """Stop everything by PID; return what was left running (and is now killed)."""
        for call in self.calls:
            call.stop()
            for stream in (call.proc.stdout, call.proc.stderr):
                if stream is not None:
                    stream.close()
        for tray in self.trays:
            tray.stop()
        return drv.wait_for_quiet(self.marker, self.sessions)
