"""The remember pattern of an agent's action, confirmed or edited in a dialog program.

After the person approved (or denied always) an ``action`` request and chose
to remember it, kdialog and zenity show a one-line entry prefilled with the
suggested pattern, as the tray's dialog shows its pattern field: OK keeps or
changes it; a pattern that does not cover the action is refused with the
reason and asked again (at most
:data:`~registry_core.broker.ask.action_text.MAX_PATTERN_TRIES`
times).  Cancel, closing the window, or no acceptable pattern remember
nothing: the answer counts this once.  A withdrawn question is the usual
withdrawn denial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from registry_core.broker.ask.action_text import (
    MAX_PATTERN_TRIES,
    editable_pattern,
    pattern_problem,
)
from registry_core.broker.ask.dialog_process import (
    DialogProcesses,
    PrompterError,
    withdrawn_approval,
)
from registry_core.broker.question import Approval, ApprovalRequest, Remember

EntryArgs = Callable[[str | None, str], list[str]]
"""(problem with the last entry or ``None``, prefilled text) → the dialog's arguments."""


async def confirm_pattern(
    dialogs: DialogProcesses,
    request: ApprovalRequest,
    approval: Approval,
    entry: EntryArgs,
    program: str,
) -> Approval:
    """``approval`` with the pattern the person left, or counting once (see the module)."""
    suggested = editable_pattern(request)
    if suggested is None or approval.remember is Remember.ONCE:
        return approval
    shown, problem = suggested, None
    for _ in range(MAX_PATTERN_TRIES):
        outcome = await dialogs.run((request.id,), entry(problem, shown))
        withdrawn = withdrawn_approval(outcome)
        if withdrawn is not None:
            return withdrawn
        if outcome.status != 0:
            return _once(approval, f"not remembered: the pattern was not confirmed in {program}")
        try:
            typed = outcome.text().strip()
        except PrompterError as exc:
            return _once(approval, f"not remembered: {exc}")
        problem = pattern_problem(request, typed)
        if problem is None:
            return dataclasses.replace(approval, pattern=typed)
        shown = typed
    return _once(approval, f"not remembered: {problem}")


def _once(approval: Approval, note: str) -> Approval:
    return dataclasses.replace(
        approval, remember=Remember.ONCE, reason=f"{approval.reason} ({note})", pattern=None
    )
