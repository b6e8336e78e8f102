"""The zenity front-end: GNOME's dialog program asks the person.

Approval is a ``--question`` with Approve / Deny and a third button, "Deny
always"; ``--default-cancel`` gives Deny the focus, so Enter denies.  A
question label cannot scroll, so a request too long for it (many lines of
code, say) is shown in a scrollable ``--text-info`` instead, where Approve
stays disabled until the person ticks "I have read this request" (Enter
alone cannot approve there either).  Escape or closing the window denies
once.  After an approval a ``--list`` asks how long it stands (no selection
means only this time; its cancel button is "Deny after all").  A plain list
rather than ``--radiolist``: zenity's radio buttons cannot be toggled from
the keyboard.

For an agent's action remembered beyond this once (an approval with a
duration, or "Deny always"), an ``--entry`` prefilled with the suggested
pattern follows (see :mod:`.pattern_dialog`).

Text in ``--question`` and ``--list`` is Pango markup, so it is
markup-escaped; zenity also expands backslash escapes (``\\n``, ``\\101``) in
every ``--text``, so backslashes are doubled; the ``--entry`` label is plain
text with ``_`` mnemonics, so underscores are doubled.  The password is
asked with ``--entry --hide-text`` (it shows a label, ``--password`` does
not) and comes back on zenity's stdout pipe only.

Cancellation story: see :mod:`registry_core.broker.ask.dialog_process`; a
cancelled question terminates and reaps the zenity process and re-raises.
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

DENY_ALWAYS_LABEL = "Deny always"
READ_CHECKBOX = "I have read this request"
QUESTION_MAX_LINES = 30
QUESTION_MAX_CHARS = 110
_WARN_COLOR = "#b00000"


def markup(text: str) -> str:
    """``text`` safe in a zenity ``--text`` that zenity reads as Pango markup."""
    return html.escape(text, quote=False).replace("\\", "\\\\")


def mnemonic_plain(text: str) -> str:
    """``text`` safe in a zenity ``--text`` shown as a plain label with mnemonics."""
    return text.replace("\\", "\\\\").replace("_", "__")


def render(text: PromptText) -> str:
    """``text`` as the Pango markup of a ``--question``."""
    out = [f"<big><b>{markup(text.headline)}</b></big>"]
    out.extend(
        f'<span foreground="{_WARN_COLOR}" weight="bold">{markup(w)}</span>' for w in text.warnings
    )
    out.append("")
    for item in text.fields:
        label = f"<b>{markup(item.label)}:</b>"
        lines = [markup(line) for line in item.lines]
        if item.style is Style.CODE:
            lines = [f"<tt>{line}</tt>" for line in lines]
        if len(lines) == 1 and item.label != "Code":
            out.append(f"{label} {lines[0]}")
        else:
            out.append(label)
            out.extend(lines)
    if text.footer:
        out.extend(("", f"<i>{markup(text.footer)}</i>"))
    return "\n".join(out)


def fits_question(text: PromptText) -> bool:
    """Whether ``text`` is short enough for a ``--question`` (which cannot scroll)."""
    lines = text.plain_lines()
    return len(lines) <= QUESTION_MAX_LINES and all(len(x) <= QUESTION_MAX_CHARS for x in lines)


class ZenityPrompter(DialogPrompter):
    """Asks through ``zenity`` windows, one question at a time."""

    program = "zenity"
    # zenity exits 0 for OK, 1 for Cancel/extra button/closed window, 5 on --timeout.
    answers = (0, 1, 5)

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        text = approval_text(request, self._limits)
        buttons = [
            "--ok-label=Approve",
            "--cancel-label=Deny",
            f"--extra-button={DENY_ALWAYS_LABEL}",
        ]
        stdin: bytes | None = None
        if fits_question(text):
            args = ["--question", f"--text={render(text)}", "--default-cancel", "--width=720"]
        else:
            args = ["--text-info", f"--checkbox={READ_CHECKBOX}", "--width=900", "--height=650"]
            stdin = ("\n".join(text.plain_lines()) + "\n").encode("utf-8")
        async with self._lock:
            outcome = await self._dialogs.run(
                (request.id,), [*args, f"--title={text.title}", *buttons], stdin
            )
            withdrawn = withdrawn_approval(outcome)
            if withdrawn is not None:
                return withdrawn
            if outcome.status == 0:
                approval = await self._how_long(request)
                if not approval.approved:
                    return approval
            elif outcome.status == 1 and outcome.stdout.strip() == DENY_ALWAYS_LABEL.encode():
                approval = Approval(False, Remember.DENY_ALWAYS, "denied always in zenity")
            else:
                approval = None
            if approval is not None:
                entry = self._pattern_entry(request)
                return await confirm_pattern(self._dialogs, request, approval, entry, self.program)
            if outcome.status == 1 and not outcome.stdout.strip():
                return Approval(False, Remember.ONCE, "denied in zenity")
            return Approval(False, Remember.ONCE, "zenity closed without an answer")

    async def _how_long(self, request: ApprovalRequest) -> Approval:
        if request.once_only:  # nothing to choose: it can only be approved this once
            return Approval(True, Remember.ONCE, "approved in zenity")
        tool = markup(clean(request.tool))
        question = (
            f"Approve <b>{tool}</b> to {markup(request.what)}: for how long?\n"
            "Without a selection: only this time."
        )
        rows: list[str] = []
        for choice in APPROVE_CHOICES:
            rows += [choice.label, choice.value]
        outcome = await self._dialogs.run(
            (request.id,),
            [
                "--list",
                f"--title={remember_title(request)}",
                f"--text={question}",
                "--column=How long",
                "--column=key",
                "--hide-column=2",
                "--print-column=2",
                "--hide-header",
                "--ok-label=Approve",
                "--cancel-label=Deny after all",
                "--width=460",
                "--height=320",
                *rows,
            ],
        )
        withdrawn = withdrawn_approval(outcome)
        if withdrawn is not None:
            return withdrawn
        if outcome.status != 0:
            return Approval(False, Remember.ONCE, "denied in zenity (no duration chosen)")
        answer = outcome.text().strip()
        if not answer:
            return Approval(True, Remember.ONCE, "approved in zenity")
        try:
            remember = Remember(answer)
        except ValueError:
            remember = Remember.DENY_ALWAYS  # never an approval choice: refused below
        if remember not in APPROVE_CHOICES:
            return Approval(False, Remember.ONCE, f"zenity gave an unknown choice {answer!r}")
        return Approval(True, remember, "approved in zenity")

    def _pattern_entry(self, request: ApprovalRequest) -> EntryArgs:
        def entry(problem: str | None, shown: str) -> list[str]:
            return [
                "--entry",
                f"--title=Ollie: remember for which {clean(request.tool)} actions?",
                f"--text={mnemonic_plain(chr(10).join(pattern_question(request, problem)))}",
                f"--entry-text={shown}",
                "--width=560",
            ]

        return entry

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        text = password_text(request)
        label = "\n".join(text.plain_lines())
        async with self._lock:
            outcome = await self._dialogs.run(
                (request.id, request.approval.id),
                [
                    "--entry",
                    "--hide-text",
                    f"--title={text.title}",
                    f"--text={mnemonic_plain(label)}",
                    "--width=520",
                ],
            )
        return password_answer(outcome)
