"""Turn a broker decision into an audit record (one JSON line per decision)."""

from __future__ import annotations

import logging
from time import time as _now
from typing import Any

from registry_core.broker.question import ApprovalRequest, Remember
from registry_core.broker.record.audit import AuditError, AuditLog, AuditRecord, AuditRequester
from registry_core.broker.wire import messages as m

log = logging.getLogger(__name__)


def _action_json(ar: ApprovalRequest) -> dict[str, Any]:
    action = ar.action
    assert action is not None
    return {
        "agent": action.agent,
        "tool": action.tool,
        "summary": action.summary,
        "pattern_kind": action.pattern_kind.value,
        "pattern": action.pattern,
        "session": action.session,
    }


def record_decision(
    audit: AuditLog,
    ar: ApprovalRequest,
    decision: m.Decision,
    by: m.DecidedBy,
    remember: Remember | None,
    reason: str,
) -> None:
    """Append the decision; an unwritable audit file is logged, never fatal to the decision."""
    try:
        audit.append(audit_record(ar, decision, by, remember, reason, _now()))
    except AuditError as exc:
        log.error("could not write the audit log %s: %s", audit.path, exc)


def audit_record(
    ar: ApprovalRequest,
    decision: m.Decision,
    by: m.DecidedBy,
    remember: Remember | None,
    reason: str,
    time: float,
) -> AuditRecord:
    """The audit record of a decision on ``ar``."""
    return AuditRecord(
        time=time,
        tool=ar.tool,
        kind=ar.kind,
        host=ar.host,
        requester=AuditRequester.from_requester(ar.requester),
        decision=decision,
        by=by,
        reason=reason,
        remember=remember,
        request_id=ar.id,
        remote=ar.remote,
        claimed_host=ar.claimed_host,
        executable=ar.executable,
        sha256=ar.sha256,
        argv=ar.argv,
        args=ar.args,
        code=ar.code,
        client=ar.client,
        action=None if ar.action is None else _action_json(ar),
    )
