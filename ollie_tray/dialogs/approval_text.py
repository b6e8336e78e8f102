"""The sentences an approval dialog uses to say what approving does."""

from __future__ import annotations

from registry_core.broker.ask.text import approval_covers
from registry_core.broker.peer.confinement import SANDBOX_LABEL
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind


def explanation(request: ApprovalRequest) -> str:
    """What approving ``request`` lets happen (and who is asking, when sandboxed)."""
    text = consequence(request)
    if request.action is None:
        text = f"{text} Approving covers {' '.join(approval_covers(request))}."
    if request.sandboxed:
        text = (
            f"This request comes {SANDBOX_LABEL}: a sandboxed process is asking, and it"
            f" never receives a password. {text}"
        )
    return text


def consequence(request: ApprovalRequest) -> str:
    if request.action is not None:
        return (
            "If you approve, the agent runs this action itself, as you, outside any Ollie sandbox."
        )
    if request.kind is Kind.SUDO:
        return (
            "If you approve, this tool runs as root through sudo: it can read and change"
            " anything on this computer."
        )
    return (
        "If you approve, this tool runs outside the Landlock sandbox as you: it can reach"
        " all your files, the network and your desktop session."
    )
