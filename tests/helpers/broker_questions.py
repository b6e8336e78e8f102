"""The one factory of broker questions for tests: an ``ApprovalRequest`` or a
``PasswordRequest`` with plain defaults, any field changed by keyword.

A test module that needs its own defaults (a tool name its assertions mention)
binds them once: ``make_request = functools.partial(approval_request, tool="x")``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest, PasswordRequest
from registry_core.broker.wire.kinds import Kind


def approval_request(**changes: Any) -> ApprovalRequest:
    """A sudo request for ``disk_usage`` from pid 99 (uid 1000), then ``changes``."""
    tool = changes.get("tool", "disk_usage")
    executable = f"/usr/local/bin/{tool}"  # argv names it even where ``changes`` drop it
    request = ApprovalRequest(
        id="req-1",
        tool=tool,
        kind=Kind.SUDO,
        description="Show disk usage.",
        variant=None,
        executable=executable,
        sha256="ab" * 32,
        argv=("sudo", "-A", "--", executable),
        args={"path": "/"},
        cwd="/home/alice",
        requester=Requester(pid=99, uid=1000, gid=1000, exe="/usr/bin/agent"),
        host="desk",
        timeout=60.0,
    )
    return dataclasses.replace(request, **changes)


def password_request(
    approval: ApprovalRequest | None = None, *, attempt: int = 1, **changes: Any
) -> PasswordRequest:
    """The credential gate's question for ``approval`` (default: :func:`approval_request`)."""
    request = PasswordRequest(
        id="pw-1",
        approval=approval if approval is not None else approval_request(),
        prompt="[sudo] password for alice: ",
        user="alice",
        attempt=attempt,
    )
    return dataclasses.replace(request, **changes)
