"""The question the broker puts to a person about a tool, and what the answer decides.

Both halves are rules, not plumbing: which host a request is about (the
broker's own record, never a local requester's claim), how long the person
has, and which answers may be remembered (never an allow for free-form code
or a request that differs from the registry).
"""

from __future__ import annotations

from registry_core.broker.decide.action_flow import remember_answer
from registry_core.broker.decide.facts import RequestFacts
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, ApprovalRequest, Remember
from registry_core.broker.remember.action_rules import ActionRuleStore
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire import messages as m


def elevate_question(
    req: m.ElevateRequest,
    requester: Requester,
    facts: RequestFacts,
    *,
    request_id: str,
    host: str,
    prompt_timeout: float,
) -> ApprovalRequest:
    """The approval question for ``req`` on the broker's ``host``."""
    claimed: str | None = None  # pragma: no mutate (both branches set it)
    if requester.remote and requester.host:
        # Forwarded by ollie-remote: the host is our own record, the request's
        # ``host`` only a claim (see registry_core/remote/identify.py).
        asked_host = requester.host
        claimed = req.host if req.host and req.host != asked_host else None
    else:
        # A local connection: this host, whatever the request claims. Trusting the
        # claim would let any local process (a sandboxed tool can reach the socket)
        # ride on another host's remembered allows.
        asked_host = host
        claimed = req.host if req.host and req.host != asked_host else None
    timeout = prompt_timeout
    if req.timeout is not None:
        timeout = min(timeout, req.timeout)
    return ApprovalRequest(
        id=request_id,
        tool=req.tool,
        kind=req.kind,
        description=facts.description,
        variant=facts.variant,
        executable=facts.executable,
        sha256=facts.sha256,
        argv=req.argv,
        args=req.args,
        cwd=req.cwd,
        requester=requester,
        host=asked_host,
        timeout=timeout,
        code=req.code,
        mismatches=facts.mismatches,
        remote=requester.remote or asked_host != host,
        claimed_host=claimed,
        client=req.client,
    )


def settle_answer(
    ar: ApprovalRequest, answer: Approval, policies: PolicyStore, actions: ActionRuleStore
) -> tuple[m.Decision, str, Remember | None]:
    """The decision, reason and remembered scope of the person's ``answer`` to ``ar``,
    after storing what may be remembered (in ``policies``, or ``actions`` for an
    agent's own action)."""
    deny = m.Decision.DENY
    remember = answer.remember
    if ar.action is not None:
        if not answer.approved and remember is not Remember.DENY_ALWAYS:
            remember = Remember.ONCE  # a "no" never stores an allow
        stored, note = remember_answer(actions, ar, answer, remember)
        decision = m.Decision.ALLOW if answer.approved else deny
        if remember is Remember.DENY_ALWAYS:
            decision = deny
        default = "approved by the user" if decision is m.Decision.ALLOW else "denied by the user"
        return decision, (answer.reason or default) + note, stored
    if ar.once_only and remember is not Remember.DENY_ALWAYS:
        # Free-form code and mismatching requests are approved one at a time.
        remember = Remember.ONCE
    if answer.approved and remember is not Remember.DENY_ALWAYS:
        policies.remember(ar.tool, ar.kind, ar.host, remember, ar.executable, ar.sha256)
        return m.Decision.ALLOW, answer.reason or "approved by the user", remember
    if remember is Remember.DENY_ALWAYS:
        policies.remember(ar.tool, ar.kind, ar.host, remember, ar.executable, ar.sha256)
    else:
        remember = Remember.ONCE
    return deny, answer.reason or "denied by the user", remember
