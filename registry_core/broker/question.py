"""The front-end seam: what the broker asks a person, and the ``Prompter`` protocol.

The broker core awaits a prompter's coroutine for each question.  It cancels
that coroutine (``asyncio.CancelledError``) when the answer is no longer
wanted: the requester disconnected, the countdown ran out, the broker is
shutting down.  A prompter must then take its dialog away and re-raise.  Any
exception other than cancellation counts as "could not ask" and the request
is denied (fail closed).

The Qt tray, the terminal, kdialog and zenity each implement
:class:`Prompter`; nothing else knows which one is running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from registry_core.broker.peer.identity import Requester
from registry_core.broker.wire.messages import ActionDisplay, Kind, PatternKind

# Shown wherever an action's description is not the command that would run.
DETAIL_DIFFERS = "the description differs from the command that would run"


class Remember(StrEnum):
    """How long a person's answer stands (the dialog's remember choice)."""

    ONCE = "once"
    SESSION = "session"
    MINUTES_15 = "15m"
    HOUR = "1h"
    ALWAYS = "always"
    DENY_ALWAYS = "deny_always"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Remember.ONCE: "Only this time",
    Remember.SESSION: "For this session",
    Remember.MINUTES_15: "For 15 minutes",
    Remember.HOUR: "For 1 hour",
    Remember.ALWAYS: "Always",
    Remember.DENY_ALWAYS: "Deny always",
}


@dataclass(frozen=True)
class ActionDetails:
    """An agent's own action (``action`` request): what the dialog shows instead of a tool.

    ``agent``, ``tool``, ``summary`` and ``detail`` are the requester's words;
    ``pattern`` is what "remember" would cover (the person may narrow or edit it).
    """

    agent: str
    tool: str
    summary: str
    detail: str | None
    display: ActionDisplay | None
    command: str | None
    path: str | None
    pattern_kind: PatternKind
    pattern: str
    session: str | None = None
    # The requester's ``detail`` is not the command that would run (``action_flow.
    # detail_differs``): flagged in every dialog, and the answer is never remembered.
    detail_differs: bool = False


@dataclass(frozen=True)
class ApprovalRequest:
    """Everything the approval dialog shows. Tool facts come from the broker's registry."""

    id: str
    tool: str
    kind: Kind
    description: str
    variant: int | None
    executable: str | None
    sha256: str | None
    argv: tuple[str, ...]
    args: Mapping[str, Any]
    cwd: str
    requester: Requester
    host: str
    timeout: float
    code: str | None = None
    mismatches: tuple[str, ...] = ()
    remote: bool = False
    # What a verified remote (an ollie-remote forward) said its host name is,
    # when that differs from ``host`` (which comes from our own record).
    claimed_host: str | None = None
    # The agent/client the request came through (e.g. an MCP client's name), as the
    # requester says: shown and audited as a claim next to the process facts.
    client: str | None = None
    # Set for an agent's own action (``action``): no registry tool is involved.
    action: ActionDetails | None = None

    @property
    def what(self) -> str:
        """What is asked, in words."""
        if self.action is not None:
            return f"let {self.action.agent} use its tool {self.action.tool}"
        if self.kind is Kind.SUDO:
            return "run as root via sudo"
        return "run outside the sandbox as you"

    @property
    def remember_choices(self) -> tuple[Remember, ...]:
        """The remember choices the broker honours for this request.

        Free-form code and a registry mismatch are approved one at a time (a
        remembered deny stays possible); an action whose description is not the
        command that would run is never remembered at all."""
        if self.action is not None and self.action.detail_differs:
            return (Remember.ONCE,)
        if self.code is not None or self.mismatches:
            return (Remember.ONCE, Remember.DENY_ALWAYS)
        return tuple(Remember)

    @property
    def once_only(self) -> bool:
        """An approval of this request counts for this once only."""
        return Remember.ALWAYS not in self.remember_choices

    @property
    def sandboxed(self) -> bool:
        """The requester runs inside a sandbox (see ``confinement.py``)."""
        return self.requester.sandboxed

    @property
    def short_sha(self) -> str:
        return (self.sha256 or "")[:12]


@dataclass(frozen=True)
class Approval:
    approved: bool
    remember: Remember = Remember.ONCE
    reason: str = ""
    # For an action: the remember pattern as the person left it (None: as suggested).
    pattern: str | None = None
    # The front-end's own countdown ran out: nobody answered (a timeout, not a "no").
    timed_out: bool = False
    # Nobody was there to ask (the ``none`` front-end): audited as no_front_end.
    no_front_end: bool = False


@dataclass(frozen=True)
class PasswordRequest:
    """The credential gate's question (for an approval that already passed)."""

    id: str
    approval: ApprovalRequest
    prompt: str
    user: str
    attempt: int
    max_attempts: int = 3

    @property
    def retry(self) -> bool:
        return self.attempt > 1

    @property
    def retry_text(self) -> str:
        if not self.retry:
            return ""
        return f"Wrong password, try again ({self.attempt}/{self.max_attempts})"


@dataclass(frozen=True)
class PasswordAnswer:
    """``password is None`` means cancel (= deny)."""

    password: str | None = field(repr=False)
    store_in_keyring: bool = False


@runtime_checkable
class Prompter(Protocol):
    """A front-end that can ask a person."""

    @property
    def name(self) -> str: ...

    def available(self) -> bool:
        """Can this front-end ask anybody right now?"""
        ...

    async def ask_approval(self, request: ApprovalRequest) -> Approval: ...

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer: ...

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        """The request was decided elsewhere (policy, timeout, withdrawal): update UI."""
        ...
