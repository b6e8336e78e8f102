"""Real desktop parts for tests: a private D-Bus session, Xvfb, dunst, gnome-keyring.

Import it from tests in this directory as ``import desktop_session`` (pytest
puts a test file's directory on ``sys.path``; there are no ``__init__.py``
files).  Tests elsewhere (``tests/e2e``) add this directory to ``sys.path``
in their own conftest.

Every context manager starts real programs in their own process group, with
their output in a log file under ``tmp_path`` (quoted when a start fails), and
stops them by PID when the block ends, also when the test failed: SIGTERM to
the group, a bounded wait, then SIGKILL.  Nothing sleeps a fixed time; every
wait polls with a deadline (at most :data:`DEADLINE` seconds).

- :func:`require` skips a test whose programs are missing, naming the Debian
  packages; under ``CI=true`` it fails instead (a skipped real-stack test is a
  failure in CI).
- :func:`dbus_session` runs ``dbus-daemon`` with a copy of the session
  config without ``<standard_session_servicedirs/>``, so nothing is
  auto-activated: a name is owned only by what the test started.  It yields an
  isolated environment: ``HOME``, ``XDG_RUNTIME_DIR`` (0700) and the other
  XDG directories under ``tmp_path``, ``DBUS_SESSION_BUS_ADDRESS`` of the
  private bus, no ``DISPLAY``.
- :func:`xvfb` runs ``Xvfb -displayfd``: the server picks a free display
  itself (no race with other X servers on the machine) and reports it when
  ready; we then also wait for ``/tmp/.X11-unix/X<N>``.
- :func:`dunst` runs dunst 1.9 on its own Xvfb with a generated dunstrc (the
  user's config plays no part) and waits until it owns
  ``org.freedesktop.Notifications``.  The dunstrc sets ``markup = full`` (as
  the stock dunstrc, so the server advertises ``body-markup``),
  ``stack_duplicates = false``, a ``format`` per urgency that starts the
  rendered message with ``[low]``/``[normal]``/``[critical]`` (dunst's history
  JSON has no urgency field: :func:`dunst_history` reads it back from there),
  a ``script`` rule that logs every notification's ``DUNST_*`` variables
  (:func:`dunst_shown`: urgency, desktop entry, timeout, ...) and a scripted
  ``dmenu`` for the context menu.
- :func:`gnome_keyring` runs ``gnome-keyring-daemon --foreground --unlock
  --components=secrets`` with the password on stdin; a new ``login`` keyring
  is created in ``$XDG_DATA_HOME/keyrings`` and is the default collection.

Driving dunst 1.9 (measured on this machine, dunst 1.9.0):

- ``dunstctl action 0`` calls ``org.dunstproject.cmd0.NotificationAction(0)``:
  for the first displayed notification it emits ``ActionInvoked(id,
  "default")`` when the notification lists a ``default`` action; without one
  it opens the context menu instead (and with exactly one action, invokes
  that one).
- ``dunstctl context`` opens the context menu for all displayed
  notifications: dunst runs its ``dmenu`` program with one line per action,
  ``#<label> (<summary>) [<id>,<key>]``, and invokes the action of the line
  the program prints.  Our ``dmenu`` prints the first line containing the
  text in ``$OLLIE_TEST_DUNST_DIR/dmenu-choice``;
  :func:`dunst_action` writes ``[<id>,<key>]`` (or ``,<key>]``) there first.
- ``ActionInvoked`` and ``NotificationClosed`` are sent to the client that
  created the notification (unicast), so that client must stay connected.
- ``dunstctl history`` lists closed notifications only (not displayed ones);
  ``dunstctl count displayed`` counts the displayed ones.  A notification
  closed with ``CloseNotification`` goes to the history.
- Identical notifications are merged by default (``stack_duplicates``), which
  closes the older one with reason 1 ("expired"); our dunstrc turns that off.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

DEADLINE = 10.0
"""The longest any wait here polls, in seconds."""

SESSION_CONF = Path("/usr/share/dbus-1/session.conf")
NOTIFICATIONS = "org.freedesktop.Notifications"
SECRETS = "org.freedesktop.secrets"

PACKAGES = {
    "dbus-daemon": "dbus",
    "dbus-send": "dbus",
    "Xvfb": "xvfb",
    "dunst": "dunst",
    "dunstctl": "dunst",
    "notify-send": "libnotify-bin",
    "gnome-keyring-daemon": "gnome-keyring",
    "xdotool": "xdotool",
    "trayer": "trayer",
    "xauth": "xauth",
    "import": "imagemagick",
    "sudo": "sudo",
    "/usr/libexec/at-spi-bus-launcher": "at-spi2-core",
}
"""Which Debian package provides a program (for the skip message)."""


class DesktopSessionError(RuntimeError):
    """A real component did not start or answer in time (message includes its log)."""


# --- requirements -------------------------------------------------------------------


def require(*binaries: str) -> None:
    """Skip (locally) or fail (``CI=true``) unless every program is on ``$PATH``."""
    missing = [b for b in binaries if shutil.which(b) is None]
    if not missing:
        return
    packages = sorted({PACKAGES.get(b, b) for b in missing})
    message = f"missing {', '.join(missing)}; install with: apt-get install -y {' '.join(packages)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run real-stack tests)")
    pytest.skip(message)


# --- processes ------------------------------------------------------------------------


def _exited(proc: subprocess.Popen[Any]) -> bool:
    """Whether ``proc`` has exited, without reaping it (its PID stays ours)."""
    if proc.returncode is not None:
        return True
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    # Only while the leader is unreaped: its PID (= the group id) cannot be reused.
    if proc.returncode is not None:
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Stop ``proc`` and its process group: SIGTERM, bounded wait, SIGKILL; reap it."""
    _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not _exited(proc) and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_group(proc, signal.SIGKILL)  # the leader if it ignored SIGTERM, and stragglers
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


@contextmanager
def running(
    argv: list[str],
    env: Mapping[str, str],
    log: Path,
    **popen: Any,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` in its own session with output to ``log``; stop it on exit."""
    with open(log, "ab") as log_file:
        popen.setdefault("stdout", log_file)
        proc = subprocess.Popen(
            argv,
            env=dict(env),
            stdin=popen.pop("stdin", subprocess.DEVNULL),
            stderr=log_file,
            start_new_session=True,
            **popen,
        )
    try:
        yield proc
    finally:
        stop(proc)


def wait_until(
    predicate: Callable[[], bool],
    what: str,
    *,
    timeout: float = DEADLINE,
    proc: subprocess.Popen[Any] | None = None,
    log: Path | None = None,
) -> None:
    """Poll ``predicate`` until true; raise :class:`DesktopSessionError` at the deadline
    or when ``proc`` dies first."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        if predicate():
            return
        died = proc is not None and _exited(proc)
        if died or time.monotonic() >= deadline:
            reason = "exited" if died else f"not within {timeout:g} s"
            detail = f"\n--- {log}:\n{_tail(log)}" if log is not None else ""
            raise DesktopSessionError(f"{what}: {reason}{detail}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _read_line(fd: int, what: str, proc: subprocess.Popen[Any], log: Path) -> str:
    """The first line a child writes to pipe ``fd``, within the deadline."""
    data = b""
    deadline = time.monotonic() + DEADLINE
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    if b"\n" not in data:
        raise DesktopSessionError(f"{what}: no answer on its pipe\n--- {log}:\n{_tail(log)}")
    return data.split(b"\n", 1)[0].decode().strip()


# --- environment and D-Bus -------------------------------------------------------------


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """A minimal environment whose home, runtime and XDG directories live in ``tmp_path``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
        "XDG_DATA_HOME": str(tmp_path / "home" / ".local" / "share"),
        "XDG_STATE_HOME": str(tmp_path / "home" / ".local" / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "home" / ".cache"),
    }
    for key in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    runtime = Path(env["XDG_RUNTIME_DIR"])
    runtime.mkdir(mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    return env


def session_config(tmp_path: Path) -> Path:
    """A copy of the session bus config that activates nothing and listens in ``tmp_path``."""
    text = SESSION_CONF.read_text()
    text = re.sub(r"<standard_session_servicedirs\s*/>", "", text)
    text = re.sub(r"<servicedir>.*?</servicedir>", "", text, flags=re.S)
    sockets = tmp_path / "dbus"
    sockets.mkdir(exist_ok=True)
    # sun_path holds 108 bytes; dbus adds "/dbus-XXXXXXXXXX".
    listen = f"unix:dir={sockets}" if len(str(sockets)) < 80 else "unix:tmpdir=/tmp"
    text = re.sub(r"<listen>.*?</listen>", f"<listen>{listen}</listen>", text, flags=re.S)
    path = tmp_path / "session.conf"
    path.write_text(text)
    return path


@contextmanager
def dbus_session(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private session bus; yields the isolated environment that reaches it."""
    require("dbus-daemon", "dbus-send")
    env = isolated_env(tmp_path)
    config = session_config(tmp_path)
    log = tmp_path / "dbus-daemon.log"
    argv = ["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile"]
    argv.append("--print-address=1")
    with running(argv, env, log, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        address = _read_line(proc.stdout.fileno(), "dbus-daemon", proc, log)
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        yield env


def name_has_owner_argv(name: str) -> list[str]:
    """``dbus-send`` asking the session bus whether ``name`` has an owner."""
    return [
        "dbus-send",
        "--session",
        "--print-reply=literal",
        "--dest=org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.NameHasOwner",
        f"string:{name}",
    ]


def owned(result: subprocess.CompletedProcess[str]) -> bool:
    """The answer of a finished :func:`name_has_owner_argv` command."""
    return result.returncode == 0 and result.stdout.split()[-1:] == ["true"]


def name_has_owner(env: Mapping[str, str], name: str) -> bool:
    """Whether ``name`` is owned on the bus of ``env``."""
    result = subprocess.run(
        name_has_owner_argv(name),
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    return owned(result)


# --- X ----------------------------------------------------------------------------------


@contextmanager
def xvfb(tmp_path: Path, screen: str = "1280x1024x24") -> Iterator[str]:
    """An Xvfb on a display it chose itself; yields ``":N"``."""
    require("Xvfb")
    log = tmp_path / "xvfb.log"
    read_end, write_end = os.pipe()
    try:
        argv = ["Xvfb", "-displayfd", str(write_end), "-nolisten", "tcp"]
        argv += ["-screen", "0", screen]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        with running(argv, env, log, pass_fds=(write_end,)) as proc:
            os.close(write_end)
            write_end = -1
            number = _read_line(read_end, "Xvfb", proc, log)
            socket_path = Path(f"/tmp/.X11-unix/X{number}")
            wait_until(socket_path.exists, f"Xvfb socket {socket_path}", proc=proc, log=log)
            yield f":{number}"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


# --- dunst ------------------------------------------------------------------------------

_DMENU = """#!/bin/sh
# dunst's context menu: print the first offered line containing the chosen text.
input=$(cat)
choice=$(cat "$OLLIE_TEST_DUNST_DIR/dmenu-choice" 2>/dev/null) || exit 1
printf '%s\\n' "$input" > "$OLLIE_TEST_DUNST_DIR/dmenu-offered"
printf '%s\\n' "$input" | grep -F -m 1 -- "$choice"
"""

_LOGGER = """import json, os
entry = {k[6:].lower(): v for k, v in os.environ.items() if k.startswith("DUNST_")}
with open(os.path.join(os.environ["OLLIE_TEST_DUNST_DIR"], "shown.jsonl"), "a") as fh:
    fh.write(json.dumps(entry) + "\\n")
"""


def _dunstrc(directory: Path) -> str:
    rules = "".join(
        f'[ollie_format_{u}]\nmsg_urgency = {u}\nformat = "[{u}] %s\\n%b"\n\n'
        for u in ("low", "normal", "critical")
    )
    return (
        "[global]\n"
        "markup = full\n"
        "stack_duplicates = false\n"
        "follow = none\n"
        f"dmenu = {directory / 'dmenu'}\n\n"
        f"{rules}"
        "[ollie_log]\n"
        'summary = "*"\n'
        f"script = {directory / 'log-notification'}\n"
    )


@contextmanager
def dunst(env: Mapping[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """dunst on its own Xvfb, on the bus of ``env``; yields ``env`` plus ``DISPLAY``
    and ``OLLIE_TEST_DUNST_DIR`` (what the ``dunst_*`` helpers need)."""
    require("dunst", "dunstctl", "dbus-send", "Xvfb")
    directory = tmp_path / "dunst"
    directory.mkdir(exist_ok=True)
    dmenu = directory / "dmenu"
    dmenu.write_text(_DMENU)
    logger = directory / "log-notification"
    (directory / "log_notification.py").write_text(_LOGGER)
    logger.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
        f"{shlex.quote(str(directory / 'log_notification.py'))}\n"
    )
    for script in (dmenu, logger):
        script.chmod(0o755)
    config = directory / "dunstrc"
    config.write_text(_dunstrc(directory))
    log = tmp_path / "dunst.log"
    with xvfb(tmp_path) as display:
        denv = {**env, "DISPLAY": display, "OLLIE_TEST_DUNST_DIR": str(directory)}
        with running(["dunst", "-config", str(config)], denv, log) as proc:
            wait_until(
                lambda: name_has_owner(denv, NOTIFICATIONS),
                f"dunst owning {NOTIFICATIONS}",
                proc=proc,
                log=log,
            )
            yield denv


def dunstctl(env: Mapping[str, str], *args: str) -> str:
    result = subprocess.run(
        ["dunstctl", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    if result.returncode != 0:
        raise DesktopSessionError(f"dunstctl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def dunst_history(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Closed notifications, newest first, as plain dicts (``summary``, ``body``,
    ``appname``, ``id``, ``timeout``, ...) plus ``urgency`` read from the message."""
    data = json.loads(dunstctl(env, "history"))
    entries = []
    for raw in data["data"][0]:
        entry = {key: value["data"] for key, value in raw.items()}
        found = re.match(r"\[(low|normal|critical)\] ", entry.get("message", ""))
        entry["urgency"] = found.group(1) if found else None
        entries.append(entry)
    return entries


def dunst_displayed(env: Mapping[str, str]) -> int:
    """How many notifications dunst shows now."""
    return int(dunstctl(env, "count", "displayed").strip())


def dunst_shown(env: Mapping[str, str]) -> list[dict[str, str]]:
    """Every notification dunst displayed, oldest first: the ``DUNST_*`` variables
    of its script rule, lower-cased without the prefix (``id``, ``summary``,
    ``body``, ``urgency`` as ``CRITICAL``/``NORMAL``/``LOW``, ``desktop_entry``,
    ``app_name``, ``timeout``, ``icon_path``...)."""
    path = Path(env["OLLIE_TEST_DUNST_DIR"]) / "shown.jsonl"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def dunst_action(
    env: Mapping[str, str], key: str = "default", notification_id: int | None = None
) -> None:
    """Invoke action ``key`` as a click would: ``default`` on the first displayed
    notification through ``dunstctl action 0``, any other key through the context
    menu (of ``notification_id``, else of the first notification offering it)."""
    if key == "default" and notification_id is None:
        dunstctl(env, "action", "0")
        return
    choice = f"[{notification_id},{key}]" if notification_id is not None else f",{key}]"
    (Path(env["OLLIE_TEST_DUNST_DIR"]) / "dmenu-choice").write_text(choice)
    dunstctl(env, "context")


# --- gnome-keyring ----------------------------------------------------------------------


@contextmanager
def gnome_keyring(
    env: Mapping[str, str], tmp_path: Path, password: str = "test-keyring-password"
) -> Iterator[dict[str, str]]:
    """A Secret Service (gnome-keyring, unlocked ``login`` keyring) on the bus of ``env``."""
    require("gnome-keyring-daemon", "dbus-send")
    kenv = dict(env)
    for key in ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME"):
        if key not in kenv:
            raise DesktopSessionError(f"gnome_keyring needs {key} (use dbus_session's env)")
    runtime = Path(kenv["XDG_RUNTIME_DIR"])
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    runtime.chmod(0o700)
    log = tmp_path / "gnome-keyring.log"
    argv = ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"]
    with running(argv, kenv, log, stdin=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        proc.stdin.write(password.encode())
        proc.stdin.close()
        wait_until(
            lambda: name_has_owner(kenv, SECRETS),
            f"gnome-keyring owning {SECRETS}",
            proc=proc,
            log=log,
        )
        yield kenv


@contextmanager
def notification_session(tmp_path: Path) -> Iterator[dict[str, str]]:
    """:func:`dbus_session` with :func:`dunst` on it (a convenience for tests)."""
    with ExitStack() as stack:
        env = stack.enter_context(dbus_session(tmp_path))
        yield stack.enter_context(dunst(env, tmp_path))
