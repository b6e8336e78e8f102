"""``ollie-remote connect``: keep an ssh reverse forward of the local broker socket open.

The supervisor loop, per attempt:

1. ``ssh HOST sh`` prepares the remote side: the remote runtime directory
   (``$XDG_RUNTIME_DIR``, else ``/run/user/<uid>`` when it is ours and 0700, else
   ``$XDG_CACHE_HOME/ollie/runtime-<host name>``, as
   ``registry_core.paths.runtime_dir`` computes it there), ``<dir>/ollie`` 0700
   and ours, and a stale socket file removed (sshd's own
   ``StreamLocalBindUnlink`` defaults to ``no``).
2. ``ssh -N -R <remote>/ollie/elevate.sock:<local socket> HOST`` runs as our
   child; its pid goes into the state file *before* anything can connect
   through it, so the broker can tell forwarded connections apart
   (``identify.py``).  ``connected`` becomes true when ssh reports the forward
   (``remote forward success`` in its ``-v`` output).
3. When ssh ends, the next attempt waits per :class:`Backoff` (1, 2, 4 … 60 s;
   back to 1 s after a connection that stayed up a minute).  An unknown host
   key or refused keys end the supervisor (exit 1): retrying cannot fix them.

SIGTERM / SIGINT / SIGHUP stop it: ssh is terminated, the state file removed,
exit status 0.  One supervisor per host: ``<host>.lock`` is held with
``flock`` while it runs.

Threading: the main thread waits for ssh (or sleeps in an interruptible
``Event.wait``); one thread per ssh reads its stderr.  Signal handlers (main
thread) only set the stop event and terminate ssh.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO

from registry_core.errors import HostKeyError, RemoteError, SshAuthError, SshError
from registry_core.remote.identify import SUPERVISOR_MARKS, cmdline_of
from registry_core.remote.ssh import SshTarget, classify_failure, last_words, sh_quote_path
from registry_core.remote.state import (
    Connection,
    ensure_private_dir,
    process_alive,
    remove_connection,
    write_connection,
)

FORWARD_SUCCESS = "remote forward success"
EXIT_FATAL = 1
EXIT_BUSY = 3
PREPARE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Backoff:
    """Delays between reconnection attempts."""

    initial: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    healthy_after: float = 60.0


class BackoffSchedule:
    """``next_delay(session_seconds)``: 1, 2, 4, … capped; reset after a healthy session."""

    def __init__(self, policy: Backoff | None = None) -> None:
        self.policy = policy or Backoff()
        self.failures = 0

    def next_delay(self, session_seconds: float) -> float:
        p = self.policy
        if session_seconds >= p.healthy_after:
            self.failures = 0
        delay = min(p.cap, p.initial * p.factor**self.failures)
        self.failures += 1
        return delay


def prepare_script(remote_socket: str | None) -> str:
    """Remote shell: make the socket's directory (0700, ours), drop a stale socket,
    print ``socket=<path>`` and ``user=<name>``."""
    if remote_socket:
        choose = f"sock={sh_quote_path(remote_socket)}"
    else:
        choose = (
            # The same rule as registry_core.paths.runtime_dir, in sh.
            'd="${XDG_RUNTIME_DIR:-}"\n'
            'u="/run/user/$(id -u)"\n'
            'if [ -z "$d" ] && [ -d "$u" ] && [ ! -L "$u" ] && [ -O "$u" ] '
            '&& [ "$(stat -c %a -- "$u")" = 700 ]; then d="$u"; fi\n'
            'if [ -z "$d" ]; then\n'
            '  d="${XDG_CACHE_HOME:-$HOME/.cache}/ollie/runtime-$(uname -n)"\n'
            "fi\n"
            'if [ ! -d "$d" ]; then mkdir -p -m 700 -- "$d"; fi\n'
            'if [ ! -O "$d" ]; then echo "ollie-remote: $d is not yours" >&2; exit 3; fi\n'
            'sock="$d/ollie/elevate.sock"'
        )
    return f"""set -e
umask 077
{choose}
dir=$(dirname -- "$sock")
mkdir -p -- "$dir"
if [ ! -O "$dir" ]; then echo "ollie-remote: $dir is not yours" >&2; exit 3; fi
chmod 700 -- "$dir"
if [ -S "$sock" ]; then rm -f -- "$sock"; fi
if [ -e "$sock" ]; then echo "ollie-remote: $sock exists and is not a socket" >&2; exit 3; fi
printf 'socket=%s\\n' "$sock"
printf 'user=%s\\n' "$(id -un)"
printf 'home=%s\\n' "$HOME"
"""


@dataclass(frozen=True)
class RemoteSide:
    socket: str
    user: str
    home: str


def parse_prepare(text: str) -> RemoteSide:
    values = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    sock = values.get("socket", "").strip()
    if not sock.startswith("/"):
        raise RemoteError(f"the remote side did not name an absolute socket path: {text!r}")
    return RemoteSide(sock, values.get("user", "").strip(), values.get("home", "").strip())


def expand_remote_path(path: str, home: str) -> str:
    """``~/x`` or ``x`` (relative to the remote home) → absolute, with the remote home."""
    if path == "~":
        return home
    if path.startswith("~/"):
        path = path[2:]
    return path if path.startswith("/") else f"{home.rstrip('/')}/{path}"


class Supervisor:
    """One host's forward, kept open until stopped (see the module docstring)."""

    def __init__(
        self,
        target: SshTarget,
        *,
        local_socket: Path,
        state_dir: Path,
        remote_socket: str | None = None,
        remote_tools_path: str = "~/.config/ollie/tools",
        backoff: Backoff | None = None,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.local_socket = local_socket
        self.state_dir = state_dir
        self.remote_socket = remote_socket
        self.remote_tools_path = remote_tools_path
        self.schedule = BackoffSchedule(backoff)
        self.log = log or _stderr
        self.clock = clock
        self.stop_event = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.record: Connection | None = None
        self._lock_fd: int | None = None
        self._record_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to end (safe from a signal handler or another thread)."""
        self.stop_event.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            self.stop()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, handler)

    def lock(self) -> None:
        """Hold ``<host>.lock``; :class:`RemoteError` when another supervisor has it."""
        ensure_private_dir(self.state_dir)
        path = self.state_dir / f"{self.target.host}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RemoteError(f"already connected to {self.target.host}") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def run(self) -> int:
        """Connect and reconnect until stopped; 0 when stopped, 1 on a fatal ssh error."""
        try:
            self.lock()
        except RemoteError as exc:
            self.log(f"ollie-remote: {exc}")
            return EXIT_BUSY
        try:
            return self._loop()
        finally:
            self._terminate()
            remove_connection(self.state_dir, self.target.host, os.getpid())
            self.unlock()

    # --- the loop --------------------------------------------------------------------

    def _loop(self) -> int:
        since = time.time()
        while not self.stop_event.is_set():
            started = self.clock()
            try:
                side = self.prepare()
                tools_dir = ""
                if side.home.startswith("/"):
                    tools_dir = expand_remote_path(self.remote_tools_path, side.home)
                self._write(
                    Connection(
                        host=self.target.host,
                        pid=os.getpid(),
                        remote_socket=side.socket,
                        local_socket=str(self.local_socket),
                        since=since,
                        remote_user=side.user,
                        tools_dir=tools_dir,
                    )
                )
                self.forward(side.socket)
            except (HostKeyError, SshAuthError) as exc:
                self.log(f"ollie-remote: {exc}")
                return EXIT_FATAL
            except (SshError, RemoteError, OSError) as exc:
                if self.stop_event.is_set():
                    break
                self.log(f"ollie-remote: {exc}")
            if self.stop_event.is_set():
                break
            delay = self.schedule.next_delay(self.clock() - started)
            self.log(f"ollie-remote: reconnecting to {self.target.host} in {delay:g} s")
            self.stop_event.wait(delay)
        return 0

    def prepare(self) -> RemoteSide:
        """Run :func:`prepare_script` remotely (killable by :meth:`stop`)."""
        what = f"preparing the remote socket on {self.target.host}"
        argv = self.target.command(prepare_script(self.remote_socket))
        self.proc = proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        if self.stop_event.is_set():
            proc.terminate()
        try:
            out, err = proc.communicate(timeout=PREPARE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise SshError(f"{what}: no answer within {PREPARE_TIMEOUT:g} s") from None
        finally:
            self.proc = None
        stderr = err.decode("utf-8", "replace")
        if proc.returncode == 255:
            raise classify_failure(self.target.host, proc.returncode, stderr, what)
        if proc.returncode != 0:
            raise RemoteError(f"{what}: {last_words(stderr) or proc.returncode}")
        return parse_prepare(out.decode("utf-8", "replace"))

    def forward(self, remote_socket: str) -> None:
        """Run one ``ssh -N -R`` until it ends; raise the classified error if it failed."""
        argv = self.target.forward(remote_socket, str(self.local_socket))
        self.proc = proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert self.record is not None
        self._write(replace(self.record, ssh_pid=proc.pid, connected=False))
        if self.stop_event.is_set():  # a signal raced with the start
            proc.terminate()
        lines: list[str] = []
        assert proc.stderr is not None
        reader = threading.Thread(
            target=self._read_stderr, args=(proc.stderr, proc.pid, lines), daemon=True
        )
        reader.start()
        code = proc.wait()
        reader.join(5)
        proc.stderr.close()
        self.proc = None
        with self._record_lock:
            if self.record is not None:
                self._write(replace(self.record, ssh_pid=None, connected=False))
        if self.stop_event.is_set():
            return
        stderr = "\n".join(lines)
        error = classify_failure(
            self.target.host, code, stderr, f"the connection to {self.target.host} ended"
        )
        if type(error) is SshError and code == 0:
            raise SshError(f"the connection to {self.target.host} ended", code, stderr)
        raise error

    def _read_stderr(self, stream: IO[bytes], pid: int, lines: list[str]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            lines.append(line)
            del lines[:-200]
            if FORWARD_SUCCESS in line:
                with self._record_lock:
                    if self.record is not None and self.record.ssh_pid == pid:
                        self._write(replace(self.record, connected=True))
                        self.log(
                            f"ollie-remote: connected to {self.target.host}: "
                            f"{self.record.remote_socket} → {self.local_socket}"
                        )
            elif words := last_words(line):
                self.log(f"ssh: {words}")

    def _write(self, record: Connection) -> None:
        self.record = record
        write_connection(self.state_dir, record)

    def _terminate(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.proc = None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- disconnect ------------------------------------------------------------------------


def request_disconnect(conn: Connection) -> bool:
    """Send SIGTERM to ``conn``'s supervisor, by pid, after checking it is an ollie-remote
    process of ours; False when it is already gone.  Does not wait."""
    if not process_alive(conn.pid):
        return False
    cmdline = cmdline_of(conn.pid)
    if not any(mark in cmdline for mark in SUPERVISOR_MARKS):
        raise RemoteError(f"pid {conn.pid} is not an ollie-remote supervisor; not stopping it")
    with contextlib.suppress(ProcessLookupError):
        os.kill(conn.pid, signal.SIGTERM)
    return True


def disconnect(conn: Connection, timeout: float = 15.0) -> bool:
    """Stop ``conn``'s supervisor; True when it is gone within ``timeout`` seconds."""
    if not request_disconnect(conn):
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(conn.pid):
            return True
        threading.Event().wait(0.02)  # poll interval, bounded by the deadline
    return not process_alive(conn.pid)
