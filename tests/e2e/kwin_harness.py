"""KWin for the end-to-end tests: ``kwin_wayland --virtual``, asked through its own scripting.

Runs in a :class:`wayland_harness.WaylandSession` (the test user, that user's
D-Bus session, directories of one test):

- :func:`kwin` starts ``kwin_wayland --virtual`` on a 1280x800 output with
  ``kwin_core`` debug messages on (KWin logs every xdg-activation decision:
  ``activating …`` or ``Refusing to activate … (provided token: …)``) and
  screenshots over D-Bus allowed (``KWIN_SCREENSHOT_NO_PERMISSION_CHECKS``).
  It runs a copy of the binary: Debian gives ``kwin_wayland`` the file
  capability ``cap_sys_resource``, and where the bounding set lacks it (a
  container) ``execve`` of the original fails with EPERM; the copy has no
  capabilities and KWin does not need them.
- :class:`KWin` asks KWin what it thinks, with KWin's own scripting
  (``org.kde.KWin /Scripting loadScript`` + ``start``): each query is a
  one-shot script that ``print()``s one JSON line, tagged with a fresh
  marker, into KWin's log, which the test reads.  Not a guess from pixels:
  which window is active, the stacking order, who demands attention.  It also
  activates a window (what a person's click into that window does).
- :class:`Notifier` drives ``kwin_notifier.py`` (run as the user): the
  person's other application (a Wayland window), their notification server
  and their panel (a StatusNotifierWatcher and host).

Every wait polls with a deadline; every process is stopped by PID.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import desktop_session as ds
from e2e_driver import E2EError, wait_for
from wayland_harness import ARTIFACTS_VAR, HERE, SCREEN, WaylandSession

SOCKET = "wayland-ollie-kwin"
SCRIPT_MARK = "ollie-kwin-query"

# One JSON line about every managed window.  KWin 5.27 names them clients
# (clientList, activeClient); KWin 6 windows (windowList, activeWindow).
_QUERY_JS = """\
(function () {
  var list = typeof workspace.windowList === "function"
    ? workspace.windowList() : workspace.clientList();
  var out = [];
  for (var i = 0; i < list.length; i++) {
    var w = list[i];
    out.push({
      caption: String(w.caption),
      resourceClass: String(w.resourceClass),
      pid: w.pid,
      active: Boolean(w.active),
      stackingOrder: w.stackingOrder,
      demandsAttention: Boolean(w.demandsAttention),
      minimized: Boolean(w.minimized)
    });
  }
  print("MARK " + JSON.stringify({windows: out}));
})();
"""

_ACTIVATE_JS = """\
(function () {
  var list = typeof workspace.windowList === "function"
    ? workspace.windowList() : workspace.clientList();
  var found = null;
  for (var i = 0; i < list.length; i++) {
    if (String(list[i].caption) === CAPTION) { found = list[i]; }
  }
  if (found !== null) {
    if (workspace.activeWindow !== undefined) { workspace.activeWindow = found; }
    else { workspace.activeClient = found; }
  }
  print("MARK " + JSON.stringify({found: found !== null}));
})();
"""


@dataclass(frozen=True)
class KWinWindow:
    caption: str
    resource_class: str
    pid: int
    active: bool
    stacking_order: int
    demands_attention: bool
    minimized: bool


class KWin:
    """A running ``kwin_wayland`` of one session: its log and its scripting."""

    def __init__(self, ws: WaylandSession, proc: subprocess.Popen[bytes]) -> None:
        self.ws = ws
        self.proc = proc

    def log(self) -> str:
        return self.ws.log("kwin")

    def _dbus(self, path: str, member: str, *args: str) -> str:
        result = self.ws.run(
            ["dbus-send", "--session", "--print-reply", "--dest=org.kde.KWin", path, member, *args]
        )
        if result.returncode != 0:
            raise E2EError(f"org.kde.KWin {path} {member}: {result.stderr}\n{self._tail()}")
        return result.stdout

    def _tail(self) -> str:
        return "--- kwin log:\n" + "\n".join(self.log().splitlines()[-40:])

    def script(self, source: str, timeout: float = 20) -> dict[str, Any]:
        """Run ``source`` once in KWin; return the object it printed after ``MARK``."""
        mark = f"{SCRIPT_MARK}-{secrets.token_hex(6)}"
        path = self.ws.dirs.root / f"{mark}.js"
        path.write_text(source.replace("MARK", mark))
        path.chmod(0o644)
        self._dbus(
            "/Scripting", "org.kde.kwin.Scripting.loadScript", f"string:{path}", f"string:{mark}"
        )
        try:
            self._dbus("/Scripting", "org.kde.kwin.Scripting.start")
            pattern = re.compile(rf"{re.escape(mark)} (\{{.*\}})$", re.MULTILINE)
            found = wait_for(
                lambda: self._exited() or pattern.search(self.log()),
                f"KWin running script {mark}",
                timeout=timeout,
            )
            if found is True:
                raise E2EError(f"kwin_wayland exited ({self.proc.returncode})\n{self._tail()}")
            return dict(json.loads(found.group(1)))
        finally:
            self._dbus("/Scripting", "org.kde.kwin.Scripting.unloadScript", f"string:{mark}")
            path.unlink()

    def _exited(self) -> bool:
        return self.proc.poll() is not None

    def windows(self) -> list[KWinWindow]:
        return [
            KWinWindow(
                caption=w["caption"],
                resource_class=w["resourceClass"],
                pid=int(w["pid"]),
                active=bool(w["active"]),
                stacking_order=int(w["stackingOrder"]),
                demands_attention=bool(w["demandsAttention"]),
                minimized=bool(w["minimized"]),
            )
            for w in self.script(_QUERY_JS)["windows"]
        ]

    def activate(self, caption: str) -> None:
        """Give the window titled ``caption`` the focus, as a click into it would."""
        if not self.script(_ACTIVATE_JS.replace("CAPTION", json.dumps(caption)))["found"]:
            raise E2EError(f"KWin has no window titled {caption!r}")

    def screenshot(self, notifier: Notifier, name: str) -> Path | None:
        """The whole screen as KWin draws it, into ``$OLLIE_TEST_ARTIFACTS``."""
        target_dir = os.environ.get(ARTIFACTS_VAR)
        if not target_dir:
            return None
        own = self.ws.dirs.root / f"{name}.png"
        notifier.send({"cmd": "shot", "path": str(own)})
        notifier.expect("shot", timeout=30)
        target = Path(target_dir) / f"{self.ws.test_name}-{name}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(own, target)
        return target


def kwin(ws: WaylandSession) -> KWin:
    """Start ``kwin_wayland --virtual`` as the user; ``ws.env`` gets its WAYLAND_DISPLAY."""
    binary = ws.dirs.root / "kwin_wayland"
    original = shutil.which("kwin_wayland")
    assert original is not None
    shutil.copyfile(original, binary)  # without its file capabilities (see the module doc)
    binary.chmod(0o755)
    runtime = Path(ws.env["XDG_RUNTIME_DIR"])
    proc = ws.popen(
        "kwin",
        [
            str(binary),
            "--virtual",
            f"--socket={SOCKET}",
            f"--width={SCREEN[0]}",
            f"--height={SCREEN[1]}",
            "--no-lockscreen",
            "--no-global-shortcuts",
            "--no-kactivities",
        ],
        QT_LOGGING_RULES="kwin_core.debug=true",
        KWIN_SCREENSHOT_NO_PERMISSION_CHECKS="1",
    )

    scripting = [
        "dbus-send",
        "--session",
        "--print-reply",
        "--dest=org.kde.KWin",
        "/Scripting",
        "org.kde.kwin.Scripting.isScriptLoaded",
        f"string:{SCRIPT_MARK}",
    ]

    def up() -> bool:
        if proc.poll() is not None:
            raise E2EError(f"kwin_wayland exited ({proc.returncode}):\n{ws.log('kwin')}")
        # KWin owns org.kde.KWin before it exports /Scripting: wait for the latter.
        return (runtime / SOCKET).exists() and ws.run(scripting).returncode == 0

    wait_for(up, "kwin_wayland's Wayland socket and its /Scripting on D-Bus", timeout=60)
    ws.env["WAYLAND_DISPLAY"] = SOCKET
    found = KWin(ws, proc)
    found.windows()  # scripting answers: KWin's workspace is up
    return found


class Notifier:
    """``kwin_notifier.py`` as the user: commands in on stdin, JSON events out on stdout."""

    def __init__(self, ws: WaylandSession, title: str) -> None:
        self.ws = ws
        self.title = title
        for name in ("kwin_notifier.py", "wl_toplevel_client.py"):
            copy = ws.dirs.root / name
            shutil.copyfile(HERE / name, copy)
            copy.chmod(0o644)
        self.proc = ws.stack.enter_context(
            ds.running(
                [str(ws.user.python), str(ws.dirs.root / "kwin_notifier.py"), title],
                ws.env,
                ws.logs / "notifier.log",
                user=ws.user.uid,
                group=ws.user.gid,
                extra_groups=ws.user.groups,
                cwd=str(ws.dirs.root),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._backlog: list[dict[str, Any]] = []  # read, not yet expected
        threading.Thread(target=self._read, name="kwin-notifier", daemon=True).start()
        self.expect("ready", timeout=60)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._events.put(json.loads(line))
        self._events.put(None)

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, event: str, timeout: float = 30) -> dict[str, Any]:
        """The next event named ``event``, in order; other events wait for their turn."""
        for got in self._backlog:
            if got.get("event") == event:
                self._backlog.remove(got)
                return got
        try:
            while True:
                got = self._events.get(timeout=timeout)
                if got is None:
                    raise E2EError(f"kwin_notifier ended:\n{self.ws.log('notifier')}")
                self.seen.append(got)
                if got.get("event") == event:
                    return got
                self._backlog.append(got)
        except queue.Empty:
            raise E2EError(
                f"kwin_notifier: no {event!r} within {timeout:g} s; seen {self.seen}\n"
                f"{self.ws.log('notifier')}"
            ) from None

    def review(self, nid: int, token: str) -> dict[str, Any]:
        """Click *Review* on notification ``nid``; ``token`` is real, bogus or none."""
        self.send({"cmd": "review", "id": nid, "token": token})
        return self.expect("invoked")

    def click_icon(self, service: str, token: str) -> dict[str, Any]:
        """Click the StatusNotifierItem of ``service`` as the panel does; ``token`` as above."""
        self.send({"cmd": "click", "service": service, "token": token})
        return self.expect("clicked")
