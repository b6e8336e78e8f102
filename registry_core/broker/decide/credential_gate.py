"""The credential gate: sudo's password for a live grant, asked of the person.

The broker issues a grant with every approved sudo request (``grants.py``);
``ollie-askpass``, run by sudo under the dispatcher, presents it here.  The
password question waits in the same queue as approval questions (one dialog
at a time), and every refusal is a typed error or a ``deny`` reply that
finishes the grant, so a token never answers twice after a refusal.
"""

from __future__ import annotations

import asyncio
import logging

from registry_core.broker.decide.grants import (
    PASSWORD_ATTEMPTS_EXHAUSTED,
    PASSWORD_CANCELLED,
    GrantBook,
    GrantRefused,
)
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.peer.identity import Requester, parent_chain
from registry_core.broker.question import PasswordRequest, Prompter
from registry_core.broker.wire import messages as m

log = logging.getLogger(__name__)


class CredentialGate:
    """Answers ``askpass`` and ``sudo_result`` for the grants in ``grants``."""

    def __init__(self, grants: GrantBook, prompter: Prompter, queue: asyncio.Lock) -> None:
        self.grants = grants
        self.prompter = prompter
        # The broker's question queue: a password is asked only when no other
        # question is open.
        self._queue = queue

    async def askpass(
        self, req: m.AskpassRequest, requester: Requester
    ) -> m.PasswordReply | m.DecisionReply:
        """The password for a live grant, asked of the person; refusals are typed errors.

        A requester inside a sandbox is refused before anything else: no grant is
        looked at or asked for, no front-end (and so no keyring) is consulted, and a
        grant it presents dies (its token has leaked into the sandbox)."""
        if requester.sandboxed:
            leaked = self.grants.finish(req.grant)
            log.warning(
                "refused askpass from pid %d %s (%s)%s",
                requester.pid,
                SANDBOX_LABEL,
                "; ".join(requester.sandbox_reasons),
                "; its grant is withdrawn" if leaked is not None else "",
            )
            raise m.MessageError(
                m.ErrorCode.SANDBOXED_REQUESTER,
                f"askpass refused: the requester is {SANDBOX_LABEL}; "
                "only the dispatcher outside the sandbox may run sudo",
                req.id,
            )
        ancestry = (requester.pid, *(p.pid for p in parent_chain(requester.pid)))
        try:
            grant = self.grants.check(req.grant, requester.uid, ancestry)
        except GrantRefused as exc:
            raise m.MessageError(m.ErrorCode.NO_GRANT, exc.reason, req.id) from exc
        question = PasswordRequest(
            id=f"{grant.approval.id}.p{grant.attempts}",
            approval=grant.approval,
            prompt=req.prompt,
            user=grant.approval.requester.user or _user_name(grant.approval.requester.uid),
            attempt=grant.attempts,
        )
        try:
            async with self._queue:
                async with asyncio.timeout(grant.approval.timeout):
                    answer = await self.prompter.ask_password(question)
        except TimeoutError:
            reason = f"no password within {grant.approval.timeout:g} s"
            return self._refuse(req, reason, m.DecidedBy.TIMEOUT)
        except asyncio.CancelledError:
            self.grants.finish(req.grant)
            raise
        except Exception as exc:
            return self._refuse(req, f"front-end failed: {exc}", m.DecidedBy.NO_FRONT_END)
        if answer.password is None:
            return self._refuse(req, PASSWORD_CANCELLED, m.DecidedBy.USER)
        return m.PasswordReply(id=req.id, password=answer.password)

    def _refuse(self, req: m.AskpassRequest, reason: str, by: m.DecidedBy) -> m.DecisionReply:
        grant = self.grants.finish(req.grant)
        if grant is not None:
            grant.refused = reason
        return m.DecisionReply(id=req.id, decision=m.Decision.DENY, reason=reason, by=by)

    def sudo_result(self, req: m.SudoResultRequest) -> m.AckReply | m.DecisionReply:
        """Finish the grant; a ``deny`` reply when the credential gate refused it.

        sudo exits 1 both when its tool fails and when no password got through;
        the dispatcher cannot tell them apart, the broker can: a cancelled or
        timed-out password, or wrong passwords until sudo gave up (``auth_failed``
        after at least one password was handed out), mean the tool never ran.
        """
        grant = self.grants.finish(req.grant)
        if grant is None or req.exit_code == 0:
            return m.AckReply(id=req.id)
        reason = grant.refused
        if reason is None and req.auth_failed and grant.attempts > 0:
            reason = PASSWORD_ATTEMPTS_EXHAUSTED
        if reason is None:
            return m.AckReply(id=req.id)
        return m.DecisionReply(
            id=req.id, decision=m.Decision.DENY, reason=reason, by=m.DecidedBy.USER
        )


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
