"""Front-ends that ask a person without the tray: terminal, kdialog, zenity and none.

Each module implements :class:`registry_core.broker.question.Prompter`:

- :mod:`.terminal` asks on the controlling tty (``/dev/tty``);
- :mod:`.kdialog` and :mod:`.zenity` run those dialog programs;
- :mod:`.none` never asks (servers, CI): it denies;
- :mod:`.select` picks one by name (``auto`` picks the best available) and
  builds the spec's in-process fallback chain (kdialog → zenity → terminal);
- :mod:`.text` holds the wording all of them share.

This module holds the errors and what kdialog and zenity share:
:class:`DialogProcesses` runs a dialog program as a child process (argv
only, never a shell) that can always be taken away again, and
:class:`DialogPrompter` is the scaffolding both front-ends build on.

Cancellation story: the broker cancels ``ask_*`` when the answer is no
longer wanted.  :meth:`DialogProcesses.run` then sends the dialog SIGTERM at
once, waits for it in a shielded task (SIGKILL after :data:`KILL_GRACE`),
reaps it and re-raises ``CancelledError``.  Cancelled a second time while
waiting, or with its reaper cancelled, it sends SIGKILL and re-raises without
waiting; so even an event loop that ends with the question still pending
(``asyncio.run`` cancelling every task, the reaper included) leaves no dialog
on screen, even one that ignores SIGTERM.  Brokers should
still await their cancelled questions before closing the loop, so the
dialogs are also reaped.  ``request_decided`` uses
:meth:`DialogProcesses.withdraw`, which terminates the dialogs of one request
from synchronous code; the waiting ``run`` then returns an outcome marked
``withdrawn_by`` and the front-end answers "deny".

Nothing runs at import time; import the front-end modules you need.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from registry_core.broker.ask.text import Limits
from registry_core.broker.question import Approval, PasswordAnswer, Remember
from registry_core.errors import ElevationError, UntrustedProgramError
from registry_core.trusted import find_trusted, trusted_program

KILL_GRACE = 2.0
"""Seconds a dialog gets to exit after SIGTERM before it is killed."""

EOF_GRACE = 1.0
"""Seconds to wait for the rest of a dialog's stdout after it exited."""

_STDERR_TAIL = 400


class PrompterError(ElevationError):
    """A front-end could not ask (the broker then denies: fail closed)."""


class DialogError(PrompterError):
    """A dialog program failed: missing, crashed, or gave an answer we do not know.

    ``status`` is the exit status (negative: killed by that signal; ``None``:
    it never started); ``detail`` is the end of its stderr, never its stdout
    (which may hold a password).
    """

    def __init__(self, program: str, status: int | None, detail: str) -> None:
        self.program = program
        self.status = status
        self.detail = detail
        what = "could not be started" if status is None else f"failed with status {status}"
        super().__init__(f"{program} {what}: {detail}" if detail else f"{program} {what}")


class TerminalError(PrompterError):
    """The terminal cannot be used to ask (gone, not in the foreground, bad input)."""


def has_display(env: Mapping[str, str]) -> bool:
    """Whether ``env`` names an X11 or Wayland display."""
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def with_utf8_locale(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` whose character type is UTF-8.

    Our texts are UTF-8; zenity (GLib) refuses non-ASCII arguments outright
    in the C locale, which a broker started by systemd or cron often has.
    Only the character type changes, unless ``LC_ALL`` pins a non-UTF-8
    locale, which then becomes ``C.UTF-8``.
    """
    out = dict(env)
    effective = out.get("LC_ALL") or out.get("LC_CTYPE") or out.get("LANG") or ""
    if "utf-8" in effective.lower() or "utf8" in effective.lower():
        return out
    if out.get("LC_ALL"):
        out["LC_ALL"] = "C.UTF-8"
    else:
        out["LC_CTYPE"] = "C.UTF-8"
    return out


@dataclass(frozen=True)
class DialogOutcome:
    """How one dialog process ended.  ``stdout`` may be a password: never shown."""

    status: int
    stdout: bytes = field(repr=False)
    withdrawn_by: str | None = None

    def text(self) -> str:
        """stdout without its final newline, as UTF-8 text."""
        data = self.stdout[:-1] if self.stdout.endswith(b"\n") else self.stdout
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None  # raised below, outside this block: the error object holds the bytes
        if text is None:
            raise PrompterError("the dialog's answer is not valid UTF-8")
        return text


class DialogProcesses:
    """Runs one dialog program's processes, keyed by the request ids they serve.

    ``answers`` are the exit statuses that mean an answer (or a closed
    window); any other status, unless we withdrew the dialog, is a
    :class:`DialogError`.
    """

    def __init__(
        self,
        program: str,
        env: Mapping[str, str] | None = None,
        *,
        answers: Iterable[int] = (0, 1),
    ) -> None:
        self.program = program
        self.answers = frozenset(answers)
        self.env = with_utf8_locale(os.environ if env is None else env)
        self._running: dict[str, set[asyncio.subprocess.Process]] = {}
        self._withdrawn: dict[int, str] = {}  # pid -> who decided instead
        self._reapers: set[asyncio.Task[None]] = set()

    def which(self) -> str | None:
        """The program to run, or ``None``: an absolute ``program`` as given (whoever
        built this chose that file), else the trusted one of a system directory
        (:func:`~registry_core.trusted.find_trusted`).  Never ``PATH``: a dialog
        planted first on it would show the person a question of its own and
        answer "approve" for them, or keep the password typed into it."""
        if os.path.isabs(self.program):
            return self.program if os.access(self.program, os.X_OK) else None
        return find_trusted(self.program)

    def _why_missing(self) -> str:
        if os.path.isabs(self.program):
            return "not an executable file"
        try:
            trusted_program(self.program)
        except UntrustedProgramError as exc:
            hint = f": install the '{exc.package}' package" if exc.package else ""
            return f"{exc.reason}{hint}"
        return "not found"  # installed since which() looked: asked again next time

    def available(self) -> bool:
        return self.which() is not None and has_display(self.env)

    def running(self) -> int:
        """How many dialog processes are open right now (one serving two ids counts once)."""
        return len(set().union(*self._running.values()))

    async def run(
        self, keys: Iterable[str], args: Sequence[str], stdin: bytes | None = None
    ) -> DialogOutcome:
        """Show one dialog (``program *args``) and wait until it ends.

        ``keys`` are the request ids this dialog serves, for :meth:`withdraw`.
        Cancelling this coroutine takes the dialog away before re-raising.
        """
        path = self.which()
        if path is None:
            raise DialogError(self.program, None, self._why_missing())
        stdin_mode = asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE
        loop = asyncio.get_running_loop()
        with tempfile.TemporaryFile() as stderr:
            try:
                transport, watched = await loop.subprocess_exec(
                    lambda: _Watched(loop),
                    path,
                    *args,
                    stdin=stdin_mode,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=stderr,
                    env=self.env,
                    start_new_session=True,  # terminal signals go to the broker, not the dialog
                )
            except OSError as exc:
                raise DialogError(self.program, None, str(exc)) from exc
            proc = asyncio.subprocess.Process(transport, watched, loop)
            keys = tuple(keys)
            for key in keys:
                self._running.setdefault(key, set()).add(proc)
            try:
                stdout = await _talk(proc, watched.exited, stdin)
            except BaseException:
                _signal(proc, signal.SIGTERM)  # at once: the loop may be ending (see _stop)
                reaper = asyncio.ensure_future(_stop(proc, watched.exited))
                self._reapers.add(reaper)
                reaper.add_done_callback(self._reapers.discard)
                try:
                    await asyncio.shield(reaper)
                finally:
                    # Cancelled again, or the reaper with us (loop shutdown): no time to
                    # wait.  Once the reaper has reaped the dialog this does nothing.
                    _signal(proc, signal.SIGKILL)
                raise
            finally:
                self._forget(keys, proc)
                withdrawn_by = self._withdrawn.pop(proc.pid, None)
                transport.close()  # its pipes: a helper the dialog left may hold stdout
            status = proc.returncode if proc.returncode is not None else -1
            if status not in self.answers and withdrawn_by is None:
                stderr.seek(0)
                tail = stderr.read().decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
                raise DialogError(self.program, status, tail)
        return DialogOutcome(status, stdout, withdrawn_by)

    def _forget(self, keys: Sequence[str], proc: asyncio.subprocess.Process) -> None:
        for key in keys:
            procs = self._running.get(key)
            if procs is not None:
                procs.discard(proc)
                if not procs:
                    del self._running[key]

    def withdraw(self, key: str, by: str) -> int:
        """Take away every open dialog serving ``key``; returns how many there were."""
        procs = self._running.get(key, set())
        for proc in procs:
            if proc.returncode is None:
                self._withdrawn[proc.pid] = by
                _signal(proc, signal.SIGTERM)
                asyncio.get_running_loop().call_later(KILL_GRACE, _kill_if_alive, proc)
        return len(procs)


class DialogPrompter:
    """What the kdialog and zenity front-ends share: their dialog processes, the
    question lock (one question at a time), availability and withdrawal.

    Subclasses name their program (:attr:`program`, also the front-end's
    :attr:`name`) and the exit statuses that mean an answer (:attr:`answers`).
    """

    program: ClassVar[str]
    answers: ClassVar[tuple[int, ...]]

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        binary: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        # ``binary``: the absolute path of the dialog program to run (tests inject one);
        # by default the trusted program of a system directory (never PATH).
        program = self.program if binary is None else binary
        self._dialogs = DialogProcesses(program, env, answers=self.answers)
        self._limits = limits or Limits()
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.program

    def available(self) -> bool:
        """The program is installed (trusted, see :meth:`DialogProcesses.which`) and a
        display (X11 or Wayland) is named."""
        return self._dialogs.available()

    def open_dialogs(self) -> int:
        """How many windows of the program this front-end has open right now."""
        return self._dialogs.running()

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        """Take away any window still open for ``request_id``."""
        self._dialogs.withdraw(request_id, by)


def withdrawn_approval(outcome: DialogOutcome) -> Approval | None:
    """The denial a withdrawn dialog stands for, or ``None`` if it was not withdrawn."""
    if outcome.withdrawn_by is None:
        return None
    return Approval(False, Remember.ONCE, f"withdrawn: decided by {outcome.withdrawn_by}")


def password_answer(outcome: DialogOutcome) -> PasswordAnswer:
    """The password a dialog returned; none if it was withdrawn or cancelled."""
    if outcome.withdrawn_by is not None or outcome.status != 0:
        return PasswordAnswer(None)
    return PasswordAnswer(outcome.text())


def _signal(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def _kill_if_alive(proc: asyncio.subprocess.Process) -> None:
    _signal(proc, signal.SIGKILL)


class _Watched(asyncio.subprocess.SubprocessStreamProtocol):
    """The protocol ``create_subprocess_exec`` uses, plus :attr:`exited`, done once the
    process has exited and been reaped.  ``Process.wait()`` (Python 3.11) also waits
    until every pipe is closed, which a helper the dialog left behind may never do.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


async def _drain(stream: asyncio.StreamReader, sink: bytearray) -> None:
    while chunk := await stream.read(4096):
        sink.extend(chunk)


async def _talk(
    proc: asyncio.subprocess.Process, exited: asyncio.Future[None], stdin: bytes | None
) -> bytes:
    """Feed ``stdin``, collect stdout, and return once the process has exited.

    The end of the process, not the end of its stdout, decides: a helper the
    dialog left behind (a D-Bus daemon, say) may hold the pipe open forever.
    """
    assert proc.stdout is not None
    sink = bytearray()
    reader = asyncio.ensure_future(_drain(proc.stdout, sink))
    try:
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()
        await asyncio.shield(exited)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), EOF_GRACE)
        return bytes(sink)
    finally:
        reader.cancel()


async def _stop(proc: asyncio.subprocess.Process, exited: asyncio.Future[None]) -> None:
    """Wait for ``proc`` (already sent SIGTERM) to exit, kill it if it lingers.

    The caller sends SIGTERM itself before starting this task: when the event
    loop is shutting down (``asyncio.run`` cancelling every task), this task
    may be cancelled before it ever runs, and the dialog must still go.
    """
    try:
        await asyncio.wait_for(asyncio.shield(exited), KILL_GRACE)
    except TimeoutError:
        _kill_if_alive(proc)
    await asyncio.shield(exited)
