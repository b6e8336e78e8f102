"""The broker core: decides ``elevate`` requests and serves the credential gate.

Transport-free: the server calls these coroutines with parsed messages and
the kernel-verified requester, and writes back what they return.

Ordering: questions to the person are asked one at a time, in arrival
order (an ``asyncio.Lock`` is FIFO).  A remembered policy is checked on
arrival and again when a request reaches the head of the queue, so two
queued requests for the same tool need one answer.  Cancelling a request's
task (the requester disconnected, the broker shuts down) withdraws its
question; every way out that is not a person's "yes" is a denial.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from registry_core.broker.decide.action_flow import action_approval_request, remembered_rule
from registry_core.broker.decide.asking import elevate_question, settle_answer
from registry_core.broker.decide.credential_gate import CredentialGate
from registry_core.broker.decide.denials import UNATTENDED, Denial, DenialLog, DeniedBy
from registry_core.broker.decide.facts import REQUEST_CODE_TOOL, RequestFacts, gather_facts
from registry_core.broker.decide.grants import GrantBook
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, ApprovalRequest, Prompter, Remember
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.record.recording import record_decision
from registry_core.broker.remember.action_rules import RULES_FILE as ACTION_RULES_FILE
from registry_core.broker.remember.action_rules import ActionRuleStore
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire import messages as m
from registry_core.errors import ToolNotFoundError, ToolUnavailableError
from registry_core.registry import Registry
from registry_core.version import version

log = logging.getLogger(__name__)

DEFAULT_PROMPT_TIMEOUT = 60.0
DEFAULT_QUEUE_TIMEOUT = 600.0
"""How long a request may wait for its turn before it is denied (``by: timeout``)."""


@dataclass
class Pending:
    """A request waiting for a person (what the tray lists)."""

    request: ApprovalRequest
    since: float
    showing: bool = False
    denied: str | None = None
    """Set by :meth:`Broker.deny_pending`: denied with this reason at its turn."""


@dataclass(frozen=True)
class QueueInfo:
    """Where one pending request stands: "request 1 of N", and how many more its process sent."""

    position: int
    total: int
    same_process: int


@dataclass
class BrokerConfig:
    host: str = field(default_factory=socket.gethostname)
    prompt_timeout: float = DEFAULT_PROMPT_TIMEOUT
    sudo_user: str = "root"
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT


class Broker:
    """Decides elevation requests with a :class:`Prompter`, policies and an audit log."""

    def __init__(
        self,
        *,
        registry: Callable[[], Registry],
        prompter: Prompter,
        policies: PolicyStore,
        audit: AuditLog,
        config: BrokerConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        actions: ActionRuleStore | None = None,
        denials: DenialLog | None = None,
        registry_for: Callable[[str], Registry] | None = None,
    ) -> None:
        self.registry = registry
        # A snapshot that need only hold the named tool (a one-name lookup), when the
        # owner has a cheaper way to build one than ``registry()``.
        self.registry_for = registry_for
        # Denials nobody made by hand (remembered deny, paused, timeout, unknown tool),
        # for the desktop to show (denials.py).
        self.denials = denials
        self.prompter = prompter
        self.policies = policies
        # Agents' own actions: their rules live beside policies.yaml unless given.
        self.actions = actions or ActionRuleStore(policies.path.parent / ACTION_RULES_FILE)
        self.audit = audit
        self.config = config or BrokerConfig()
        self.grants = GrantBook(clock)
        self.paused = False
        self.closing = False
        self.pending: dict[str, Pending] = {}
        self._clock = clock
        self._queue = asyncio.Lock()
        self._ids = itertools.count(1)
        self._listeners: list[Callable[[], None]] = []
        self.gate = CredentialGate(self.grants, prompter, self._queue)

    # --- observers (the tray's menu and icon) ---------------------------------

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._changed()

    # --- elevate -------------------------------------------------------------

    def _snapshot(self, req: m.ElevateRequest) -> Registry:
        if self.registry_for is not None:
            return self.registry_for(req.tool)
        return self.registry()

    def _facts(self, req: m.ElevateRequest, requester: Requester) -> RequestFacts:
        # A forwarded request runs a file deployed to the remote tools directory.
        remote_dir = requester.tools_dir if requester.remote and requester.tools_dir else None
        try:
            return gather_facts(self._snapshot(req), req, remote_tools_dir=remote_dir)
        except ToolNotFoundError as exc:
            self._unattended(
                req.tool, req.host or self.config.host, DeniedBy.UNKNOWN_TOOL, str(exc)
            )
            raise m.MessageError(m.ErrorCode.UNKNOWN_TOOL, str(exc), req.id) from exc
        except ToolUnavailableError as exc:
            raise m.MessageError(m.ErrorCode.TOOL_UNAVAILABLE, str(exc), req.id) from exc

    def _policy_decision(
        self,
        ar: ApprovalRequest,
        request_id: m.RequestId = 0,
    ) -> m.DecisionReply | None:
        if ar.action is not None:
            rule = remembered_rule(self.actions, ar)
            if rule is None:
                return None
            reason = f"remembered: {rule.describe()}"
            return self._reply(
                ar, rule.decision, reason, m.DecidedBy.POLICY, rule.remember, request_id=request_id
            )
        policy = self.policies.lookup(ar.tool, ar.kind, ar.host, ar.executable, ar.sha256)
        if policy is None:
            return None
        if policy.decision is m.Decision.ALLOW and ar.once_only:
            return None  # remembered allows never cover free-form code or a mismatch
        reason = f"remembered: {policy.describe()}"
        return self._reply(
            ar, policy.decision, reason, m.DecidedBy.POLICY, policy.remember, request_id=request_id
        )

    def _reply(
        self,
        ar: ApprovalRequest,
        decision: m.Decision,
        reason: str,
        by: m.DecidedBy,
        remember: Remember | None = None,
        *,
        request_id: m.RequestId = 0,
    ) -> m.DecisionReply:
        grant = None
        # A requester inside a sandbox gets no grant: sudo cannot run there, and only
        # the dispatcher outside the sandbox may ever present one.
        sudo = ar.kind is m.Kind.SUDO and not ar.requester.sandboxed
        if decision is m.Decision.ALLOW and sudo:
            issued = self.grants.issue(ar, ar.requester.pid, ar.requester.uid)
            grant = issued.token
        record_decision(self.audit, ar, decision, by, remember, reason)
        if decision is m.Decision.DENY and by in UNATTENDED:
            self._unattended(ar.tool, ar.host, UNATTENDED[by], reason)
        return m.DecisionReply(
            id=request_id,
            decision=decision,
            reason=reason,
            by=by,
            remember=remember.value if remember else None,
            grant=grant,
        )

    def _unattended(self, tool: str, host: str, why: DeniedBy, reason: str) -> None:
        if self.denials is not None:
            self.denials.add(Denial(time.time(), tool, host, why, reason))

    def elevate_now(
        self, req: m.ElevateRequest, requester: Requester
    ) -> m.DecisionReply | ApprovalRequest:
        """Decide ``req`` at once when no person is needed (shutting down, paused, a
        remembered policy, no front-end); else the question to pass to
        :meth:`elevate_asked`.  Raises MessageError for unknown or unusable tools.

        Synchronous: the server answers these without a task, so decisions that
        need no person never wait behind each other or behind an open question."""
        facts = self._facts(req, requester)
        ar = elevate_question(
            req,
            requester,
            facts,
            request_id=f"r{next(self._ids)}",
            host=self.config.host,
            prompt_timeout=self.config.prompt_timeout,
        )
        reply = self._decide_now(ar, req.id)
        return ar if reply is None else reply

    async def elevate_asked(
        self,
        req: m.ElevateRequest,
        ar: ApprovalRequest,
        progress: Callable[[m.ProgressState], None] | None = None,
    ) -> m.DecisionReply:
        """Ask the person about ``ar`` (what :meth:`elevate_now` returned for ``req``)."""
        # The requester's own deadline covers waiting behind other questions too.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.timeout if req.timeout is not None else None
        return await self._ask_person(ar, progress, deadline, req.id)

    async def elevate(
        self,
        req: m.ElevateRequest,
        requester: Requester,
        progress: Callable[[m.ProgressState], None] | None = None,
    ) -> m.DecisionReply:
        """Decide one request; raises MessageError for unknown or unusable tools."""
        first = self.elevate_now(req, requester)
        if isinstance(first, m.DecisionReply):
            return first
        return await self.elevate_asked(req, first, progress)

    def action_now(
        self, req: m.ActionRequest, requester: Requester
    ) -> m.DecisionReply | ApprovalRequest:
        """An agent's own action decided at once (a remembered rule, paused...), or
        the question to pass to :meth:`action_asked`.

        A requester inside a sandbox is refused with ``sandboxed_requester``, as its
        ``askpass`` is: an agent's actions come from the agent's own hook, never
        from a tool, which could otherwise dress its request up as the agent's."""
        if requester.sandboxed:
            log.warning(
                "refused action from pid %d %s (%s)",
                requester.pid,
                SANDBOX_LABEL,
                "; ".join(requester.sandbox_reasons),
            )
            raise m.MessageError(
                m.ErrorCode.SANDBOXED_REQUESTER,
                f"action refused: the requester is {SANDBOX_LABEL}; "
                "only the agent's own hook outside the sandbox may ask",
                req.id,
            )
        ar = action_approval_request(
            req,
            requester,
            request_id=f"r{next(self._ids)}",
            host=self.config.host,
            timeout=self.config.prompt_timeout,
        )
        reply = self._decide_now(ar, req.id)
        return ar if reply is None else reply

    async def action_asked(
        self,
        req: m.ActionRequest,
        ar: ApprovalRequest,
        progress: Callable[[m.ProgressState], None] | None = None,
    ) -> m.DecisionReply:
        """Ask the person about the action ``ar`` (from :meth:`action_now`)."""
        # As for elevate, the requester's own deadline covers waiting behind others.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.timeout if req.timeout is not None else None
        return await self._ask_person(ar, progress, deadline, req.id)

    async def action(
        self,
        req: m.ActionRequest,
        requester: Requester,
        progress: Callable[[m.ProgressState], None] | None = None,
    ) -> m.DecisionReply:
        """Decide an agent's own action: a remembered rule, else the person."""
        first = self.action_now(req, requester)
        if isinstance(first, m.DecisionReply):
            return first
        return await self.action_asked(req, first, progress)

    def _decide_now(self, ar: ApprovalRequest, request_id: m.RequestId) -> m.DecisionReply | None:
        """The decisions that need no person; ``None``: ask one."""
        deny = m.Decision.DENY
        if self.closing:
            return self._reply(
                ar, deny, "the broker is shutting down", m.DecidedBy.SHUTDOWN, request_id=request_id
            )
        if self.paused:
            return self._reply(
                ar, deny, "requests are paused", m.DecidedBy.PAUSED, request_id=request_id
            )
        remembered = self._policy_decision(ar, request_id)
        if remembered is not None:
            return remembered
        if not self.prompter.available():
            reason = f"no front-end can ask ({self.prompter.name} is unavailable)"
            return self._reply(ar, deny, reason, m.DecidedBy.NO_FRONT_END, request_id=request_id)
        return None

    async def _ask_person(
        self,
        ar: ApprovalRequest,
        progress: Callable[[m.ProgressState], None] | None,
        deadline: float | None,
        request_id: m.RequestId,
    ) -> m.DecisionReply:
        reply = await self._queue_and_ask(ar, progress, deadline)
        return dataclasses.replace(reply, id=request_id)

    async def _queue_and_ask(
        self,
        ar: ApprovalRequest,
        progress: Callable[[m.ProgressState], None] | None,
        deadline: float | None = None,
    ) -> m.DecisionReply:
        deny = m.Decision.DENY
        self.pending[ar.id] = Pending(ar, self._clock())
        self._changed()
        outcome: m.DecisionReply | None = None
        try:
            # The broker's own queue deadline holds even for a requester without one.
            queued_until = asyncio.get_running_loop().time() + self.config.queue_timeout
            turn_by = queued_until if deadline is None else min(deadline, queued_until)
            if not await self._queue_turn(turn_by):
                if turn_by == deadline:
                    within = _seconds(ar.timeout)
                    reason = f"no answer within {within} s (other questions were still open)"
                else:
                    reason = f"waited more than {self.config.queue_timeout:g} s for its turn"
                return self._reply(ar, deny, reason, m.DecidedBy.TIMEOUT)
            try:
                outcome = self._recheck(ar)
                if outcome is None:
                    if progress is not None:
                        progress(m.ProgressState.WAITING_FOR_USER)
                    self.pending[ar.id].showing = True
                    self._changed()
                    outcome = await self._ask(self._until(ar, deadline))
            finally:
                self._queue.release()
        except asyncio.CancelledError:
            by = m.DecidedBy.SHUTDOWN if self.closing else m.DecidedBy.CLIENT_GONE
            reason = "the broker is shutting down" if self.closing else "the requester went away"
            self._reply(ar, deny, reason, by)
            self.prompter.request_decided(ar.id, False, by.value)
            raise
        finally:
            self.pending.pop(ar.id, None)
            self._changed()
        return outcome

    async def _queue_turn(self, deadline: float | None) -> bool:
        """Wait for the prompt queue; False when ``deadline`` (loop time) passed first."""
        try:
            async with asyncio.timeout_at(deadline):
                await self._queue.acquire()
        except TimeoutError:
            return False
        return True

    @staticmethod
    def _until(ar: ApprovalRequest, deadline: float | None) -> ApprovalRequest:
        """``ar`` with a countdown that ends by the requester's ``deadline``."""
        if deadline is None:
            return ar
        left = deadline - asyncio.get_running_loop().time()
        return dataclasses.replace(ar, timeout=max(min(ar.timeout, left), 0.001))

    def queue_info(self, request_id: str) -> QueueInfo | None:
        """Position (1-based, arrival order) among pending requests; None if not pending."""
        order = list(self.pending)
        if request_id not in self.pending:
            return None
        pid = self.pending[request_id].request.requester.pid
        others = sum(1 for p in self.pending.values() if p.request.requester.pid == pid) - 1
        return QueueInfo(order.index(request_id) + 1, len(order), others)

    def deny_pending(self, pid: int | None = None, reason: str = "") -> list[str]:
        """Deny every queued request (of process ``pid``) when its turn comes; their ids.

        The one being shown is the front-end's to answer (the tray denies it)."""
        why = reason or "denied with all pending requests"
        marked = []
        for item in self.pending.values():
            if item.showing or (pid is not None and item.request.requester.pid != pid):
                continue
            item.denied = why
            marked.append(item.request.id)
        return marked

    def _recheck(self, ar: ApprovalRequest) -> m.DecisionReply | None:
        """At the head of the queue: denied in bulk, paused, or a policy set meanwhile decide."""
        item = self.pending.get(ar.id)
        if item is not None and item.denied is not None:
            return self._reply(ar, m.Decision.DENY, item.denied, m.DecidedBy.USER, Remember.ONCE)
        if self.paused:
            return self._reply(ar, m.Decision.DENY, "requests are paused", m.DecidedBy.PAUSED)
        return self._policy_decision(ar)

    async def _ask(self, ar: ApprovalRequest) -> m.DecisionReply:
        deny = m.Decision.DENY
        try:
            async with asyncio.timeout(ar.timeout):
                answer: Approval = await self.prompter.ask_approval(ar)
        except TimeoutError:
            reason = f"no answer within {_seconds(ar.timeout)} s"
            self.prompter.request_decided(ar.id, False, m.DecidedBy.TIMEOUT.value)
            return self._reply(ar, deny, reason, m.DecidedBy.TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"the front-end failed: {exc}"
            return self._reply(ar, deny, reason, m.DecidedBy.NO_FRONT_END)
        if answer.no_front_end and not answer.approved:
            # Nobody was asked (``--front-end none``): not a person's "no".
            reason = answer.reason or "no front-end"
            return self._reply(ar, deny, reason, m.DecidedBy.NO_FRONT_END)
        if answer.timed_out and not answer.approved:
            # The dialog's countdown ended first: the same unattended timeout as above.
            reason = answer.reason or f"no answer within {_seconds(ar.timeout)} s"
            return self._reply(ar, deny, reason, m.DecidedBy.TIMEOUT)
        decision, reason, remember = settle_answer(ar, answer, self.policies, self.actions)
        return self._reply(ar, decision, reason, m.DecidedBy.USER, remember)

    # --- credential gate ---------------------------------------------------------

    async def askpass(
        self, req: m.AskpassRequest, requester: Requester
    ) -> m.PasswordReply | m.DecisionReply:
        """sudo's password for a live grant (:meth:`CredentialGate.askpass`)."""
        return await self.gate.askpass(req, requester)

    def sudo_result(self, req: m.SudoResultRequest) -> m.AckReply | m.DecisionReply:
        """Finish a grant (:meth:`CredentialGate.sudo_result`)."""
        return self.gate.sudo_result(req)

    def status(self, req: m.StatusRequest) -> m.StatusReply:
        return m.StatusReply(
            id=req.id, pending=len(self.pending), paused=self.paused, version=version()
        )

    def begin_shutdown(self) -> None:
        """From now on every request is denied; grants die."""
        self.closing = True
        self.grants.withdraw_all()
        self._changed()


def _seconds(value: float) -> str:
    """A countdown in words: to the hundredth (what is left of a requester's deadline
    is a hair under what it asked for)."""
    return f"{round(value, 2):g}"


__all__ = ["REQUEST_CODE_TOOL", "Broker", "BrokerConfig", "Pending", "QueueInfo"]
