"""Evaluate a parsed ``.meta`` on a host: match conditions, variant choice, executable.

Every condition of every variant is evaluated (the Tool Browser shows them
all); the first variant whose conditions all pass is selected.  The
executable is resolved in the spec's order and the step that found it is
recorded.
"""

from __future__ import annotations

import os
from pathlib import Path

from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.model import (
    Condition,
    ConditionResult,
    Fields,
    MatchKey,
    MetaFile,
    MetaWarning,
    Resolution,
    Status,
    Tier,
    Tool,
    VariantResult,
)


def _simulated(facts: HostFacts, detail: str) -> str:
    return detail + " (simulated)" if facts.simulated else detail


def check_condition(cond: Condition, facts: HostFacts) -> ConditionResult:
    """Evaluate one ``match`` condition, explaining the result in ``detail``."""
    key, value = cond.key, cond.value
    if key is MatchKey.BINARY:
        if os.path.isabs(value):
            if facts.executable_at(value):
                passed, detail = True, f"{value} is executable"
            elif facts.file_exists(value):
                passed, detail = False, f"{value} exists but is not executable"
            else:
                passed, detail = False, f"{value} missing"
        elif "/" in value:
            passed, detail = False, "relative paths are not allowed; use a name or absolute path"
        else:
            found = facts.find_binary(value)
            passed = found is not None
            detail = f"found at {found}" if found else "not found on PATH"
    elif key is MatchKey.FILE:
        path = os.path.expanduser(value) if value.startswith("~") else value
        passed = facts.file_exists(path)
        detail = "exists" if passed else "missing"
    elif key is MatchKey.OS:
        passed = facts.os_name == value
        detail = f"host os is {facts.os_name}"
    elif key is MatchKey.ARCH:
        passed = facts.arch == value
        detail = f"host arch is {facts.arch}"
    elif key is MatchKey.ENV:
        current = facts.env_value(value)
        passed = current != ""
        detail = "set" if passed else ("empty" if value in facts.env else "unset")
    else:  # MatchKey.NENV
        current = facts.env_value(value)
        passed = current == ""
        detail = ("empty" if value in facts.env else "unset") if passed else "set"
    return ConditionResult(key.value, value, passed, _simulated(facts, detail))


def resolve_executable(
    name: str, directory: Path, cmd: str | None, facts: HostFacts
) -> tuple[Path | None, Resolution | None, str]:
    """The spec's executable resolution: tools dir, then ``cmd``, then ``$PATH``."""
    colocated = directory / name
    if facts.executable_at(str(colocated)):
        return colocated, Resolution.TOOLS_DIR, f"executable {name} in the tools directory"
    if cmd is not None:
        if os.path.isabs(cmd):
            if facts.executable_at(cmd):
                return Path(cmd), Resolution.CMD, f"cmd {cmd} (absolute path)"
            reason = "is not executable" if facts.file_exists(cmd) else "does not exist"
            return None, None, f"cmd {cmd} {reason}"
        if "/" in cmd:
            candidate = directory / cmd
            if facts.executable_at(str(candidate)):
                return candidate, Resolution.CMD, f"cmd {cmd} relative to the tools directory"
            return None, None, f"cmd {cmd} not found relative to {directory}"
        candidate = directory / cmd
        if facts.executable_at(str(candidate)):
            return candidate, Resolution.CMD, f"cmd {cmd} in the tools directory"
        found = facts.find_binary(cmd)
        if found:
            return Path(found), Resolution.CMD, f"cmd {cmd} found on PATH"
        return None, None, f"cmd {cmd} not found in {directory} or on PATH"
    found = facts.find_binary(name)
    if found:
        return Path(found), Resolution.PATH, f"{name} found on PATH"
    return None, None, f"no executable {name} in {directory} and none on PATH"


_DEFAULTS = Fields(
    description="",
    prompt="",
    args={"type": "object", "properties": {}},
    tier=Tier.HOT,
    read_only=False,
    sudo=False,
    elevated=False,
)


def evaluate(meta: MetaFile, facts: HostFacts, shadowed: tuple[Path, ...] = ()) -> Tool:
    """Turn a parsed ``.meta`` into the host-specific :class:`Tool`."""
    results: list[VariantResult] = []
    chosen: Fields | None = meta.top if meta.variants is None else None
    chosen_index: int | None = None
    for variant in meta.variants or ():
        conditions = tuple(check_condition(c, facts) for c in variant.conditions)
        matched = all(c.passed for c in conditions)
        results.append(
            VariantResult(variant.index, matched, conditions, variant.fields.set_names())
        )
        if matched and chosen is None:
            chosen = variant.fields.merged_over(meta.top)
            chosen_index = variant.index
    warnings = list(meta.warnings)
    status = Status.AVAILABLE if chosen is not None else Status.HIDDEN
    fields = (chosen or meta.top).merged_over(_DEFAULTS)
    executable, resolution, how = None, None, ""
    if status is Status.AVAILABLE:
        executable, resolution, how = resolve_executable(
            meta.name, meta.path.parent, fields.cmd, facts
        )
        if executable is None:
            warnings.append(MetaWarning(str(meta.path), f"no executable: {how}"))
    return Tool(
        name=meta.name,
        source=meta.path,
        status=status,
        description=fields.description or "",
        prompt=fields.prompt or "",
        args=fields.args or {},
        tier=fields.tier or Tier.HOT,
        read_only=bool(fields.read_only),
        cmd=fields.cmd,
        sudo=bool(fields.sudo),
        elevated=bool(fields.elevated),
        variant=chosen_index,
        variants=tuple(results),
        executable=executable,
        resolution=resolution,
        resolution_detail=how,
        warnings=tuple(warnings),
        shadowed=shadowed,
    )
