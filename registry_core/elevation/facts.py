"""What the broker itself knows about a requested tool (never only the requester's word).

The approval dialog shows the description, variant and executable from the
broker's own registry, with the executable's sha256, and lists every way the
request differs from what that registry would run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from registry_core.elevation import messages as m
from registry_core.elevation.policies import file_sha256
from registry_core.registry import Registry

REQUEST_CODE_TOOL = m.REQUEST_CODE_TOOL


@dataclass(frozen=True)
class RequestFacts:
    description: str
    variant: int | None
    executable: str | None
    sha256: str | None
    mismatches: tuple[str, ...]


def _is_program(arg0: str, name: str, default: str) -> bool:
    """Does ``arg0`` run the broker's own ``name``?  A bare name is taken at its word
    (it is looked up on the requester's PATH); a path must be that very file."""
    if os.path.basename(arg0) != name:
        return False
    if "/" not in arg0:
        return True
    own = shutil.which(name) or default
    return os.path.realpath(arg0) == os.path.realpath(own)


def _code_facts(req: m.ElevateRequest) -> RequestFacts:
    bash = shutil.which("bash") or "/bin/bash"
    real = os.path.realpath(bash)
    mismatches: list[str] = []
    argv = list(req.argv)
    if len(argv) != 3 or not _is_program(argv[0], "bash", bash) or argv[1] != "-c":
        mismatches.append(f"argv {argv!r} is not bash -c <code>")
    elif argv[2] != req.code:
        mismatches.append("the code in argv differs from the code shown")
    return RequestFacts(
        description="Run bash code outside the sandbox (ollie-core x/elevate plugin).",
        variant=None,
        executable=real,
        sha256=file_sha256(real),
        mismatches=tuple(mismatches),
    )


def gather_facts(registry: Registry, req: m.ElevateRequest) -> RequestFacts:
    """Registry facts for ``req``; raises ToolNotFoundError / ToolUnavailableError."""
    if req.code is not None and req.tool == REQUEST_CODE_TOOL:
        return _code_facts(req)
    tool = registry.usable(req.tool)
    executable = str(tool.executable) if tool.executable else None
    mismatches: list[str] = []
    if req.code is not None:
        mismatches.append("a code field was sent for a registry tool")
    if executable is None:
        mismatches.append(f"the registry finds no executable: {tool.resolution_detail}")
    argv = list(req.argv)
    if req.kind is m.Kind.SUDO:
        expected = ["sudo", "-A", "--", executable]
        ok = (
            len(argv) == 4
            and _is_program(argv[0], "sudo", "/usr/bin/sudo")
            and argv[1:3] == ["-A", "--"]
            and argv[3] == executable
        )
        if not tool.sudo:
            mismatches.append("asks to run as root, but the tool does not declare sudo: true")
    else:
        expected = [executable]
        ok = argv == expected
        if tool.sudo:
            mismatches.append(
                "the tool declares sudo: true but the request asks only to leave the sandbox"
            )
    if not ok and executable is not None:
        mismatches.append(f"requested argv {argv!r}; the registry would run {expected!r}")
    return RequestFacts(
        description=tool.description,
        variant=tool.variant,
        executable=executable,
        sha256=file_sha256(executable) if executable else None,
        mismatches=tuple(mismatches),
    )
