"""What ``ollie-tools sandbox show`` prints: effective rules as data and as text.

:func:`describe` returns plain JSON-able data (for ``--json``);
:func:`format_text` renders that data for a person, in aligned columns.
Neither creates a Landlock ruleset: paths are only stat'ed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from registry_core.errors import SandboxError
from registry_core.sandbox import landlock, seccomp
from registry_core.sandbox.apply import ACCESS_RIGHTS, gaps
from registry_core.sandbox.contain import missing_bwrap_gap
from registry_core.sandbox.limits import call_limits, format_size
from registry_core.sandbox.mounts import plan_view, view_rows
from registry_core.sandbox.pinning import OpenedPaths, pin_directory
from registry_core.sandbox.profiles import NetworkMode
from registry_core.sandbox.report import Gap
from registry_core.sandbox.rules import EffectiveRules
from registry_core.sandbox.scope import ENFORCED_BY as SCOPE_ENFORCED_BY


def _kind(path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    return "dir" if stat.S_ISDIR(mode) else "file"


def _rights(rights: landlock.FsAccess) -> list[str]:
    return [flag.name.lower() for flag in landlock.FsAccess if flag & rights and flag.name]


_PRIVATE_TMP = "(private)"


def _namespaces(
    rules: EffectiveRules, bwrap: str | None, cwd: str, socket: str | None
) -> dict[str, Any]:
    unshared = ["user", "mount", "pid", "ipc", "uts", "cgroup"]
    if rules.network.mode is NetworkMode.DENY:
        unshared.append("net")
    try:
        workdir = pin_directory(cwd)
    except SandboxError:  # a missing directory: the plan by path, as a call would fail
        view = plan_view(rules, cwd=cwd, private_tmp=_PRIVATE_TMP, broker_socket=socket)
    else:
        # What a call gets: the working directory and the paths inside it by descriptor.
        opened = OpenedPaths(workdir, [rule.path for rule in rules.paths])
        try:
            view = plan_view(
                rules, cwd=cwd, private_tmp=_PRIVATE_TMP, broker_socket=socket, opened=opened
            )
        finally:
            opened.close()
            os.close(workdir.fd)
    return {
        "builder": bwrap,
        "enforced": bwrap is not None,
        "unshared": unshared if bwrap else [],
        "view": [
            {"kind": kind, "path": path, "detail": detail}
            for kind, path, detail in view_rows(view.args)
        ],
        "read_only_git": list(view.hidden_git),
    }


def _missing_filter(bwrap: str | None) -> tuple[Gap, ...]:
    missing = seccomp.unavailable_reason() if bwrap else None
    return () if missing is None else (seccomp.missing_filter_gap(missing),)


def _limits_enforced_by(namespaces: bool, cgroup: bool) -> str:
    if not namespaces:  # the Landlock-only path: no exec step, no scope
        return "rlimits (memory and cpu only)"
    return SCOPE_ENFORCED_BY if cgroup else "rlimits"


def describe(
    rules: EffectiveRules,
    abi: int | None = None,
    *,
    bwrap: str | None = None,
    cwd: str | None = None,
    broker_socket: str | None = None,
    cgroup: bool = False,
) -> dict[str, Any]:
    """JSON-able description of ``rules`` on a kernel of ``abi`` (detected if ``None``).

    ``bwrap`` is the namespace builder (``None``: not installed); ``cwd`` and
    ``broker_socket`` complete the mount view a call would get; ``cgroup``:
    the session has a systemd user manager, so each call runs in a scope
    (:mod:`.scope`).
    """
    if abi is None:
        abi = landlock.abi_version()
    known = min(abi, landlock.MAX_KNOWN_ABI)
    handled = landlock.fs_access_for_abi(known)
    filesystem = []
    for rule in rules.paths:
        kind = _kind(rule.path)
        rights = ACCESS_RIGHTS[rule.access] & handled
        if kind == "file":
            rights &= landlock.FILE_ONLY_ACCESS
        filesystem.append(
            {
                "path": rule.path,
                "access": rule.access.value,
                "kind": kind,
                "origin": rule.origin,
                "rights": _rights(rights) if kind != "missing" else [],
            }
        )
    scopes = landlock.scopes_for_abi(known)
    scoped = [scope.name.lower() for scope in landlock.Scope if scope & scopes and scope.name]
    network = rules.network
    return {
        "profile": rules.profile,
        "source": rules.source,
        "kernel_abi": abi,
        "landlock": abi >= 1,
        "best_effort": rules.best_effort,
        "log_level": rules.log_level.value,
        "filesystem": filesystem,
        "network": {
            "mode": network.mode.value,
            "bind_tcp": list(network.bind_tcp),
            "connect_tcp": list(network.connect_tcp),
        },
        "scoped": scoped,
        "env": list(rules.env),
        # NAME=VALUE entries: names only (a value may be private to the profile).
        "env_set": [name for name, _value in rules.env_values],
        # Applied to the command of each call (the tool's executable).
        "advanced": {"ldd": rules.ldd, "add_exec": rules.add_exec},
        # Per-call bounds; cpu None: from each call's timeout (sandbox.limits).
        "limits": {
            "tasks": call_limits(rules.limits, 0).tasks,
            "memory": call_limits(rules.limits, 0).memory,
            "cpu": rules.limits.cpu,
            "enforced_by": _limits_enforced_by(bwrap is not None, cgroup),
        },
        "namespaces": _namespaces(rules, bwrap, cwd or os.getcwd(), broker_socket),
        # What the call's seccomp filter refuses (loaded by bwrap).
        "seccomp": {
            "enforced": bwrap is not None and seccomp.unavailable_reason() is None,
            "refused": [
                rule.what for rule in seccomp.plan(rules.network.mode, rules.network.bind_tcp)
            ],
        },
        "unenforced": [
            {
                "feature": gap.feature,
                "reason": gap.reason,
                "needs_abi": gap.needs_abi,
                "requested": gap.requested,
            }
            for gap in (
                *(() if bwrap else (missing_bwrap_gap(),)),
                *_missing_filter(bwrap),
                *gaps(rules, abi, namespaces=bwrap is not None),
            )
        ],
        "warnings": list(rules.warnings),
        "skipped": [{"path": s.path, "reason": s.reason} for s in rules.skipped],
    }


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return [indent + "(none)"]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _ports(ports: Sequence[int]) -> str:
    return ", ".join(str(port) for port in ports) or "none"


def _gap_text(gap: Mapping[str, Any]) -> str:
    needs = f" (needs ABI {gap['needs_abi']})" if gap["needs_abi"] else ""
    return f"{gap['reason']}{needs}"


def _section(title: str, rows: Sequence[Sequence[str]]) -> list[str]:
    return ["", f"{title}:", *_table(rows)]


def format_text(description: Mapping[str, Any]) -> str:
    """Human rendering of :func:`describe`'s output."""
    abi = description["kernel_abi"]
    header = [
        ("Profile:", f"{description['profile']} ({description['source']})"),
        ("Landlock:", f"ABI {abi}" if description["landlock"] else "not available"),
        ("Best effort:", "yes" if description["best_effort"] else "no"),
    ]
    lines = _table(header, indent="")
    lines += _section(
        "Filesystem",
        [
            (entry["access"], entry["path"], entry["kind"], entry["origin"])
            for entry in description["filesystem"]
        ],
    )
    network = description["network"]
    if network["mode"] == NetworkMode.RESTRICTED.value:
        rows = [
            ("mode", "restricted"),
            ("connect tcp", _ports(network["connect_tcp"])),
            ("bind tcp", _ports(network["bind_tcp"])),
        ]
    elif network["mode"] == NetworkMode.DENY.value:
        rows = [("mode", "deny (no TCP bind or connect)")]
    else:
        rows = [("mode", "unrestricted")]
    lines += _section("Network", rows)
    lines += _section("Scoped", [(name,) for name in description["scoped"]])
    spaces = description["namespaces"]
    if spaces["enforced"]:
        lines += [
            "",
            f"Namespaces: {', '.join(spaces['unshared'])} (built by {spaces['builder']})",
            "Mount view (everything else is absent):",
            *_table([(v["kind"], v["path"], v["detail"]) for v in spaces["view"]]),
        ]
        if spaces["read_only_git"]:
            lines += _section("Read-only .git", [(p,) for p in spaces["read_only_git"]])
    else:
        lines += ["", "Namespaces: NOT ENFORCED (bwrap from the bubblewrap package is missing)"]
    calls = description["seccomp"]
    state = "refused with an errno" if calls["enforced"] else "NOT ENFORCED"
    lines += _section(f"System calls ({state})", [(what,) for what in calls["refused"]])
    bounds = description["limits"]
    cpu = bounds["cpu"]
    memory = f"{format_size(bounds['memory'])} data per process"
    if bounds["enforced_by"] == SCOPE_ENFORCED_BY:
        memory += f", {format_size(bounds['memory'])} for the whole call"
    lines += _section(
        f"Limits per call ({bounds['enforced_by']})",
        [
            ("tasks", str(bounds["tasks"])),
            ("memory", memory),
            ("cpu", f"{cpu} s per process" if cpu else "call timeout x CPUs, per process"),
        ],
    )
    lines += _section("Environment passed", [(name,) for name in description["env"]])
    if description["env_set"]:
        lines += _section("Environment set", [(name,) for name in description["env_set"]])
    if description["advanced"]["ldd"]:
        lines += ["", "Libraries: each call's executable gets its shared libraries (ldd)"]
    lines += _section(
        "Not enforced", [(gap["feature"], _gap_text(gap)) for gap in description["unenforced"]]
    )
    if description["skipped"]:
        lines += _section(
            "Skipped paths", [(entry["path"], entry["reason"]) for entry in description["skipped"]]
        )
    if description["warnings"]:
        lines += ["", "Warnings:", *(f"  {warning}" for warning in description["warnings"])]
    return "\n".join(lines) + "\n"
