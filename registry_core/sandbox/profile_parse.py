"""Reading a sandbox profile's YAML (see :mod:`registry_core.sandbox.profiles`).

Apart so that loading a profile whose parse is remembered
(:mod:`registry_core.sandbox.profile_cache`) does not import a YAML parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import yaml
from yaml.nodes import Node, SequenceNode

from registry_core.egress.rules import parse_pattern
from registry_core.errors import HostPatternError, ProfileError
from registry_core.sandbox import limits as lim
from registry_core.sandbox import yamlnodes as yn
from registry_core.sandbox.profiles import (
    _LANDRUN_LEVELS,
    _LEGACY_LEVELS,
    DEFAULT_LOG_LEVEL,
    Access,
    AdvancedSection,
    FilesystemSection,
    GeneralSection,
    LogLevel,
    NetworkMode,
    NetworkSection,
    SandboxProfile,
)

# A TCP port as landrun parses it here: decimal, no sign, no leading zero.
_PORT_RE = re.compile(r"[1-9][0-9]{0,4}")


def _ports(key: str, node: Node | None) -> tuple[int, ...]:
    """A list of port strings; each may hold several, comma-separated (as landrun splits)."""
    ports: list[int] = []
    items = node.value if isinstance(node, SequenceNode) else []
    for index, entry in enumerate(yn.strings(key, node)):
        for part in entry.split(","):
            word = part.strip()
            if not _PORT_RE.fullmatch(word) or int(word) > 65535:
                raise yn.NodeError(
                    key, 'expected TCP ports 1..65535 (e.g. "443" or "80,443")', items[index], entry
                )
            if int(word) not in ports:
                ports.append(int(word))
    return tuple(ports)


def _hosts(key: str, node: Node | None, warnings: list[str]) -> tuple[list[str], list[int]]:
    """Host patterns (registry_core.egress.rules), each checked; with their lines."""
    entries: list[str] = []
    lines: list[int] = []
    items = node.value if isinstance(node, SequenceNode) else []
    for item, entry in zip(items, yn.strings(key, node), strict=True):
        if not entry.strip():
            warnings.append(f"{key}: an empty entry names no host (ignored)")
            continue
        try:
            parse_pattern(entry)
        except HostPatternError as exc:
            raise yn.NodeError(key, exc.reason, item, entry) from exc
        entries.append(entry.strip())
        lines.append(item.start_mark.line + 1)
    return entries, lines


def _log_level(node: Node | None, warnings: list[str]) -> LogLevel:
    word = yn.string("general.log_level", node).strip()
    if not word:
        return DEFAULT_LOG_LEVEL
    for level in _LANDRUN_LEVELS:
        if level.value == word:
            return level
    legacy = _LEGACY_LEVELS.get(word.lower()) or next(
        (level for level in _LANDRUN_LEVELS if level.value == word.lower()), None
    )
    if legacy is not None:
        warnings.append(
            f"general.log_level: {word!r} is not a landrun level (error, info, debug); "
            f"ollie-core would pass it to landrun as is"
        )
        return legacy
    warnings.append(
        f"general.log_level: unknown level {word!r} ignored (landrun knows error, info, debug)"
    )
    return DEFAULT_LOG_LEVEL


def _env(
    node: Node | None, warnings: list[str]
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    names: list[str] = []
    values: list[tuple[str, str]] = []
    for entry in yn.strings("env", node):
        if "\0" in entry:
            raise yn.NodeError("env", "a NUL byte cannot be in the environment", node, entry)
        if not entry:
            warnings.append("env: an empty entry passes nothing (ignored)")
            continue
        if "=" in entry:
            name, _, value = entry.partition("=")
            if not name:
                raise yn.NodeError("env", "expected NAME or NAME=VALUE", node, entry)
            values.append((name, value))
        elif entry not in names:
            names.append(entry)
    return tuple(names), tuple(values)


def _advanced(node: Node | None, warnings: list[str]) -> AdvancedSection:
    adv = yn.mapping("advanced", node)
    warnings.extend(yn.unknown_keys("advanced", adv, ("ldd", "add_exec")))
    add_exec = adv.get("add_exec")
    if isinstance(add_exec, SequenceNode):
        paths = tuple(p for p in yn.strings("advanced.add_exec", add_exec) if p)
        warnings.append(
            "advanced.add_exec: a list is an old Ollie Tray form that ollie-core's loader "
            "rejects; put these paths under filesystem.rox and write add_exec: false"
            + (" (the list is empty)" if not paths else "")
        )
        return AdvancedSection(yn.boolean("advanced.ldd", adv.get("ldd")), False, paths)
    return AdvancedSection(
        ldd=yn.boolean("advanced.ldd", adv.get("ldd")),
        add_exec=yn.boolean("advanced.add_exec", add_exec),
    )


def _network(node: Node | None, warnings: list[str]) -> NetworkSection:
    net = yn.mapping("network", node)
    known = ("enabled", "unrestricted", "bind_tcp", "connect_tcp")
    warnings.extend(yn.unknown_keys("network", net, (*known, "allow_hosts", "deny_hosts", "ask")))
    allow, allow_lines = _hosts("network.allow_hosts", net.get("allow_hosts"), warnings)
    deny, deny_lines = _hosts("network.deny_hosts", net.get("deny_hosts"), warnings)
    network = NetworkSection(
        enabled=yn.boolean("network.enabled", net.get("enabled")),
        unrestricted=yn.boolean("network.unrestricted", net.get("unrestricted")),
        bind_tcp=_ports("network.bind_tcp", net.get("bind_tcp")),
        connect_tcp=_ports("network.connect_tcp", net.get("connect_tcp")),
        allow_hosts=tuple(allow),
        deny_hosts=tuple(deny),
        ask=yn.boolean("network.ask", net.get("ask")),
        host_lines=(*allow_lines, *deny_lines),
    )
    if network.mode is not NetworkMode.RESTRICTED and (
        network.allow_hosts or network.deny_hosts or network.ask
    ):
        warnings.append(
            f"network: allow_hosts/deny_hosts/ask are ignored when the network is"
            f" {network.mode.value}"
        )
    if network.unrestricted and not network.enabled:
        warnings.append(
            "network: unrestricted: true without enabled: true denies all TCP here "
            "(ollie-core would allow all); write enabled: true to allow it"
        )
    elif network.mode is not NetworkMode.RESTRICTED and (network.bind_tcp or network.connect_tcp):
        warnings.append(
            f"network: bind_tcp/connect_tcp are ignored when the network is {network.mode.value}"
        )
    return network


def _limit(
    key: str, node: Node | None, parse: Callable[[str], int | None], expected: str, bounds: range
) -> int | None:
    """One ``limits`` value; a missing or null one takes the default (None)."""
    word = yn.string(key, node).strip()
    if not word:
        return None
    value = parse(word)
    if value is None or value not in bounds:
        raise yn.NodeError(key, expected, node, word)
    return value


def _limits(node: Node | None, warnings: list[str]) -> lim.LimitsSection:
    section = yn.mapping("limits", node)
    warnings.extend(yn.unknown_keys("limits", section, ("tasks", "memory", "cpu")))
    return lim.LimitsSection(
        tasks=_limit(
            "limits.tasks",
            section.get("tasks"),
            lambda w: int(w) if w.isdecimal() and w.isascii() else None,
            f"expected a number of tasks 1..{lim.MAX_TASKS} (e.g. 256)",
            range(1, lim.MAX_TASKS + 1),
        ),
        memory=_limit(
            "limits.memory",
            section.get("memory"),
            lim.parse_size,
            'expected a size from 1M, bytes or with K/M/G/T (e.g. "4G", "512M")',
            range(lim.MIN_MEMORY, lim.MAX_MEMORY + 1),
        ),
        cpu=_limit(
            "limits.cpu",
            section.get("cpu"),
            lim.parse_duration,
            f'expected CPU seconds 1..{lim.MAX_CPU_SECONDS}, or with s/m/h (e.g. "90", "10m")',
            range(1, lim.MAX_CPU_SECONDS + 1),
        ),
    )


def _parse_node(root: Node | None, *, name: str, source: str) -> SandboxProfile:
    warnings: list[str] = []
    top = yn.mapping("profile", root)
    warnings.extend(
        yn.unknown_keys(
            "profile", top, ("filesystem", "network", "env", "general", "advanced", "limits")
        )
    )
    fs = yn.mapping("filesystem", top.get("filesystem"))
    warnings.extend(yn.unknown_keys("filesystem", fs, tuple(a.value for a in Access)))
    sections: dict[str, tuple[str, ...]] = {}
    lines: list[int] = []
    for access in Access:
        key = f"filesystem.{access.value}"
        node = fs.get(access.value)
        entries = yn.strings(key, node)
        if "" in entries:
            warnings.append(f"{key}: an empty path allows nothing (ignored)")
        sections[access.value] = tuple(e for e in entries if e)
        items = node.value if isinstance(node, SequenceNode) else []
        lines += [item.start_mark.line + 1 for item, e in zip(items, entries, strict=True) if e]
    network = _network(top.get("network"), warnings)
    env, env_values = _env(top.get("env"), warnings)
    gen = yn.mapping("general", top.get("general"))
    warnings.extend(yn.unknown_keys("general", gen, ("best_effort", "log_level")))
    general = GeneralSection(
        best_effort=yn.boolean("general.best_effort", gen.get("best_effort")),
        log_level=_log_level(gen.get("log_level"), warnings),
    )
    limits = _limits(top.get("limits"), warnings)
    return SandboxProfile(
        name=name,
        source=source,
        filesystem=FilesystemSection(**sections, lines=tuple(lines)),
        network=network,
        env=env,
        general=general,
        advanced=_advanced(top.get("advanced"), warnings),
        warnings=tuple(warnings),
        env_values=env_values,
        limits=limits,
    )


def parse_profile_text(text: str, *, name: str, source: str) -> SandboxProfile:
    """Parse YAML ``text`` as ollie-core would; errors name the key, value and line."""
    try:
        root = yn.compose_first(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(source, f"invalid YAML: {where}{problem}") from exc
    try:
        return _parse_node(root, name=name, source=source)
    except yn.NodeError as exc:
        raise ProfileError(source, str(exc)) from exc


def parse_profile(data: object, *, name: str, source: str) -> SandboxProfile:
    """Validate already-parsed ``data`` (dicts, lists, scalars) as if it were the file's YAML."""
    return parse_profile_text(yaml.safe_dump(data), name=name, source=source)
