"""The wording every headless front-end shows: one request, turned into safe lines.

:func:`approval_text` and :func:`password_text` build a :class:`PromptText`
(title, headline, loud warnings, labelled fields); the terminal prints
:meth:`PromptText.plain_lines`, kdialog and zenity render the same fields in
their own markup.  Nothing here does I/O.

Every string that comes from outside (requester, arguments, code, even the
registry's description) passes :func:`clean` first: control characters
(terminal escape sequences, carriage returns), invisible format characters
(bidi overrides, zero-width spaces) and everything else
:mod:`~registry_core.broker.ask.chars` calls hidden (Hangul
fillers, the braille blank, combining marks on ASCII…) are shown as
``\\x1b`` / ``\\u202e`` escapes, so a request can neither repaint the terminal nor hide
text from the person deciding.  Arguments and command lines are clipped to
sensible sizes; the code of an ``execute_code`` request is always shown in
full, line by line.
"""

from __future__ import annotations

import enum
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from registry_core.broker.ask.chars import needs_reveal, reveal
from registry_core.broker.ask.request_view import code_view, risk_flags
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.question import ApprovalRequest, PasswordRequest, Remember
from registry_core.broker.wire.messages import Kind

SEE_CODE = "[the code above]"

_SHELL_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_LABEL_WIDTH = 14

APPROVE_CHOICES: tuple[Remember, ...] = (
    Remember.ONCE,
    Remember.SESSION,
    Remember.MINUTES_15,
    Remember.HOUR,
    Remember.ALWAYS,
)
"""How long an approval may stand, in menu order (the first is the default)."""

DENY_CHOICES: tuple[Remember, ...] = (Remember.ONCE, Remember.DENY_ALWAYS)
"""How long a denial may stand, in menu order (the first is the default)."""


class Style(enum.Enum):
    """How a field's lines are meant to look."""

    PLAIN = "plain"
    CODE = "code"  # monospace, every line verbatim (after cleaning)
    WARNING = "warning"


@dataclass(frozen=True)
class Limits:
    """How much of the long, requester-controlled parts a front-end shows."""

    args_lines: int = 40
    line_chars: int = 200
    cmdline_chars: int = 400
    description_chars: int = 600


@dataclass(frozen=True)
class Field:
    label: str
    lines: tuple[str, ...]
    style: Style = Style.PLAIN


@dataclass(frozen=True)
class PromptText:
    """One question, ready to render: every string here is already cleaned."""

    title: str
    headline: str
    warnings: tuple[str, ...]
    fields: tuple[Field, ...]
    footer: str = ""

    def field(self, label: str) -> Field:
        """The field called ``label`` (KeyError when absent)."""
        for item in self.fields:
            if item.label == label:
                return item
        raise KeyError(label)

    def plain_lines(self) -> list[str]:
        """The whole text as plain lines (terminal, zenity's text view)."""
        lines = [self.headline]
        lines.extend(f"!! {warning}" for warning in self.warnings)
        lines.append("")
        for item in self.fields:
            label = f"{item.label}:"
            if item.style is Style.CODE and item.label == "Code":
                lines.append(label)
                lines.extend(f"  | {line}" for line in item.lines)
                continue
            for index, line in enumerate(item.lines or ("",)):
                head = label if index == 0 else ""
                lines.append(f"{head:<{_LABEL_WIDTH}} {line}".rstrip())
        if self.footer:
            lines.extend(("", self.footer))
        return lines


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def clean(text: str) -> str:
    """``text`` with every control and invisible format character shown as an escape.

    The result is one line: newlines are escaped too (split first where lines
    are wanted).  Tabs become spaces.
    """
    return reveal(text.expandtabs(4), _escape_char)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _ansi_c_quote(arg: str) -> str:
    quoted = arg.replace("\\", "\\\\").replace("'", "\\'").replace("\t", "\\x09")
    return "$'" + reveal(quoted, _escape_char) + "'"


def shell_quote(arg: str) -> str:
    """``arg`` as bash would need it typed: bare, single-quoted, or ``$'...'`` with escapes."""
    if _SHELL_SAFE.fullmatch(arg):
        return arg
    if "\t" in arg or needs_reveal(arg):
        return _ansi_c_quote(arg)
    return shlex.quote(arg)


def shell_join(argv: Sequence[str]) -> str:
    """The exact argv, one unambiguous line (an empty argument shows as ``''``)."""
    return " ".join(shell_quote(arg) for arg in argv)


def args_lines(args: Mapping[str, Any], limits: Limits) -> tuple[str, ...]:
    """The call's arguments as pretty JSON lines, clipped in both directions."""
    if not args:
        return ("(none)",)
    try:
        dumped = json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # unsortable keys: keep the caller's order
        dumped = json.dumps(args, indent=2, ensure_ascii=False, default=repr)
    lines = [clip(clean(line), limits.line_chars) for line in dumped.split("\n")]
    if len(lines) > limits.args_lines:
        hidden = len(lines) - limits.args_lines
        lines = [*lines[: limits.args_lines], f"… ({hidden} more lines)"]
    return tuple(lines)


def code_lines(code: str) -> tuple[str, ...]:
    """Every line of ``code``, cleaned; split on ``\\n`` only, as bash does."""
    return tuple(clean(line) for line in code.split("\n"))


def _kind_words(kind: Kind) -> str:
    return "as root" if kind is Kind.SUDO else "outside the sandbox"


def approval_title(request: ApprovalRequest) -> str:
    if request.action is not None:
        return f"Ollie: allow {clean(request.action.agent)} to use {clean(request.action.tool)}?"
    return f"Ollie: approve {clean(request.tool)} {_kind_words(request.kind)}?"


def remember_title(request: ApprovalRequest) -> str:
    return f"Ollie: how long to approve {clean(request.tool)}?"


def password_title(request: PasswordRequest) -> str:
    return f"Ollie: sudo password for {clean(request.approval.tool)}"


def _requester_fields(request: ApprovalRequest, limits: Limits) -> list[Field]:
    who = request.requester
    where = f" ({who.origin})" if who.origin else ""
    fields = [
        Field(
            "Requested by",
            (f"pid {who.pid} (uid {who.uid}){where}: {clean(who.exe) or '?'}",),
        ),
        Field(
            "Command line",
            (clip(clean(shell_join(who.cmdline)), limits.cmdline_chars) or "?",),
        ),
    ]
    chain = tuple(
        clip(clean(f"{p.pid} {shell_join(p.cmdline) or p.exe or '?'}"), limits.line_chars)
        for p in who.ancestors()
    )
    fields.append(Field("Parent chain", chain or ("(none)",)))
    return fields


def _warnings(request: ApprovalRequest) -> tuple[str, ...]:
    warnings: list[str] = []
    if request.sandboxed:
        warnings.append(
            f"SANDBOXED: this request comes {SANDBOX_LABEL}; "
            "the asking process never receives a password."
        )
    if request.remote:
        warnings.append(
            f"REMOTE: this request comes from another computer ({clean(request.host)})."
        )
    if request.mismatches:
        warnings.append("WARNING: this request does not match the tool registry here:")
        warnings.extend(f"  - {clean(item)}" for item in request.mismatches)
    if request.executable is None:
        warnings.append("WARNING: the registry could not resolve this tool's executable.")
    return tuple(warnings)


def _client_fields(request: ApprovalRequest) -> tuple[Field, ...]:
    """The agent/client the request came through, marked as its own claim."""
    if request.client is None:
        return ()
    return (Field("Via client", (f"{clean(request.client)}  (as the requester says)",)),)


def approval_covers(request: ApprovalRequest) -> tuple[str, ...]:
    """What a yes to ``request`` (not an agent's action) covers, in short plain lines."""
    what = "exactly this code" if request.code is not None else "exactly these bytes (the sha256)"
    return (
        f"{what}, run in the directory above",
        "with a clean environment (system PATH, no LD_*/PYTHON* variables);",
        "code the tool loads from a directory others can write is trusted too",
    )


def approval_text(request: ApprovalRequest, limits: Limits | None = None) -> PromptText:
    """Everything the approval question shows, for every front-end."""
    limits = limits or Limits()
    if request.action is not None:  # an agent's own action: no registry tool involved
        from registry_core.broker.ask.action_text import action_text

        return action_text(request, limits)
    tool = clean(request.tool)
    description = clip(clean(request.description), limits.description_chars)
    if request.executable is None:
        executable: tuple[str, ...] = ("(not resolved)",)
    else:
        sha = f"sha256 {request.short_sha}…" if request.sha256 else "sha256 unknown"
        executable = (clean(request.executable), sha)
    host = clean(request.host) + ("  (REMOTE)" if request.remote else "")
    if request.claimed_host:
        host += f"  (it calls itself {clean(request.claimed_host)})"
    fields: list[Field] = []
    argv = request.argv
    warnings = _warnings(request)
    if request.code is not None:  # the code first, in full, blank runs collapsed, once
        view = code_view(request.code)
        fields.append(Field("Code", tuple(clean(line) for line in view.lines), Style.CODE))
        fields.append(Field("Code lines", (f"{view.total}, all shown above",)))
        argv = tuple(SEE_CODE if arg == request.code else arg for arg in argv)
        flags = risk_flags(request.code)
        warnings += tuple(f"RISK: the code {flag}" for flag in flags)
    fields += [
        Field("Tool", (f"{tool} — {description}" if description else tool,)),
        Field("Variant", (str(request.variant) if request.variant is not None else "default",)),
        Field("Executable", executable),
        Field("Command", (clean(shell_join(argv)),), Style.CODE),
        Field("Arguments", args_lines(request.args, limits), Style.CODE),
        Field("Directory", (clean(request.cwd),)),
        *_requester_fields(request, limits),
        *_client_fields(request),
        Field("Host", (host,)),
        Field("Asks to", (request.what,)),
        Field("Approval covers", approval_covers(request)),
    ]
    return PromptText(
        title=approval_title(request),
        headline=f"The tool {tool} asks to {request.what}.",
        warnings=warnings,
        fields=tuple(fields),
        footer=f"Unanswered, this request is denied after {request.timeout:.0f} s.",
    )


def password_text(request: PasswordRequest) -> PromptText:
    """Everything the sudo password question shows (never the password itself)."""
    approval = request.approval
    warnings = (clean(request.retry_text),) if request.retry else ()
    host = clean(approval.host) + ("  (REMOTE)" if approval.remote else "")
    fields = (
        Field("Tool", (f"{clean(approval.tool)} — {approval.what}",)),
        Field("Command", (clean(shell_join(approval.argv)),), Style.CODE),
        Field("User", (clean(request.user),)),
        Field("Host", (host,)),
        Field("sudo asks", (clean(request.prompt).strip() or "Password:",)),
    )
    return PromptText(
        title=password_title(request),
        headline=f"sudo needs the password of {clean(request.user)} to run "
        f"{clean(approval.tool)} as root.",
        warnings=warnings,
        fields=fields,
        footer=f"Attempt {request.attempt} of {request.max_attempts}.",
    )
