"""Driving the real ``ollie-tray`` under Xvfb like a person: windows, keys, mouse, screenshots.

Import it as ``import e2e_driver`` (``conftest.py`` puts ``tests/e2e`` and
``tests/integration`` on ``sys.path``; tests have no ``__init__.py``).

- :class:`Display` wraps one X display: finding windows (``xdotool search``,
  polled every 20 ms: ``--sync`` re-polls only every 500 ms, too coarse to
  press a key inside the 700 ms arming delay), focusing them without a window
  manager (``windowfocus``: ``windowactivate`` needs ``_NET_ACTIVE_WINDOW``),
  keys and typing (secrets go to ``xdotool type --file -`` on stdin, never in
  an argv), mouse clicks and screenshots (``import -window root``).
- :func:`tray_icon` finds the tray's icon window embedded under trayer's
  panel in ``xwininfo -root -tree`` and checks its ``_NET_WM_PID``.
- :class:`TrayProcess` and :class:`AgentCall` are the two sides of every
  scenario: the real ``ollie-tray`` (with its test state file, see
  ``ollie_tray/state_report.py``) and an agent's ``ollie-tools call`` /
  ``ollie-elevate``.  Both are stopped by PID (SIGTERM, bounded wait, SIGKILL).
- :func:`marked_processes` lists live processes carrying a test's marker in
  their environment or their session, for the leak check after every test.

Nothing sleeps a fixed time: every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_procs import stop_process

DEADLINE = 15.0
"""The longest a window, state or process wait polls, in seconds."""

POLL = 0.02
MARKER_VAR = "OLLIE_E2E_MARKER"
APPROVAL_TITLE = "Ollie — approve {tool}?"
PASSWORD_TITLE = "Ollie — password for {tool}"
BROWSER_TITLE = "Ollie Tool Browser"


class E2EError(AssertionError):
    """Something the scenario waited for did not happen in time (with context)."""


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Poll ``predicate`` until it returns something truthy; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise E2EError(f"{what}: not within {timeout:g} s")
        time.sleep(POLL)


# --- X display ------------------------------------------------------------------------


@dataclass
class Display:
    """One X display; ``shots`` is where :meth:`screenshot` writes (None: nowhere)."""

    name: str
    shots: Path | None = None
    prefix: str = ""
    taken: list[Path] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": self.name}

    def run(
        self, program: str, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [program, *args],
            env=self.env(),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        if check and result.returncode != 0:
            raise E2EError(f"{program} {' '.join(args)}: exit {result.returncode}: {result.stderr}")
        return result

    def xdotool(self, *args: str, stdin: str | None = None) -> str:
        return self.run("xdotool", *args, stdin=stdin).stdout

    # windows

    def windows(self, name: str) -> list[int]:
        """Visible windows whose title matches the regular expression ``name``."""
        result = self.run("xdotool", "search", "--onlyvisible", "--name", name, check=False)
        return [int(w) for w in result.stdout.split()]

    def wait_window(self, name: str, timeout: float = DEADLINE) -> int:
        """The first visible window titled like ``name`` (a regular expression)."""
        found: list[int] = wait_for(
            lambda: self.windows(name), f"window {name!r} on {self.name}", timeout
        )
        return found[0]

    def wait_no_window(self, name: str, timeout: float = DEADLINE) -> None:
        wait_for(lambda: not self.windows(name), f"window {name!r} to go away", timeout)

    def focus(self, window: int) -> None:
        """Give ``window`` the keyboard focus (there is no window manager to activate it)."""
        self.xdotool("windowfocus", "--sync", str(window))

    def key(self, window: int | None, *keys: str) -> None:
        """Press ``keys`` (xdotool names, e.g. ``alt+d``) in ``window`` (focused first)."""
        if window is not None:
            self.focus(window)
        self.xdotool("key", "--clearmodifiers", *keys)

    def type_text(self, text: str) -> None:
        """Type ``text`` into the focused widget; it travels on stdin, never in an argv."""
        self.xdotool("type", "--clearmodifiers", "--delay", "4", "--file", "-", stdin=text)

    def click(self, x: int, y: int, button: int = 1) -> None:
        # No "mousemove --sync": it never returns on this Xvfb (it waits for a motion
        # event it does not see).  Check the pointer got there instead.
        self.xdotool("mousemove", str(x), str(y))
        wait_for(lambda: self.pointer() == (x, y), f"the pointer at {x},{y}")
        self.xdotool("click", str(button))

    def pointer(self) -> tuple[int, int]:
        out = self.xdotool("getmouselocation", "--shell")
        values = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return (int(values["X"]), int(values["Y"]))

    def geometry(self, window: int) -> tuple[int, int, int, int]:
        """``(x, y, width, height)`` of ``window`` on the screen."""
        out = self.xdotool("getwindowgeometry", "--shell", str(window))
        values = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return (int(values["X"]), int(values["Y"]), int(values["WIDTH"]), int(values["HEIGHT"]))

    # pictures

    def wait_painted(self, window: int, timeout: float = DEADLINE) -> None:
        """Wait until ``window`` shows a picture (mapped windows are blank until painted)."""

        def painted() -> bool:
            x, y, width, height = self.geometry(window)
            return self.colours(x, y, min(width, 400), min(height, 300)) > 8

        wait_for(painted, f"window {window:#x} painted", timeout)

    def screenshot(self, name: str) -> Path | None:
        """``import -window root`` into the artifacts directory (if there is one)."""
        if self.shots is None:
            return None
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{self.prefix}{name}.png"
        self.run("import", "-window", "root", str(path))
        self.taken.append(path)
        return path

    def colours(self, x: int, y: int, width: int, height: int) -> int:
        """How many distinct colours the screen shows in a rectangle (1: nothing drawn)."""
        out = self.run(
            "import",
            "-window",
            "root",
            "-crop",
            f"{width}x{height}+{x}+{y}",
            "+repage",
            "-format",
            "%k",
            "info:",
        ).stdout
        return int(out.strip().splitlines()[0])


# --- the tray icon in trayer ------------------------------------------------------------

_TREE_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<id>0x[0-9a-f]+) (?P<label>.*?)\s+"
    r"(?P<w>\d+)x(?P<h>\d+)\+-?\d+\+-?\d+\s+\+(?P<x>-?\d+)\+(?P<y>-?\d+)\s*$"
)


@dataclass(frozen=True)
class IconWindow:
    window: int
    x: int
    y: int
    width: int
    height: int
    panel: int

    @property
    def center(self) -> tuple[int, int]:
        return (self.x + self.width // 2, self.y + self.height // 2)


def _window_pid(display: Display, window: int) -> int | None:
    out = display.run("xprop", "-id", hex(window), "_NET_WM_PID", check=False).stdout
    found = re.search(r"=\s*(\d+)", out)
    return int(found.group(1)) if found else None


def tray_icon(display: Display, pid: int) -> IconWindow | None:
    """The viewable icon window of process ``pid`` embedded (XEmbed) under trayer's panel.

    ``xwininfo -root -tree`` prints the window hierarchy indented by depth; the
    panel is the top-level window of class ``trayer`` named ``panel``; the
    icon is a descendant of it whose ``_NET_WM_PID`` is the tray's pid.
    """
    tree = display.run("xwininfo", "-root", "-tree").stdout.splitlines()
    panel: tuple[int, int] | None = None  # (window, indent)
    for line in tree:
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        if panel is not None and indent <= panel[1]:
            panel = None  # left the panel's subtree
        if '"panel": ("panel" "trayer")' in match["label"]:
            panel = (int(match["id"], 16), indent)
            continue
        if panel is None or int(match["w"]) <= 1:
            continue
        window = int(match["id"], 16)
        if _window_pid(display, window) != pid:
            continue
        info = display.run("xwininfo", "-id", hex(window), check=False).stdout
        if "IsViewable" not in info:
            continue
        return IconWindow(
            window, int(match["x"]), int(match["y"]), int(match["w"]), int(match["h"]), panel[0]
        )
    return None


# --- processes ------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _session_id(pid: str) -> int | None:
    stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
    try:
        # Fields after the ")" of the command: state ppid pgrp session ...
        return int(stat.rsplit(")", 1)[1].split()[3])
    except (IndexError, ValueError):
        return None


def marked_processes(marker: str, sessions: Iterable[int] = ()) -> list[str]:
    """Live processes with ``OLLIE_E2E_MARKER=<marker>`` in their environment, or in one
    of ``sessions`` (a started process's session: its children, even with a fresh env)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    wanted = set(sessions)
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        cmdline = _read(f"/proc/{pid}/cmdline")
        if not cmdline:
            continue  # a zombie or a kernel thread
        environ = _read(f"/proc/{pid}/environ")
        if needle in environ.split(b"\0") or _session_id(pid) in wanted:
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid}: {command}")
    return found


def wait_for_quiet(marker: str, sessions: Iterable[int], timeout: float = 5.0) -> list[str]:
    """Wait until no marked process is left; SIGKILL (by PID) and return any that stay."""
    sessions = set(sessions)
    deadline = time.monotonic() + timeout
    while True:
        left = marked_processes(marker, sessions)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(POLL * 5)
    for entry in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(entry.split(":", 1)[0]), signal.SIGKILL)
    return left


@dataclass
class TrayProcess:
    """A running ``ollie-tray`` and what a test needs to know about it."""

    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    log: Path
    state_file: Path
    socket: Path
    display: Display

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def state(self) -> dict[str, Any] | None:
        try:
            value: dict[str, Any] = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value

    def wait_state(
        self, predicate: Callable[[dict[str, Any]], Any], what: str, timeout: float = DEADLINE
    ) -> dict[str, Any]:
        """The first state (see ``ollie_tray/state_report.py``) satisfying ``predicate``."""

        def check() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise E2EError(f"ollie-tray exited ({self.proc.returncode}):\n{self.log_text()}")
            state = self.state()
            return state if state is not None and predicate(state) else None

        try:
            found: dict[str, Any] = wait_for(check, f"tray state: {what}", timeout)
        except E2EError as exc:
            raise E2EError(f"{exc}\nlast state: {json.dumps(self.state(), indent=1)}") from None
        return found

    def wait_icon(self, timeout: float = DEADLINE) -> IconWindow:
        icon: IconWindow = wait_for(
            lambda: tray_icon(self.display, self.pid), "the tray icon in trayer", timeout
        )
        return icon

    def stop(self) -> int:
        return stop_process(self.proc)


def find_window(state: Mapping[str, Any], cls: str) -> dict[str, Any] | None:
    return next((w for w in state.get("windows", []) if w["class"] == cls), None)


def texts_of(state: Mapping[str, Any], cls: str) -> list[str]:
    """The visible label texts of the window of class ``cls`` (none: empty)."""
    window = find_window(state, cls)
    return list(window["texts"]) if window is not None else []


def approve_armed(state: Mapping[str, Any]) -> bool:
    window = find_window(state, "ApprovalDialog")
    return window is not None and bool(window["buttons"].get("Approve"))


def click_button(display: Display, state: Mapping[str, Any], cls: str, text: str) -> None:
    """Click the middle of the button ``text`` of the window of class ``cls`` (xdotool).

    Only a click counts for Approve on X11; xdotool's clicks are XTEST input, so
    they approve only in a tray started with the synthetic-input test switch
    (``E2E.start_tray(synthetic_input=True)``, the default; docs/testing.md)."""
    window = find_window(state, cls)
    if window is None or text not in window.get("rects", {}):
        raise E2EError(f"no button {text!r} in a {cls} window: {state}")
    x, y, width, height = window["rects"][text]
    display.click(x + width // 2, y + height // 2)


def click_approve(display: Display, tray: TrayProcess) -> dict[str, Any]:
    """Wait until Approve is armed, click it; the state it was clicked in."""
    state = tray.wait_state(approve_armed, "Approve armed")
    click_button(display, state, "ApprovalDialog", "Approve")
    return state


@dataclass
class AgentCall:
    """An agent-side command (``ollie-tools call``, ``ollie-elevate``) running now."""

    proc: subprocess.Popen[str]
    argv: list[str]
    started: float

    def running(self) -> bool:
        return self.proc.poll() is None

    def result(self, timeout: float = DEADLINE) -> subprocess.CompletedProcess[str]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)
            out, err = self.proc.communicate()
            raise E2EError(
                f"{self.argv} did not finish within {timeout:g} s\nstdout: {out}\nstderr: {err}"
            ) from None
        return subprocess.CompletedProcess(self.argv, self.proc.returncode, out, err)

    def still_running_after(self, seconds: float) -> bool:
        """True if the command has not finished within ``seconds`` (a bounded wait)."""
        try:
            self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return True
        return False

    def stop(self) -> None:
        stop_process(self.proc)


def open_tray_menu(tray: TrayProcess, button: int = 3, attempts: int = 3) -> dict[str, Any]:
    """Click the tray's icon in trayer (right button: the context menu); wait for the menu.

    Like a person, click again when nothing opened.  Measured here (Qt 6,
    trayer, no window manager): after the menu was closed with the keyboard
    (Esc, or an entry's mnemonic), the next press on the icon is swallowed;
    the one after opens the menu.  A menu closed by a mouse click does not
    do this."""
    icon = tray.wait_icon()
    for attempt in range(attempts):
        tray.display.click(*icon.center, button=button)
        try:
            return tray.wait_state(
                lambda s: find_window(s, "QMenu") is not None, "the tray menu open", timeout=3
            )
        except E2EError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
