"""From an ``action`` request to the broker's question, and back to a remembered rule.

The broker core queues and asks an action like a tool request (one dialog at
a time, the same countdown, every failure a denial); what differs lives here:
the question carries :class:`ActionDetails` instead of registry facts, the
remembered rules are :class:`~registry_core.broker.remember.action_rules.ActionRuleStore`
rules, and the pattern a person remembers must cover the action they saw.
"""

from __future__ import annotations

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    DETAIL_DIFFERS,
    ActionDetails,
    Approval,
    ApprovalRequest,
    Remember,
)
from registry_core.broker.remember.action_rules import (
    ActionRule,
    ActionRuleStore,
    covers,
    shown_action_covered,
)
from registry_core.broker.wire import messages as m

"""The flag every front-end shows when ``detail`` is not the ``command`` itself."""


def _words(text: str) -> str:
    return " ".join(text.split())


def detail_differs(detail: str | None, command: str | None) -> bool:
    """Whether the requester's ``detail`` could mislead about the ``command`` that runs.

    The rule: a detail is truthful only when it *is* the command, up to blanks
    (surrounding whitespace, runs of spaces, tabs and newlines between words).
    Anything else differs, a prefix included (``curl …`` hides ``| sh``).  No
    detail, or no command (nothing that a rule would let run), cannot differ."""
    if detail is None or command is None:
        return False
    return _words(detail) != _words(command)


def action_details(req: m.ActionRequest) -> ActionDetails:
    """The action as the dialog shows it; a suggested pattern that does not cover the
    action itself (a requester's mistake or trick) falls back to the exact summary."""
    kind, pattern = req.pattern_kind, req.pattern
    if not covers(kind, pattern, summary=req.summary, command=req.command, path=req.path):
        kind = m.PatternKind.EXACT
        pattern = req.command if req.command is not None else req.summary
    return ActionDetails(
        agent=req.agent,
        tool=req.tool,
        summary=req.summary,
        detail=req.detail,
        display=req.display,
        command=req.command,
        path=req.path,
        pattern_kind=kind,
        pattern=pattern,
        session=req.session,
        detail_differs=detail_differs(req.detail, req.command),
    )


def action_approval_request(
    req: m.ActionRequest, requester: Requester, *, request_id: str, host: str, timeout: float
) -> ApprovalRequest:
    details = action_details(req)
    if req.timeout is not None:
        timeout = min(timeout, req.timeout)
    return ApprovalRequest(
        id=request_id,
        tool=req.tool,
        kind=m.Kind.SANDBOX,  # nominal: an action is no registry tool (``action`` is set)
        description=req.summary,
        variant=None,
        executable=None,
        sha256=None,
        argv=(),
        args=req.input,
        cwd=req.cwd,
        requester=requester,
        host=host,
        timeout=timeout,
        client=req.agent,
        action=details,
    )


def remembered_rule(store: ActionRuleStore, ar: ApprovalRequest) -> ActionRule | None:
    action = ar.action
    assert action is not None
    return store.lookup(
        action.agent,
        action.tool,
        summary=action.summary,
        command=action.command,
        path=action.path,
    )


def remember_answer(
    store: ActionRuleStore, ar: ApprovalRequest, answer: Approval, remember: Remember
) -> tuple[Remember, str]:
    """Store the person's choice; returns what was stored and a note for the reason.

    The pattern is the one the person left in the dialog. One that does not
    cover this very action is not stored (the answer counts once): a rule is
    never broader, nor other, than what was shown.
    """
    action = ar.action
    assert action is not None
    pattern = action.pattern if answer.pattern is None else answer.pattern
    if remember is Remember.ONCE:
        return remember, ""
    if action.detail_differs:  # whatever the front-end sent: what was shown is not what runs
        return Remember.ONCE, f" (not remembered: {DETAIL_DIFFERS})"
    if not shown_action_covered(action, pattern):
        return Remember.ONCE, f" (not remembered: {pattern!r} does not cover this action)"
    store.remember(action.agent, action.tool, action.pattern_kind, pattern, remember)
    return remember, f" (remembered for {action.pattern_kind.value} {pattern!r})"
