"""The seam between the dispatcher and the elevation broker.

The dispatcher asks an :class:`ElevationGate` before a tool runs outside the
sandbox.  A gate either returns an :class:`Authorization` or raises
:class:`~registry_core.errors.ElevationDeniedError`; there is no third
outcome, so every failure to ask is a denial (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from registry_core.broker.wire.kinds import Kind
from registry_core.errors import ElevationDeniedError, UntrustedProgramError
from registry_core.pinned import approved_argv
from registry_core.trusted import trusted_program

ASKPASS = "ollie-askpass"
"""Ollie's own ``SUDO_ASKPASS`` program (a console script of its installation)."""


class ElevationRequest(NamedTuple):
    tool: str
    kind: Kind
    argv: tuple[str, ...]
    args: Mapping[str, Any]
    cwd: str
    code: str | None = None
    client: str | None = None  # the agent/client the call came through (e.g. an MCP client)
    # Seconds the requester will wait for the decision (the broker's countdown
    # never outlasts it); None: the broker's own prompt timeout.
    timeout: float | None = None


class Authorization(NamedTuple):
    """An approval; ``grant`` is the single-use token ``ollie-askpass`` presents to sudo."""

    reason: str
    grant: str | None = None
    env: Mapping[str, str] = MappingProxyType({})


class ElevationGate(Protocol):
    def authorize(self, request: ElevationRequest) -> Authorization:
        """Approve or raise ElevationDeniedError."""
        ...

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        """Tell the broker how a sudo run with ``grant`` ended.

        Returns why the credential gate refused the grant (password cancelled,
        attempts exhausted, ...) when it did, so the tool never ran; else ``None``.
        """
        ...

    def close(self) -> None:
        """Let go of what the gate holds (an in-process broker stops); idempotent."""
        ...


class RefusingGate:
    """The gate when nothing can ask a person: every request is denied."""

    def __init__(self, reason: str = "no elevation broker or front-end is available") -> None:
        self.reason = reason

    def authorize(self, request: ElevationRequest) -> Authorization:
        raise ElevationDeniedError(self.reason)

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        return None

    def close(self) -> None:
        pass


def sudo_argv(
    executable: str, sha256: str, sudo: str | None = None, python: str | None = None
) -> list[str]:
    """``sudo -A`` so the password goes askpass → sudo, never via stdin, argv or env.

    ``sudo`` is the absolute path of the program to run, by default the trusted
    ``sudo`` of a system directory (:func:`~registry_core.trusted.trusted_program`;
    :class:`UntrustedProgramError` when there is none).  Never a bare name: the
    requester's ``PATH`` would choose the file, and a ``sudo`` planted first on it
    receives the grant and the password.  The broker checks that this very path
    is its own trusted ``sudo``.

    What sudo runs as root is :func:`registry_core.pinned.approved_argv`: a file
    only root can change by its path, any other through the pinned exec
    (``python`` -- by default the trusted system ``python3`` -- ``-I -c <stub>
    <sha256> <executable>``), which as root runs the file only if its bytes are
    the approved ``sha256``, from a sealed copy, with a clean environment.  sudo
    closes every other descriptor, so the check happens on root's side of sudo.
    """
    program = trusted_program("sudo") if sudo is None else sudo
    interpreter = trusted_program("python3") if python is None else python
    for path in (program, interpreter):
        if not path.startswith("/"):
            raise UntrustedProgramError(path, "not an absolute path")
    return [program, "-A", "--", *approved_argv(interpreter, sha256, executable)]


def require_askpass(askpass: str | None) -> str:
    """The askpass program of a sudo run; :class:`UntrustedProgramError` without one.

    It is Ollie's own console script, found in Ollie's installation (see
    :func:`registry_core.dispatch.gate_choice.askpass_program`), never on ``PATH``.  Without
    it, ``sudo -A`` would run whatever the caller's ``SUDO_ASKPASS`` names and hand
    it the grant, so a sudo call is refused before anyone is asked.
    """
    if not askpass:
        raise UntrustedProgramError(
            ASKPASS,
            "not installed next to Ollie's Python interpreter (sudo tools need it)",
            "ollie-tray",
        )
    return askpass


__all__ = [
    "Authorization",
    "ElevationGate",
    "ElevationRequest",
    "Kind",
    "RefusingGate",
    "require_askpass",
    "sudo_argv",
]
