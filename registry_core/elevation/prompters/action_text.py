"""The wording of an agent's own action (``action`` request) for headless front-ends.

Like :func:`~registry_core.elevation.prompters.text.approval_text`, every
outside string is cleaned; the command or the edit's diff is shown in full,
line by line (a diff keeps its ``+``/``-`` marks), and the remember line
says exactly which pattern an answer would be remembered for.
"""

from __future__ import annotations

from registry_core.elevation.messages import ActionDisplay, PatternKind
from registry_core.elevation.prompter import ApprovalRequest
from registry_core.elevation.prompters.text import (
    Field,
    Limits,
    PromptText,
    Style,
    args_lines,
    clean,
    code_lines,
)

_PATTERN_WORDS = {
    PatternKind.PROGRAM: "commands running the program",
    PatternKind.PATH: "files at or beneath",
    PatternKind.EXACT: "exactly",
}


def pattern_words(request: ApprovalRequest) -> str:
    action = request.action
    assert action is not None
    return f"{_PATTERN_WORDS[action.pattern_kind]} {clean(action.pattern)}"


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
    if action.detail is not None:
        fields.append(Field(label, code_lines(action.detail), Style.CODE))
    elif action.command is not None:
        fields.append(Field("Command", code_lines(action.command), Style.CODE))
    if action.path is not None:
        fields.append(Field("File", (clean(action.path),)))
    fields += [
        Field("Directory", (clean(request.cwd),)),
        Field("Input", args_lines(request.args, limits), Style.CODE),
        Field(
            "Requested by",
            (f"pid {request.requester.pid} · {clean(request.requester.exe or '?')}",),
        ),
        Field("Remember for", (pattern_words(request),)),
    ]
    return PromptText(
        title=f"Ollie: allow {agent} to use {tool}?",
        headline=f"The agent {agent} asks to use its tool {tool}.",
        warnings=(),
        fields=tuple(fields),
        footer=f"Unanswered, this request is denied after {request.timeout:.0f} s.",
    )
