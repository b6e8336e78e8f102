"""The kdialog front-end: KDE's dialog program asks the person.

Approval is a ``--warningyesno`` message box (Approve / Deny; it scrolls
when the text is long).  kdialog offers no way to make "Deny" the default
button, so Enter there approves; to keep the keyboard path deny-by-default,
an approval is followed by a ``--radiolist`` "how long" choice whose
preselected entry is "Deny after all": pressing Enter twice denies.  Escape
or closing either window denies once.  "Deny always" is not offered (the
message box's third button would be indistinguishable from Escape); the text
says how to deny a tool always from the command line.

For an agent's action remembered beyond this once, an ``--inputbox``
prefilled with the suggested pattern follows (see :mod:`.pattern_dialog`).

Text is rich text (``<qt>``): every string is HTML-escaped, and backslashes
become ``&#92;`` because kdialog turns ``\\n`` in message texts into
newlines.  The password dialog is ``--password``; the password comes back on
kdialog's stdout pipe only.

Cancellation story: see :mod:`registry_core.broker.ask.dialog_process`; a
cancelled question terminates and reaps the kdialog process and re-raises.
Questions are asked one at a time (an :class:`asyncio.Lock`).
"""

from __future__ import annotations

import html

from registry_core.broker.ask.action_text import pattern_question
from registry_core.broker.ask.dialog_process import (
    DialogPrompter,
    password_answer,
    withdrawn_approval,
)
from registry_core.broker.ask.pattern_dialog import EntryArgs, confirm_pattern
from registry_core.broker.ask.text import (
    APPROVE_CHOICES,
    PromptText,
    Style,
    approval_text,
    clean,
    password_text,
    remember_title,
)
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)

_DENY_TAG = "deny"
_WARN_COLOR = "#b00000"


def escape(text: str) -> str:
    """``text`` safe inside kdialog's rich text (no markup, no backslash escapes)."""
    return html.escape(text, quote=True).replace("\\", "&#92;")


def render(text: PromptText, *, extra: str = "") -> str:
    """The rich text kdialog shows for ``text``."""
    parts = [f"<qt><h3>{escape(text.headline)}</h3>"]
    for warning in text.warnings:
        parts.append(f'<p><b><font color="{_WARN_COLOR}">{escape(warning)}</font></b></p>')
    parts.append("<table cellspacing='2'>")
    for item in text.fields:
        body = "<br>".join(escape(line) for line in item.lines)
        if item.style is Style.CODE:
            body = "<pre>" + "\n".join(escape(line) for line in item.lines) + "</pre>"
        parts.append(f"<tr><td valign='top'><b>{escape(item.label)}</b></td><td>{body}</td></tr>")
    parts.append("</table>")
    if text.footer:
        parts.append(f"<p><i>{escape(text.footer)}</i></p>")
    if extra:
        parts.append(f"<p><small>{escape(extra)}</small></p>")
    parts.append("</qt>")
    return "".join(parts)


class KDialogPrompter(DialogPrompter):
    """Asks through ``kdialog`` windows, one question at a time."""

    program = "kdialog"
    # kdialog exits 0 for Yes/OK, 1 for No/Cancel, 2 for Cancel/Escape/closed window.
    answers = (0, 1, 2)

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        text = approval_text(request, self._limits)
        tool = clean(request.tool)
        hint = f"To deny {tool} always: ollie-tools policy deny {tool}"
        async with self._lock:
            outcome = await self._dialogs.run(
                (request.id,),
                [
                    "--title",
                    text.title,
                    "--yes-label",
                    "Approve",
                    "--no-label",
                    "Deny",
                    "--warningyesno",
                    render(text, extra=hint),
                ],
            )
            withdrawn = withdrawn_approval(outcome)
            if withdrawn is not None:
                return withdrawn
            if outcome.status == 1:
                return Approval(False, Remember.ONCE, "denied in kdialog")
            if outcome.status != 0:
                return Approval(False, Remember.ONCE, "kdialog closed without an answer")
            approval = await self._how_long(request)
            if not approval.approved:
                return approval
            return await confirm_pattern(
                self._dialogs, request, approval, self._pattern_entry(request), self.program
            )

    def _pattern_entry(self, request: ApprovalRequest) -> EntryArgs:
        def entry(problem: str | None, shown: str) -> list[str]:
            label = "<br>".join(escape(line) for line in pattern_question(request, problem))
            title = f"Ollie: remember for which {clean(request.tool)} actions?"
            return ["--title", title, "--inputbox", f"<qt>{label}</qt>", shown]

        return entry

    async def _how_long(self, request: ApprovalRequest) -> Approval:
        if request.once_only:  # nothing to choose: it can only be approved this once
            return Approval(True, Remember.ONCE, "approved in kdialog")
        question = (
            f"<qt>Approve <b>{escape(clean(request.tool))}</b> to {escape(request.what)}: "
            "for how long?<br>Choose a duration, then OK.</qt>"
        )
        rows = [_DENY_TAG, "Deny after all", "on"]
        for choice in APPROVE_CHOICES:
            rows += [choice.value, choice.label, "off"]
        outcome = await self._dialogs.run(
            (request.id,), ["--title", remember_title(request), "--radiolist", question, *rows]
        )
        withdrawn = withdrawn_approval(outcome)
        if withdrawn is not None:
            return withdrawn
        answer = outcome.text().strip() if outcome.status == 0 else _DENY_TAG
        if answer == _DENY_TAG:
            return Approval(False, Remember.ONCE, "denied in kdialog (no duration chosen)")
        try:
            remember = Remember(answer)
        except ValueError:
            return Approval(False, Remember.ONCE, f"kdialog gave an unknown choice {answer!r}")
        if remember not in APPROVE_CHOICES:
            return Approval(False, Remember.ONCE, f"kdialog gave an unknown choice {answer!r}")
        return Approval(True, remember, "approved in kdialog")

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        text = password_text(request)
        async with self._lock:
            outcome = await self._dialogs.run(
                (request.id, request.approval.id),
                ["--title", text.title, "--password", render(text)],
            )
        return password_answer(outcome)
