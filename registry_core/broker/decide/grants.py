"""Grants: the single-use tokens that tie a sudo password prompt to an approval.

After a ``sudo`` request passes the elevation gate, the broker issues a grant.
The dispatcher hands the token to ``ollie-askpass`` (through sudo's
environment); the broker answers an ``askpass`` only for a live grant, asked
by a process descending from the approved requester.  A grant covers one
sudo run (up to sudo's three attempts) and dies when that run reports back,
when it expires, or when it was presented after finishing (replay).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from registry_core.broker.question import ApprovalRequest

GRANT_LIFETIME = 300.0
MAX_ATTEMPTS = 3

# The credential gate's refusals, as the requester reads them (one stderr line, exit 77).
PASSWORD_CANCELLED = "password entry cancelled"  # noqa: S105 - a message, not a secret
PASSWORD_ATTEMPTS_EXHAUSTED = "wrong password, no attempts left"  # noqa: S105


@dataclass
class Grant:
    token: str = field(repr=False)
    approval: ApprovalRequest
    requester_pid: int
    requester_uid: int
    expires: float
    attempts: int = 0
    finished: bool = False
    # Why the credential gate refused this grant (cancelled, timed out, ...), if it did:
    # the dispatcher learns it from the reply to ``sudo_result`` and exits 77.
    refused: str | None = None


class GrantRefused(Exception):
    """An askpass request that no live grant covers; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)  # pragma: no mutate (callers read .reason)


class GrantBook:
    """Issues and checks grants. Used from the broker's event loop only."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, lifetime: float = GRANT_LIFETIME
    ) -> None:
        self._clock = clock
        self._lifetime = lifetime
        self._grants: dict[str, Grant] = {}

    def issue(self, approval: ApprovalRequest, pid: int, uid: int) -> Grant:
        self._prune()
        token = secrets.token_urlsafe(32)  # pragma: no mutate (33 or the default: as good)
        grant = Grant(token, approval, pid, uid, self._clock() + self._lifetime)
        self._grants[token] = grant
        return grant

    def _prune(self) -> None:
        now = self._clock()
        for token in [t for t, g in self._grants.items() if g.expires < now - self._lifetime]:
            del self._grants[token]

    def check(self, token: str, uid: int, ancestry: tuple[int, ...]) -> Grant:
        """The grant for an askpass from a process of ``uid`` whose ancestors are ``ancestry``."""
        grant = self._grants.get(token)
        if grant is None:
            raise GrantRefused("unknown grant")
        if grant.finished:
            raise GrantRefused("grant already used")
        if self._clock() > grant.expires:
            grant.finished = True
            raise GrantRefused("grant expired")
        if uid != grant.requester_uid:
            raise GrantRefused("grant belongs to another user")
        if grant.requester_pid not in ancestry:
            raise GrantRefused("askpass does not descend from the approved requester")
        if grant.attempts >= MAX_ATTEMPTS:
            grant.finished = True
            raise GrantRefused("no attempts left")
        grant.attempts += 1
        return grant

    def finish(self, token: str) -> Grant | None:
        grant = self._grants.get(token)
        if grant is not None:
            grant.finished = True
        return grant

    def withdraw_all(self) -> None:
        for grant in self._grants.values():
            grant.finished = True
