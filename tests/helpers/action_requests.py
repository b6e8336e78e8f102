"""Action (``ollie-approve``) approval requests for the headless front-ends' tests."""

from __future__ import annotations

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ActionDetails, ApprovalRequest
from registry_core.broker.wire.messages import ActionDisplay, Kind, PatternKind

EDITED_FILE = "/home/a/proj/src/app.py"


def edit_request(pattern: str = EDITED_FILE) -> ApprovalRequest:
    """Claude Code's Edit of one file; the suggested pattern is the file itself."""
    return _request(
        ActionDetails(
            agent="claude-code",
            tool="Edit",
            summary=f"edit {EDITED_FILE}",
            detail="--- a\n+++ b\n-old\n+new",
            display=ActionDisplay.DIFF,
            command=None,
            path=EDITED_FILE,
            pattern_kind=PatternKind.PATH,
            pattern=pattern,
        )
    )


def command_request(command: str, kind: PatternKind, pattern: str) -> ApprovalRequest:
    return _request(
        ActionDetails(
            agent="claude-code",
            tool="Bash",
            summary=command,
            detail=command,
            display=ActionDisplay.COMMAND,
            command=command,
            path=None,
            pattern_kind=kind,
            pattern=pattern,
        )
    )


def _request(details: ActionDetails) -> ApprovalRequest:
    return ApprovalRequest(
        id="act-1",
        tool=details.tool,
        kind=Kind.SANDBOX,
        description=details.summary,
        variant=None,
        executable=None,
        sha256=None,
        argv=(),
        args={},
        cwd="/home/a/proj",
        requester=Requester(pid=7, uid=1000, gid=1000, exe="/usr/bin/node", cmdline=("node",)),
        host="h",
        timeout=30.0,
        client="claude-code",
        action=details,
    )
