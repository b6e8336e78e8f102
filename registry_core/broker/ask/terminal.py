"""The terminal front-end: asks on the controlling tty (``/dev/tty``).

Used by ``ollie-broker --front-end terminal`` and as the last step of the
in-process fallback chain.  It opens the tty itself (``O_RDWR | O_NOCTTY``),
so it works whatever stdin/stdout are, and reads it with ``loop.add_reader``
on a non-blocking descriptor: no thread ever blocks in ``read``, so a
question can always be cancelled.

Approval: the request (see :mod:`.text`), then ``Approve? [y/N]``: ``y``,
``yes``, ``a`` or ``approve`` approve, anything else (Enter, end of input)
denies; then a numbered "remember" menu whose default (1, Enter) is "only
this time".  For an agent's action (``ollie-approve``) remembered beyond
this once, ``Pattern [suggested]:`` follows: Enter keeps the suggested
pattern, or the person types another, refused (and asked again, at most three
times) unless it covers the action; end of input or three refusals remember
nothing.  Input typed before a question appears is discarded
(``tcflush``), so type-ahead cannot answer it.  Password: echo is turned off
with termios from the moment the question is printed until its one line is
read, and the line is never printed.

Cancellation story: questions are asked one at a time (an
:class:`asyncio.Lock`; a question cancelled while waiting for the lock has
shown nothing).  A cancelled question discards half-typed input (a
half-typed password must not reach the shell afterwards), restores the
terminal modes it found, prints ``(request withdrawn)`` and re-raises; the
modes are restored in ``finally`` on every path.

A broker running in the background of its terminal cannot read it (the
kernel would stop it with SIGTTIN): questions then fail with
:class:`~registry_core.broker.ask.dialog_process.TerminalError` (= deny).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
from collections.abc import Awaitable, Callable
from typing import TypeVar

from registry_core.broker.ask.action_text import (
    MAX_PATTERN_TRIES,
    editable_pattern,
    pattern_problem,
    pattern_question,
    pattern_words,
)
from registry_core.broker.ask.dialog_process import TerminalError
from registry_core.broker.ask.text import (
    APPROVE_CHOICES,
    DENY_CHOICES,
    Limits,
    approval_text,
    clean,
    password_text,
)
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)

DEFAULT_TTY = "/dev/tty"
WITHDRAWN = "(request withdrawn)"
APPROVE_PROMPT = "Approve? [y]es / [N]o (default: no): "
CHOICE_PROMPT = "Choice [1]: "
PATTERN_PROMPT = "Pattern [{suggested}]: "
PASSWORD_PROMPT = "Password (not shown): "  # noqa: S105  (a label, not a secret)
_YES = frozenset({"y", "yes", "a", "approve"})
_RULE = "=" * 72

T = TypeVar("T")


class _Tty:
    """The terminal for one question: its descriptor, the modes it had, line reads."""

    def __init__(self, path: str) -> None:
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise TerminalError(f"cannot open {path}: {exc.strerror}") from exc
        try:
            if not os.isatty(self.fd):
                raise TerminalError(f"{path} is not a terminal")
            self.saved = termios.tcgetattr(self.fd)
        except BaseException:
            os.close(self.fd)
            raise

    def in_background(self) -> bool:
        """Whether we are a background job of this terminal (reading it would stop us)."""
        try:
            foreground = os.tcgetpgrp(self.fd)
        except OSError:  # not our controlling terminal: job control does not apply
            return False
        return foreground != os.getpgrp()

    def set_mode(self, *, echo: bool) -> None:
        """Line mode with ``echo`` on or off (the newline is echoed either way)."""
        iflag, oflag, cflag, lflag, ispeed, ospeed, cc = termios.tcgetattr(self.fd)
        iflag |= termios.ICRNL
        oflag |= termios.OPOST | termios.ONLCR
        lflag |= termios.ICANON | termios.ECHONL
        lflag = lflag | termios.ECHO if echo else lflag & ~termios.ECHO
        attrs = [iflag, oflag, cflag, lflag, ispeed, ospeed, cc]
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)

    def restore(self) -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)

    def flush_input(self) -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(self.fd, termios.TCIFLUSH)

    def write_now(self, text: str) -> None:
        """Best effort, never waits (used where awaiting is not possible)."""
        with contextlib.suppress(OSError):
            os.write(self.fd, text.encode("utf-8", "replace"))

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8", "replace"))
        loop = asyncio.get_running_loop()
        while data:
            try:
                data = data[os.write(self.fd, data) :]
            except BlockingIOError:  # output stopped (^S) or a slow terminal
                ready = loop.create_future()
                loop.add_writer(self.fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(self.fd)
            except OSError as exc:
                raise TerminalError(f"cannot write to the terminal: {exc.strerror}") from exc

    async def read_line(self) -> bytes | None:
        """One line as typed (canonical mode), or ``None`` at end of input."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[bytes] = loop.create_future()

        def readable() -> None:
            if result.done():
                return
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                return
            except OSError as exc:
                result.set_exception(TerminalError(f"terminal gone: {exc.strerror}"))
                return
            result.set_result(data)

        loop.add_reader(self.fd, readable)
        try:
            data = await result
        finally:
            loop.remove_reader(self.fd)
        return data or None

    def close(self) -> None:
        os.close(self.fd)


class TerminalPrompter:
    """Asks on a terminal, one question at a time."""

    def __init__(self, tty_path: str = DEFAULT_TTY, *, limits: Limits | None = None) -> None:
        self._path = tty_path
        self._limits = limits or Limits()
        self._lock = asyncio.Lock()
        self._active: _Tty | None = None
        self._active_id: str | None = None
        self._prompt = ""

    @property
    def name(self) -> str:
        return "terminal"

    @property
    def tty_path(self) -> str:
        return self._path

    def available(self) -> bool:
        """Whether the terminal can be opened (``/dev/tty``: there is a controlling tty)."""
        try:
            _Tty(self._path).close()
        except TerminalError:
            return False
        return True

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        async with self._lock:
            return await self._with_tty(request.id, lambda tty: self._approve(tty, request))

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        async with self._lock:
            return await self._with_tty(request.id, lambda tty: self._password(tty, request))

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        """Print one line saying how ``request_id`` was decided elsewhere."""
        verdict = "allowed" if approved else "denied"
        line = f"[ollie] request {clean(request_id)}: {verdict} ({clean(by)})"
        if self._active is not None:
            if self._active_id != request_id:
                self._active.write_now(f"\r\n{line}\r\n{self._prompt}")
            return
        try:
            tty = _Tty(self._path)
        except TerminalError:
            return
        try:
            if not tty.in_background():
                tty.write_now(f"{line}\r\n")
        finally:
            tty.close()

    async def _with_tty(self, request_id: str, body: Callable[[_Tty], Awaitable[T]]) -> T:
        tty = _Tty(self._path)
        if tty.in_background():  # even restoring its modes would stop us (SIGTTOU)
            tty.close()
            raise TerminalError("the broker is not in the foreground of its terminal")
        self._active, self._active_id = tty, request_id
        try:
            return await body(tty)
        except asyncio.CancelledError:
            tty.flush_input()  # a half-typed answer or password must not reach the shell
            tty.restore()
            tty.write_now(f"\r\n{WITHDRAWN}\r\n")
            raise
        finally:
            self._active, self._active_id, self._prompt = None, None, ""
            tty.restore()
            tty.close()

    async def _ask(self, tty: _Tty, prompt: str) -> str | None:
        self._prompt = prompt
        await tty.write(prompt)
        line = await tty.read_line()
        if line is None:
            await tty.write("\n")
            return None
        return line.decode("utf-8", "replace").strip()

    async def _approve(self, tty: _Tty, request: ApprovalRequest) -> Approval:
        text = approval_text(request, self._limits)
        tty.flush_input()  # type-ahead must not answer a question it never saw
        tty.set_mode(echo=True)
        body = "\n".join([_RULE, text.title, _RULE, *text.plain_lines(), ""])
        await tty.write(f"\n{body}\n")
        answer = await self._ask(tty, APPROVE_PROMPT)
        if answer is None:
            await tty.write("-> Denied (end of input).\n")
            return Approval(False, Remember.ONCE, "no answer on the terminal (end of input)")
        approved = answer.lower() in _YES
        offered = APPROVE_CHOICES if approved else DENY_CHOICES
        choices = tuple(c for c in offered if c in request.remember_choices)
        remember = choices[0]
        if len(choices) > 1:  # else nothing to choose: this once only
            noun = "approval" if approved else "denial"
            menu = [f"Remember this {noun}?"]
            menu += [f"  {i}) {c.label}" for i, c in enumerate(choices, start=1)]
            await tty.write("\n".join(menu) + "\n")
            choice = await self._ask(tty, CHOICE_PROMPT)
            if choice and choice.isdecimal() and 1 <= int(choice) <= len(choices):
                remember = choices[int(choice) - 1]
        reason = "approved on the terminal" if approved else "denied on the terminal"
        pattern: str | None = None
        if remember is not Remember.ONCE and editable_pattern(request) is not None:
            pattern, problem = await self._pattern(tty, request)
            if pattern is None:
                remember = Remember.ONCE
                reason += f" (not remembered: {problem})"
        verdict = "Approved" if approved else "Denied"
        covering = f", for {pattern_words(request, pattern)}" if pattern is not None else ""
        await tty.write(f"-> {verdict}: {remember.label.lower()}{covering}.\n")
        return Approval(approved, remember, reason, pattern)

    async def _pattern(self, tty: _Tty, request: ApprovalRequest) -> tuple[str | None, str]:
        """(the pattern the person kept or typed, "") or (None, why nothing is remembered)."""
        suggested = editable_pattern(request)
        assert suggested is not None
        await tty.write("\n".join(pattern_question(request)) + "\n")
        problem = "no acceptable pattern"
        for _ in range(MAX_PATTERN_TRIES):
            typed = await self._ask(tty, PATTERN_PROMPT.format(suggested=clean(suggested)))
            if typed is None:
                return None, "no pattern confirmed (end of input)"
            if not typed:
                return suggested, ""
            found = pattern_problem(request, typed)
            if found is None:
                return typed, ""
            problem = found
            await tty.write(f"Not accepted: {problem}. Enter keeps the suggestion.\n")
        return None, problem

    async def _password(self, tty: _Tty, request: PasswordRequest) -> PasswordAnswer:
        text = password_text(request)
        tty.flush_input()
        tty.set_mode(echo=False)  # already while the question prints: typing may start early
        body = "\n".join([_RULE, text.title, _RULE, *text.plain_lines(), ""])
        await tty.write(f"\n{body}\n")
        self._prompt = PASSWORD_PROMPT
        await tty.write(PASSWORD_PROMPT)
        line = await tty.read_line()
        if line is None:
            await tty.write("\n-> Cancelled.\n")
            return PasswordAnswer(None)
        if line.endswith(b"\n"):
            line = line[:-1]
        try:
            password: str | None = line.decode("utf-8")
        except UnicodeDecodeError:
            password = None  # raised below, outside this block: the error object holds the bytes
        if password is None:
            raise TerminalError("the password is not valid UTF-8")
        return PasswordAnswer(password)
