"""Evaluate a parsed ``.meta`` on a host: match conditions, variant choice, executable.

Every condition of every variant is evaluated (the Tool Browser shows them
all); the first variant whose conditions all pass is selected.  The
executable is resolved in the spec's order and the step that found it is
recorded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.model import (
    DEFAULT_ARGS,
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
    ToolDocs,
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
    found, resolution, how = _resolve(name, str(directory), cmd, facts, None)
    return (Path(found) if found is not None else None), resolution, how


def _executable_in(
    directory: str, name: str, facts: HostFacts, listing: Mapping[str, os.DirEntry[str]] | None
) -> str | None:
    """``directory/name`` if it is an executable file.

    ``listing`` (the directory's entries, when the caller has just listed it)
    answers "is there such a regular file" without a ``stat``; simulated files
    ("What if") always take the slow path.
    """
    if listing is not None and not facts.present_files and not facts.absent_files:
        entry = listing.get(name)
        if entry is None:
            return None
        try:
            if not entry.is_file():  # d_type: no system call unless it is a symlink
                return None
        except OSError:
            return None
        return entry.path if os.access(entry.path, os.X_OK) else None
    path = os.path.join(directory, name)
    return path if facts.executable_at(path) else None


def _resolve(
    name: str,
    directory: str,
    cmd: str | None,
    facts: HostFacts,
    listing: Mapping[str, os.DirEntry[str]] | None,
) -> tuple[str | None, Resolution | None, str]:
    colocated = _executable_in(directory, name, facts, listing)
    if colocated is not None:
        return colocated, Resolution.TOOLS_DIR, f"executable {name} in the tools directory"
    if cmd is not None:
        if os.path.isabs(cmd):
            if facts.executable_at(cmd):
                return _spelled(cmd), Resolution.CMD, f"cmd {cmd} (absolute path)"
            reason = "is not executable" if facts.file_exists(cmd) else "does not exist"
            return None, None, f"cmd {cmd} {reason}"
        if "/" in cmd:
            candidate = os.path.join(directory, cmd)
            if facts.executable_at(candidate):
                return (
                    _spelled(candidate),
                    Resolution.CMD,
                    f"cmd {cmd} relative to the tools directory",
                )
            return None, None, f"cmd {cmd} not found relative to {directory}"
        local = _executable_in(directory, cmd, facts, listing)
        if local is not None:
            return local, Resolution.CMD, f"cmd {cmd} in the tools directory"
        found = facts.find_binary(cmd)
        if found:
            return found, Resolution.CMD, f"cmd {cmd} found on PATH"
        return None, None, f"cmd {cmd} not found in {directory} or on PATH"
    found = facts.find_binary(name)
    if found:
        return found, Resolution.PATH, f"{name} found on PATH"
    return None, None, f"no executable {name} in {directory} and none on PATH"


def _spelled(path: str) -> str:
    """``path`` spelled the way :class:`~pathlib.Path` normalises it ("a//./b" → "a/b")."""
    return str(Path(path))


def _dirname(path: str) -> str:
    """``os.path.dirname`` for the normalised paths of Path objects (no trailing '/')."""
    cut = path.rfind("/")
    if cut > 0:
        return path[:cut]
    return "/" if cut == 0 else "."


def evaluate(
    meta: MetaFile,
    facts: HostFacts,
    shadowed: tuple[str, ...] = (),
    listing: Mapping[str, os.DirEntry[str]] | None = None,
) -> Tool:
    """Turn a parsed ``.meta`` into the host-specific :class:`Tool`.

    ``shadowed`` names the ``.meta`` files of the same name later on the search
    path.  ``listing`` optionally holds the entries of the tool's directory,
    listed in the same scan: names not in it are known not to exist (no ``stat``
    needed).
    """
    chosen: Fields | None = None
    chosen_index: int | None = None
    results: tuple[VariantResult, ...] = ()
    if meta.variants is None:
        status = Status.AVAILABLE
    else:
        memo = facts.condition_memo  # one answer per condition and scan
        out: list[VariantResult] = []
        for variant in meta.variants:
            checked: list[ConditionResult] = []
            matched = True
            for cond in variant.conditions:
                result = memo.get(cond)
                if result is None:
                    result = memo[cond] = check_condition(cond, facts)
                matched = matched and result.passed
                checked.append(result)
            fields = variant.fields
            out.append(VariantResult(variant.index, matched, tuple(checked), fields.set_names()))
            if matched and chosen is None:
                chosen = fields
                chosen_index = variant.index
        results = tuple(out)
        status = Status.AVAILABLE if chosen is not None else Status.HIDDEN
    # Variant fields where set, top level elsewhere (spec); defaults below.
    fields = meta.top if chosen is None else chosen.merged_over(meta.top)
    warnings = meta.warnings
    executable, resolution, how = None, None, ""
    if status is Status.AVAILABLE:
        source = meta.path
        executable, resolution, how = _resolve(
            meta.name, _dirname(source), fields.cmd, facts, listing
        )
        if executable is None:
            warnings = (*warnings, MetaWarning(source, f"no executable: {how}"))
    if meta.docs_source is not None:  # rebuilt from the scan cache: read docs on demand
        docs = ToolDocs.deferred(meta.docs_source, chosen_index)
    else:
        docs = ToolDocs(
            fields.prompt or "", fields.args if fields.args is not None else DEFAULT_ARGS
        )
    return Tool(
        meta.name,
        meta.path,
        status,
        fields.description or "",
        docs,
        fields.tier or Tier.HOT,
        bool(fields.read_only),
        fields.cmd,
        bool(fields.sudo),
        bool(fields.elevated),
        chosen_index,
        results,
        executable,
        resolution,
        how,
        (),
        warnings,
        shadowed,
    )
