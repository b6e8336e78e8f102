"""The wording of an agent's own action (``action`` request) for headless front-ends.

Like :func:`~registry_core.broker.ask.text.approval_text`, every
outside string is cleaned; the command or the edit's diff is shown in full,
line by line (a diff keeps its ``+``/``-`` marks), and the remember line
says exactly which pattern an answer would be remembered for.
"""

from __future__ import annotations

from registry_core.broker.ask.text import (
    Field,
    Limits,
    PromptText,
    Style,
    args_lines,
    clean,
    code_lines,
)
from registry_core.broker.question import DETAIL_DIFFERS, ApprovalRequest
from registry_core.broker.remember.action_rules import shown_action_covered
from registry_core.broker.wire.messages import ActionDisplay, PatternKind

_PATTERN_WORDS = {
    PatternKind.PROGRAM: "commands running the program",
    PatternKind.PATH: "files at or beneath",
    PatternKind.EXACT: "exactly",
}


def pattern_words(request: ApprovalRequest, pattern: str | None = None) -> str:
    """What remembering covers: the suggested pattern, or ``pattern`` when given."""
    action = request.action
    assert action is not None
    shown = action.pattern if pattern is None else pattern
    return f"{_PATTERN_WORDS[action.pattern_kind]} {clean(shown)}"


def action_text(request: ApprovalRequest, limits: Limits) -> PromptText:
    action = request.action
    assert action is not None
    agent, tool = clean(action.agent), clean(action.tool)
    label = {
        ActionDisplay.COMMAND: "Command",
        ActionDisplay.DIFF: "Edit (diff)",
    }.get(action.display or ActionDisplay.TEXT, "Details")
    fields = [
        Field("Agent", (f"{agent}  (as the requester says)",)),
        Field("Tool", (tool,)),
        Field("Action", (clean(action.summary),)),
    ]
    # The command itself comes first: it is what runs, and what "remember" covers.
    if action.command is not None:
        fields.append(Field("Command", code_lines(action.command), Style.CODE))
    if action.detail_differs and action.detail is not None:
        fields.append(Field("Description (differs)", code_lines(action.detail), Style.CODE))
    elif action.detail is not None and action.command is None:
        fields.append(Field(label, code_lines(action.detail), Style.CODE))
    if action.path is not None:
        fields.append(Field("File", (clean(action.path),)))
    fields += [
        Field("Directory", (clean(request.cwd),)),
        Field("Input", args_lines(request.args, limits), Style.CODE),
        Field(
            "Requested by",
            (f"pid {request.requester.pid} · {clean(request.requester.exe or '?')}",),
        ),
    ]
    if not request.once_only:
        fields.append(Field("Remember for", (pattern_words(request),)))
    return PromptText(
        title=f"Ollie: allow {agent} to use {tool}?",
        headline=f"The agent {agent} asks to use its tool {tool}.",
        warnings=(
            (f"WARNING: {DETAIL_DIFFERS}; this answer is never remembered.",)
            if action.detail_differs
            else ()
        ),
        fields=tuple(fields),
        footer=f"Unanswered, this request is denied after {request.timeout:.0f} s.",
    )


# --- the remember pattern, edited on one line ---------------------------------------------

MAX_PATTERN_TRIES = 3
"""Patterns a headless front-end accepts before it remembers nothing (the answer counts once)."""


def editable_pattern(request: ApprovalRequest) -> str | None:
    """The suggested remember pattern when the person may edit it on one line, else ``None``.

    ``None`` for a tool request, and for a pattern a one-line field cannot show
    as it is: one with control characters (an exact multi-line command) or
    backslashes (which kdialog and zenity turn into escapes).  Such a pattern
    is remembered as shown, as before.
    """
    action = request.action
    if action is None or "\\" in action.pattern or clean(action.pattern) != action.pattern:
        return None
    return action.pattern


def pattern_problem(request: ApprovalRequest, pattern: str) -> str | None:
    """Why ``pattern`` cannot be remembered for this action (``None``: it can).

    The broker checks the same again (``action_flow.remember_answer``); asking
    here lets the person correct it while the question is still open.
    """
    action = request.action
    assert action is not None
    if not pattern:
        return "an empty pattern covers nothing"
    if not shown_action_covered(action, pattern):
        return f"{clean(pattern)!r} does not cover this action"
    return None


def pattern_question(request: ApprovalRequest, problem: str | None = None) -> list[str]:
    """The lines above the one-line pattern field (plain text)."""
    action = request.action
    assert action is not None
    lines = [
        f"Remember this answer for {_PATTERN_WORDS[action.pattern_kind]}:",
        "Keep the suggested pattern, or change it; it must still cover this action"
        + (
            " (a path ending in / covers every file beneath it)."
            if action.pattern_kind is PatternKind.PATH
            else "."
        ),
    ]
    if problem is not None:
        lines.insert(0, f"Not accepted: {problem}.")
    return lines
