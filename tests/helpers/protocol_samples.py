"""Sample messages and parsing helpers shared by the protocol codec's unit tests.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire.codec import parse_message
from registry_core.broker.wire.messages import (
    AckReply,
    AskpassRequest,
    DecidedBy,
    Decision,
    DecisionReply,
    Direction,
    ElevateRequest,
    ErrorCode,
    ErrorReply,
    Kind,
    Message,
    MessageError,
    OpenBrowserRequest,
    PasswordReply,
    PingRequest,
    PongReply,
    ProgressNotice,
    ProgressState,
    StatusReply,
    StatusRequest,
    SudoResultRequest,
)

GRANT = "g" * 43  # the shape of secrets.token_urlsafe(32)

ELEVATE = ElevateRequest(
    id="req-1",
    tool="system_logs",
    kind=Kind.SUDO,
    argv=("sudo", "-A", "--", "/usr/local/bin/system_logs"),
    args={"lines": "10", "source": "dmesg", "nested": {"list": [1, 2.5, None, True]}},
    cwd="/home/alice/project",
    host="build-box.example.org",
    code=None,
    timeout=120.0,
)

REQUESTS: list[Message] = [
    PingRequest(id=1),
    ELEVATE,
    ElevateRequest(
        id=2,
        tool="execute_code",
        kind=Kind.SANDBOX,
        argv=("bash", "-c", "ls /root"),
        args={},
        cwd="/",
        code="ls /root\necho done",
    ),
    AskpassRequest(id=3, grant=GRANT, prompt="[sudo] password for alice: ", attempt=2),
    SudoResultRequest(id=4, grant=GRANT, exit_code=1, auth_failed=True),
    SudoResultRequest(id=5, grant=GRANT, exit_code=-9, auth_failed=False),
    StatusRequest(id="s"),
    OpenBrowserRequest(id=0),
]

REPLIES: list[Message] = [
    PongReply(id=1),
    DecisionReply(
        id="req-1",
        decision=Decision.ALLOW,
        reason="approved in dialog",
        by=DecidedBy.USER,
        remember="15m",
        grant=GRANT,
    ),
    DecisionReply(id=2, decision=Decision.DENY, reason="no front-end", by=DecidedBy.NO_FRONT_END),
    PasswordReply(id=3, password="correct horse battery staple ünïcode"),
    AckReply(id=4),
    StatusReply(id="s", pending=2, paused=False, version="0.1.0"),
    ProgressNotice(id="req-1", state=ProgressState.WAITING_FOR_USER),
    ProgressNotice(id="req-1", state=ProgressState.NOTIFIED),
    ErrorReply(id=None, code=ErrorCode.BAD_JSON, message="invalid JSON"),
    ErrorReply(id=7, code=ErrorCode.NO_GRANT, message="grant expired"),
]


def base(op: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": 9, "op": op, **fields}


def elevate_obj(**changes: Any) -> dict[str, Any]:
    obj = ELEVATE.to_json()
    obj.update(changes)
    return {key: value for key, value in obj.items() if value is not ...}


def rejected(obj: Any, direction: Direction = Direction.TO_BROKER) -> MessageError:
    with pytest.raises(MessageError) as info:
        parse_message(obj, direction)
    return info.value
