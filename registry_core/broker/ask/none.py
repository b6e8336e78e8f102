"""The ``none`` front-end (servers, CI): nobody is there to ask, so it denies.

The broker core decides by remembered policies before it asks a front-end;
whatever reaches this one is denied once ("no front-end") and every
password question is cancelled.  It never blocks, so there is nothing to
cancel and nothing to take away.
"""

from __future__ import annotations

from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)

NO_FRONT_END = "no front-end"


class NonePrompter:
    """Never asks: every approval is denied once, every password cancelled."""

    @property
    def name(self) -> str:
        return "none"

    def available(self) -> bool:
        return True

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        return Approval(False, Remember.ONCE, NO_FRONT_END, no_front_end=True)

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        return PasswordAnswer(None)

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        """Nothing is shown, so nothing to update."""
