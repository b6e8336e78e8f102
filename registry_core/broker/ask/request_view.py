"""What a request's code and requester look like to the person: front-end independent.

* :func:`code_view` — the code's lines with runs of blank lines collapsed into
  one marked line ("… 80 blank lines …"), and its real line count;
* :func:`risk_flags` — risky constructs named in words (a pipe from the
  network into a shell, ``rm -r``, writes to shell start-up files, ``sudo``,
  ``chmod 777``…); a flag never replaces reading the code;
* :func:`agent_name` — the program a person recognises as the requester: the
  nearest process in the chain that is not a shell, an interpreter or one of
  Ollie's own commands (``claude``, ``ollie``);
* :func:`process_chain` — the chain nearest first: the requester's command
  line whole, ancestors' shortened with secret-looking values elided
  (``--token X``, ``*_KEY=…``, JSON blobs).

Nothing here does I/O; callers clean the strings for display
(:mod:`registry_core.broker.ask.chars`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from registry_core.broker.peer.identity import ProcessInfo, Requester

BLANK_RUN = 3
"""Blank lines in a row from which a run is collapsed into one marker line."""
ANCESTOR_CHARS = 160


@dataclass(frozen=True)
class CodeView:
    lines: tuple[str, ...]
    """Display lines: the code's, with blank runs replaced by a marker."""
    total: int
    """How many lines the code really has."""


def code_view(code: str) -> CodeView:
    raw = code.split("\n")
    if raw and raw[-1] == "":
        raw.pop()  # a final newline ends the last line; it is not a line of its own
    out: list[str] = []
    blank = 0
    for line in [*raw, None]:
        if line is not None and not line.strip():
            blank += 1
            continue
        if blank >= BLANK_RUN:
            out.append(f"… {blank} blank lines …")
        else:
            out.extend([""] * blank)
        blank = 0
        if line is not None:
            out.append(line)
    return CodeView(tuple(out), len(raw))


_SHELLS = r"(?:ba|da|z|k|fi|c|tc)?sh"
_RISKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            rf"\b(?:curl|wget|fetch|nc|ncat)\b[^\n|]*\|\s*(?:sudo\s+)?(?:env\s+)?{_SHELLS}\b"
        ),
        "downloads something from the network and runs it in a shell",
    ),
    (
        re.compile(rf"\b{_SHELLS}\s+(?:-c\s+)?[\"']?\$\((?:curl|wget)\b|<\(\s*(?:curl|wget)\b"),
        "runs a script straight from the network",
    ),
    (
        re.compile(r"\brm\s+(?:-\w+\s+)*-\w*[rR]"),
        "deletes files and directories recursively (rm -r)",
    ),
    (
        re.compile(
            r"(?:>>?|\btee\b(?:\s+-a)?)\s*[\"']?\S*(?:\.bashrc|\.bash_profile|\.bash_login|\.profile"
            r"|\.zshrc|\.zprofile|\.zshenv|\.kshrc|config\.fish|/etc/profile|/etc/bash\.bashrc)"
        ),
        "writes to a shell start-up file (it runs at every new shell or login)",
    ),
    (
        re.compile(r"\.config/autostart|\bcrontab\b|/etc/cron|systemctl\s+(?:--user\s+)?enable"),
        "sets something up to run later or at login (autostart, cron, systemd)",
    ),
    (re.compile(r"(?:^|[\s;&|(])sudo\b|\bdoas\b|\bpkexec\b"), "runs commands as root (sudo)"),
    (
        re.compile(r"\bchmod\s+(?:-\w+\s+)*(?:0?[0-7]?77[67]|[ugoa]*\+[rwx]*w|o\+\w*w)"),
        "makes files writable by every user (chmod 777)",
    ),
    (
        re.compile(r"\bchmod\s+(?:-\w+\s+)*[ug]?\+s|\bchmod\s+[0-7]?[4-7][0-7]{3}\b"),
        "sets a setuid/setgid bit",
    ),
    (re.compile(r"authorized_keys|\.ssh/"), "changes SSH keys or access"),
    (re.compile(r"\bbase64\s+(?:-\w+\s+)*(?:-d|--decode)\b|\bxxd\s+-r\b"), "decodes hidden data"),
    (re.compile(r"\beval\b"), "evaluates a string as code (eval)"),
    (re.compile(r"\bdd\b[^\n]*\bof=/dev/|\bmkfs\b|\bwipefs\b"), "writes directly to a disk device"),
    (re.compile(r"/etc/(?:sudoers|passwd|shadow|hosts)\b"), "touches system account or sudo files"),
)


def risk_flags(code: str) -> tuple[str, ...]:
    """The risky constructs found in ``code``, in words, each once."""
    return tuple(words for pattern, words in _RISKS if pattern.search(code))


_NOT_AN_AGENT = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox", "env",
        "python", "python3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua",
        "npm", "npx", "pnpm", "yarn", "uv", "uvx", "pipx", "poetry", "java",
        "sudo", "doas", "nohup", "setsid", "timeout", "stdbuf", "nice", "ionice", "xargs",
        "bwrap", "flock", "script", "tmux", "screen", "sshd",
        "ollie-tools", "ollie-elevate", "ollie-askpass", "ollie-remote",
    }
)  # fmt: skip
_VERSIONED = re.compile(r"^(python|node|ruby|perl|php|lua)[0-9.]*$")


def program_name(proc: ProcessInfo) -> str:
    """The name a process goes by: its argv[0]'s base name, else its executable's."""
    first = proc.cmdline[0] if proc.cmdline else proc.exe
    return os.path.basename(first) or "?"


def _is_agent(name: str) -> bool:
    base = _VERSIONED.sub(r"\1", name)
    return bool(name) and name != "?" and base not in _NOT_AN_AGENT


def agent_name(requester: Requester) -> str | None:
    """The nearest process (the requester first) that is not a shell or interpreter."""
    me = ProcessInfo(requester.pid, requester.exe, requester.cmdline)
    for proc in (me, *requester.ancestors()):
        name = program_name(proc)
        if _is_agent(name):
            return name
    return None


_SECRET_OPTION = re.compile(
    r"^--?(?:[\w-]*(?:token|secret|passw(?:or)?d|api[-_]?key|auth|credential|cookie|bearer)[\w-]*)$",
    re.IGNORECASE,
)
_SECRET_ASSIGN = re.compile(
    r"^(--?)?([\w.-]*(?:token|secret|passw(?:or)?d|api[-_]?key|_key|auth|credential|cookie)"
    r"[\w.-]*)=(.+)$",
    re.IGNORECASE,
)
_LONG_OPAQUE = re.compile(r"^[A-Za-z0-9+/_=.-]{40,}$")


def elide_secrets(args: tuple[str, ...]) -> list[str]:
    """``args`` with values that look like secrets replaced by ``[elided]``."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append("[elided]")
            hide_next = False
            continue
        if _SECRET_OPTION.match(arg):
            out.append(arg)
            hide_next = True
            continue
        assigned = _SECRET_ASSIGN.match(arg)
        if assigned:
            out.append(f"{assigned[1] or ''}{assigned[2]}=[elided]")
        elif arg.lstrip().startswith(("{", "[")) and len(arg) > 60:
            out.append(f"[JSON, {len(arg)} characters, elided]")
        elif _LONG_OPAQUE.match(arg) and not arg.startswith("/"):
            out.append(f"[{len(arg)} characters, elided]")
        else:
            out.append(arg)
    return out


def process_chain(requester: Requester) -> list[str]:
    """``pid command`` lines, the requester first, then its parent, and so on up."""
    lines = [f"{requester.pid} {' '.join(requester.cmdline) or requester.exe or '?'}"]
    for proc in requester.ancestors():
        text = " ".join(elide_secrets(proc.cmdline)) or proc.exe or "?"
        if len(text) > ANCESTOR_CHARS:
            text = text[:ANCESTOR_CHARS] + " …"
        lines.append(f"{proc.pid} {text}")
    return lines
