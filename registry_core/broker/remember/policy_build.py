"""Rules a person writes by hand: ``ollie-tools policy allow|deny`` and the tray's policy editor.

One place decides what such a rule becomes, so the command line and the
window cannot drift: an allow is bound to the tool's resolved executable and
its sha256 (read now); a deny covers any executable and, without a kind,
both kinds.  The tool name is checked against the registry first, the same
way for allow and deny (:func:`check_known`).
"""

from __future__ import annotations

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, file_sha256
from registry_core.broker.remember.policy_file import DURATIONS
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError
from registry_core.registry import Registry
from registry_core.registry.meta import TOOL_NAME_RE

ALLOW_DURATIONS = (Remember.MINUTES_15, Remember.HOUR, Remember.ALWAYS)


class UnknownToolError(PolicyError):
    """A rule for a name the registry does not know (refused unless forced)."""

    def __init__(self, name: str, where: str) -> None:
        self.name = name
        super().__init__(
            f"no tool named {name!r} in {where} (add --force to remember a rule for it anyway)"
        )


def check_known(registry: Registry, name: str, where: str) -> None:
    """Raise unless ``name`` is a valid tool name the registry knows (in any state)."""
    if not TOOL_NAME_RE.fullmatch(name):
        raise PolicyError(f"{name!r} is not a valid tool name ([A-Za-z0-9_.-], no leading '.')")
    if name not in registry:
        raise UnknownToolError(name, where)


def allow_policy(
    registry: Registry,
    name: str,
    *,
    kind: Kind | None,
    host: str,
    remember: Remember,
    now: float,
) -> Policy:
    """An allow for the usable tool ``name``, bound to its executable as it is now."""
    if remember not in ALLOW_DURATIONS:
        raise PolicyError(f"an allow by hand lasts 15m, 1h or always, not {remember.value!r}")
    tool = registry.usable(name)
    if tool.executable is None:
        raise PolicyError(f"tool {tool.name!r} has no executable ({tool.resolution_detail})")
    sha256 = file_sha256(tool.executable)
    if sha256 is None:
        raise PolicyError(f"cannot read {tool.executable} to bind the allow to its sha256")
    duration = DURATIONS.get(remember)
    return Policy(
        tool=tool.name,
        kind=kind or (Kind.SUDO if tool.sudo else Kind.SANDBOX),
        host=host,
        decision=Decision.ALLOW,
        remember=remember,
        created=now,
        expires=None if duration is None else now + duration,
        executable=str(tool.executable),
        sha256=sha256,
    )


def deny_policies(name: str, *, kind: Kind | None, host: str, now: float) -> list[Policy]:
    """Deny always, for ``kind`` or (``None``) both kinds, any executable."""
    kinds = [kind] if kind is not None else list(Kind)
    return [
        Policy(
            tool=name,
            kind=k,
            host=host,
            decision=Decision.DENY,
            remember=Remember.DENY_ALWAYS,
            created=now,
        )
        for k in kinds
    ]
