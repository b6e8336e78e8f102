"""Real Wayland desktops for the end-to-end tests: headless sway with waybar, weston, KWin.

Everything runs as the ordinary test user of ``tests/integration/sudo_user.py``
(sway refuses root, and root hides permission bugs), on that user's own D-Bus
session (``e2e_user.user_session``), in directories of one test
(``sudo_user.UserDirs``):

- :func:`sway` runs ``sway`` with ``WLR_BACKENDS=headless WLR_RENDERER=pixman``
  on a 1280x800 output and waits for its Wayland and IPC sockets;
  :meth:`WaylandSession.tree` is ``swaymsg -t get_tree``.
- :func:`waybar` runs ``waybar`` with only its tray module: a real
  ``org.kde.StatusNotifierWatcher`` and host.  Started after the tray it is
  the "late watcher" case.
- :func:`weston` runs ``weston --backend=headless-backend.so --use-pixman``
  (``--debug`` so that ``weston-screenshooter`` may take pictures).
- :meth:`WaylandSession.probe` runs ``sni_probe.py`` as the user: it reads
  the watcher's items, our item's properties, the dbusmenu layout, clicks an
  item, and records menu signals (a separate process: the user's bus refuses
  other users).
- :meth:`WaylandSession.shot` keeps a ``grim`` screenshot under
  ``$OLLIE_TEST_ARTIFACTS``.

Every process runs in its own session and is stopped by PID when the block
ends; every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import desktop_session as ds
from e2e_driver import E2EError, wait_for
from e2e_user import prepare_tray_runtime, run_as, user_session
from sudo_user import SudoUser, UserDirs

from ollie_tray.control import bus_name

HERE = Path(__file__).resolve().parent
ARTIFACTS_VAR = "OLLIE_TEST_ARTIFACTS"
PROGRAMS = {
    "sway": "sway",
    "swaymsg": "sway",
    "waybar": "waybar",
    "grim": "grim",
    "wtype": "wtype",
    "weston": "weston",
    "weston-screenshooter": "weston",
    "kwin_wayland": "kwin-wayland",
}
ds.PACKAGES.update(PROGRAMS)
SCREEN = (1280, 800)

SWAY_CONFIG = """\
output HEADLESS-1 resolution {w}x{h}
default_border normal
focus_on_window_activation focus
"""
WAYBAR_CONFIG = {
    "layer": "top",
    "position": "top",
    "height": 26,
    "modules-left": [],
    "modules-center": [],
    "modules-right": ["tray"],
    "tray": {"icon-size": 20, "spacing": 4},
}


def require_wayland(*programs: str) -> None:
    ds.require(*programs)


@dataclass
class WaylandSession:
    """One test's user session: directories, environment, logs, started processes."""

    user: SudoUser
    dirs: UserDirs
    env: dict[str, str]
    logs: Path
    test_name: str
    tray_bin: Path
    stack: ExitStack = field(default_factory=ExitStack)

    # -- running things as the user --------------------------------------------------------

    def popen(self, name: str, argv: list[str], **extra: str) -> subprocess.Popen[bytes]:
        log = self.logs / f"{name}.log"
        env = {**self.env, **extra}
        return self.stack.enter_context(
            ds.running(
                argv,
                env,
                log,
                user=self.user.uid,
                group=self.user.gid,
                extra_groups=self.user.groups,
                cwd=str(self.dirs.root),
            )
        )

    def run(self, argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
        return run_as(self.user, argv, {**self.env, **extra}, cwd=self.dirs.root)

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- the tray and the agent ------------------------------------------------------------

    def start_tray(self, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        # Not a first start: the welcome Tool Browser opens only when a test asks.
        state = Path(self.env.get("XDG_STATE_HOME") or Path(self.user.home) / ".local" / "state")
        welcomed = state / "ollie" / "welcome-shown"
        if not welcomed.exists():
            welcomed.parent.mkdir(parents=True, exist_ok=True)
            welcomed.touch()
            # Hand over only what lies inside this test's own directories: walking
            # further up once chowned /tmp and / to the test account.
            owned = (Path(self.user.home), self.dirs.root)
            for path in (welcomed, welcomed.parent, *welcomed.parent.parents):
                if path in owned or not any(path.is_relative_to(top) for top in owned):
                    break
                os.chown(path, self.user.uid, self.user.gid)
        env = {"QT_QPA_PLATFORM": "wayland", **extra}
        proc = self.popen("tray", [str(self.tray_bin), "--demo", *args], **env)
        socket = Path(self.env["XDG_RUNTIME_DIR"]) / "ollie" / "elevate.sock"
        wait_for(
            lambda: proc.poll() is not None or "listening on" in self.log("tray"),
            "ollie-tray listening",
            timeout=30,
        )
        if proc.poll() is not None:
            raise E2EError(f"ollie-tray exited ({proc.returncode}):\n{self.log('tray')}")
        assert socket.exists()
        # Up: notifications connected, icon exported, the launcher's name owned.
        name = bus_name(socket)
        wait_for(
            lambda: proc.poll() is not None or ds.owned(self.run(ds.name_has_owner_argv(name))),
            f"ollie-tray owning {name}",
            timeout=30,
        )
        return proc

    def demo_tools(self) -> str:
        code = "from registry_core.paths import resources_dir; print(resources_dir())"
        out = self.run([str(self.user.python), "-c", code])
        return str(Path(out.stdout.strip()) / "examples" / "tools")

    def start_call(self, tool: str) -> subprocess.Popen[bytes]:
        socket = Path(self.env["XDG_RUNTIME_DIR"]) / "ollie" / "elevate.sock"
        return self.popen(
            "agent",
            [str(self.user.bin / "ollie-tools"), "call", tool],
            OLLIE_ELEVATE_SOCKET=str(socket),
            OLLIE_TOOLS_PATH=self.demo_tools(),
        )

    # -- the StatusNotifierItem side ------------------------------------------------------

    def probe(self, *args: str) -> Any:
        script = self.dirs.root / "sni_probe.py"
        if not script.exists():
            shutil.copyfile(HERE / "sni_probe.py", script)
            script.chmod(0o644)
        result = self.run([str(self.user.python), str(script), *args])
        if result.returncode != 0:
            raise E2EError(f"sni_probe {' '.join(args)} failed: {result.stderr}")
        return json.loads(result.stdout)

    def our_item(self) -> str | None:
        """The watcher's entry of our item (``bus name/path``), if registered."""
        try:
            items = self.probe("items")
        except E2EError:
            return None
        ours = [i for i in items if "StatusNotifierItem-" in i and self._is_ours(i)]
        return ours[0] if ours else None

    def _is_ours(self, item: str) -> bool:
        try:
            return bool(self.probe("props", item).get("Id") == "io.github.ollie_tray.OllieTray")
        except E2EError:
            return False

    def wait_item(self, predicate: Any, what: str, timeout: float = 20) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def check() -> bool:
            item = self.our_item()
            if item is None:
                return False
            props = self.probe("props", item)
            found.clear()
            found.update(props, item=item)
            return bool(predicate(props))

        try:
            wait_for(check, what, timeout=timeout)
        except E2EError as exc:
            raise E2EError(f"{exc}\nlast: {found}\n--- tray:\n{self.log('tray')[-3000:]}") from exc
        return found

    # -- the compositor ----------------------------------------------------------------------

    def tree(self) -> dict[str, Any]:
        out = self.run(["swaymsg", "-t", "get_tree", "-r"])
        if out.returncode != 0:
            raise E2EError(f"swaymsg get_tree: {out.stderr}")
        return dict(json.loads(out.stdout))

    def toplevels(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []

        def walk(node: dict[str, Any]) -> None:
            if node.get("type") in ("con", "floating_con") and node.get("pid"):
                found.append(node)
            for key in ("nodes", "floating_nodes"):
                for child in node.get(key, []):
                    walk(child)

        walk(self.tree())
        return found

    def shot(self, name: str, argv: list[str] | None = None) -> Path | None:
        """A screenshot into ``$OLLIE_TEST_ARTIFACTS`` (grim unless ``argv`` says otherwise)."""
        target_dir = os.environ.get(ARTIFACTS_VAR)
        if not target_dir:
            return None
        own = self.dirs.root / f"{name}.png"
        result = self.run(argv or ["grim", str(own)])
        # weston-screenshooter names its own file in the working directory.
        taken = sorted(self.dirs.root.glob("wayland-screenshot*.png"))
        if not own.exists() and taken:
            taken[-1].rename(own)
        if result.returncode != 0 or not own.exists():
            raise E2EError(f"screenshot {name} failed: {result.stderr}")
        target = Path(target_dir) / f"{self.test_name}-{name}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(own, target)
        return target


def _wayland_socket(runtime: Path, before: set[str]) -> str | None:
    for path in runtime.glob("wayland-*"):
        if path.name not in before and not path.name.endswith(".lock"):
            return path.name
    return None


@contextmanager
def session(user: SudoUser, name: str, test_name: str, logs: Path) -> Iterator[WaylandSession]:
    dirs = UserDirs(user, name)
    logs.mkdir(parents=True, exist_ok=True)
    tray_bin = prepare_tray_runtime(user)
    with user_session(user, dirs.root, dirs.env(), logs) as env:
        env = dict(env)
        env["PATH"] = f"{user.bin}:/usr/bin:/bin"
        env.pop("DISPLAY", None)
        ws = WaylandSession(user, dirs, env, logs, test_name, tray_bin)
        with ws.stack:
            yield ws


def sway(ws: WaylandSession) -> str:
    """Start headless sway; returns WAYLAND_DISPLAY (also set in ``ws.env``, with SWAYSOCK)."""
    config = ws.dirs.root / "sway.conf"
    config.write_text(SWAY_CONFIG.format(w=SCREEN[0], h=SCREEN[1]))
    config.chmod(0o644)
    runtime = Path(ws.env["XDG_RUNTIME_DIR"])
    before = {p.name for p in runtime.glob("wayland-*")}
    ipc = runtime / "sway-ipc.sock"
    proc = ws.popen(
        "sway",
        ["sway", "-c", str(config)],
        WLR_BACKENDS="headless",
        WLR_RENDERER="pixman",
        WLR_LIBINPUT_NO_DEVICES="1",
        WLR_HEADLESS_OUTPUTS="1",
        SWAYSOCK=str(ipc),
    )
    display: list[str] = []

    def up() -> bool:
        if proc.poll() is not None:
            raise E2EError(f"sway exited ({proc.returncode}):\n{ws.log('sway')}")
        name = _wayland_socket(runtime, before)
        if name and ipc.exists():
            display.append(name)
            return True
        return False

    wait_for(up, "sway's Wayland and IPC sockets")
    ws.env["WAYLAND_DISPLAY"] = display[0]
    ws.env["SWAYSOCK"] = str(ipc)
    wait_for(lambda: ws.run(["swaymsg", "-t", "get_outputs"]).returncode == 0, "swaymsg")
    return display[0]


def waybar(ws: WaylandSession) -> subprocess.Popen[bytes]:
    """waybar with its tray: the StatusNotifierWatcher and host (as the user)."""
    config = ws.dirs.root / "waybar.json"
    config.write_text(json.dumps(WAYBAR_CONFIG))
    style = ws.dirs.root / "waybar.css"
    style.write_text("* { font-family: DejaVu Sans; font-size: 12px; }\n")
    for path in (config, style):
        path.chmod(0o644)
    proc = ws.popen("waybar", ["waybar", "-c", str(config), "-s", str(style)])
    wait_for(
        lambda: (
            proc.poll() is not None
            or ds.owned(ws.run(ds.name_has_owner_argv("org.kde.StatusNotifierWatcher")))
        ),
        "waybar owning org.kde.StatusNotifierWatcher",
    )
    if proc.poll() is not None:
        raise E2EError(f"waybar exited ({proc.returncode}):\n{ws.log('waybar')}")
    return proc


def weston(ws: WaylandSession) -> str:
    runtime = Path(ws.env["XDG_RUNTIME_DIR"])
    socket = "wayland-ollie-weston"
    proc = ws.popen(
        "weston",
        [
            "weston",
            "--backend=headless-backend.so",
            "--use-pixman",
            "--debug",
            f"--socket={socket}",
            f"--width={SCREEN[0]}",
            f"--height={SCREEN[1]}",
            "--idle-time=0",
        ],
    )

    def up() -> bool:
        if proc.poll() is not None:
            raise E2EError(f"weston exited ({proc.returncode}):\n{ws.log('weston')}")
        return (runtime / socket).exists()

    wait_for(up, "weston's Wayland socket")
    ws.env["WAYLAND_DISPLAY"] = socket
    return socket
