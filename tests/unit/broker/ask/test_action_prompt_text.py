"""Headless front-ends' wording of an agent's own action (terminal, kdialog, zenity)."""

from __future__ import annotations

from registry_core.broker.ask.text import approval_text, approval_title
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ActionDetails, ApprovalRequest
from registry_core.broker.wire.messages import ActionDisplay, Kind, PatternKind


def request(command: str, pattern_kind: PatternKind, pattern: str) -> ApprovalRequest:
    details = ActionDetails(
        agent="claude-code",
        tool="Bash",
        summary=command,
        detail=command,
        display=ActionDisplay.COMMAND,
        command=command,
        path=None,
        pattern_kind=pattern_kind,
        pattern=pattern,
    )
    return ApprovalRequest(
        id="r1",
        tool="Bash",
        kind=Kind.SANDBOX,
        description=command,
        variant=None,
        executable=None,
        sha256=None,
        argv=(),
        args={"command": command},
        cwd="/home/a/p",
        requester=Requester(pid=7, uid=1000, gid=1000, exe="/usr/bin/node", cmdline=("node",)),
        host="h",
        timeout=30.0,
        client="claude-code",
        action=details,
    )


def test_the_action_text_names_agent_tool_command_and_pattern() -> None:
    text = approval_text(request("git push", PatternKind.PROGRAM, "git"))
    lines = "\n".join(text.plain_lines())
    assert text.title == "Ollie: allow claude-code to use Bash?"
    assert approval_title(request("x", PatternKind.EXACT, "x")) == text.title
    assert "The agent claude-code asks to use its tool Bash." in lines
    assert "git push" in lines and "/home/a/p" in lines
    assert "commands running the program git" in lines
    assert "sandbox" not in text.headline and "executable" not in lines.lower()


def test_control_characters_in_a_command_cannot_repaint_the_terminal() -> None:
    text = approval_text(request("echo \x1b[2Jhi\rgone", PatternKind.EXACT, "x"))
    lines = "\n".join(text.plain_lines())
    assert "\x1b" not in lines and "\r" not in lines
    assert "\\x1b" in lines
