"""Effective sandbox rules: a profile with its path templates expanded.

Templates are those of ollie-core: ``{NAME}`` with an upper-case name.
``{CWD}`` is the call's working directory; ``{HOME}``; ``{TMPDIR}`` (default
``/tmp``); ``{XDG_CONFIG_HOME}``, ``{XDG_DATA_HOME}``, ``{XDG_CACHE_HOME}``,
``{XDG_STATE_HOME}`` and ``{XDG_RUNTIME_DIR}`` with the XDG defaults;
``{OLLIE_CFG_PATH}`` and ``{OLLIE_DATA_PATH}`` (Ollie's config and data
roots); ``{OLLIE_TOOLS_PATH}`` (default: the tools directory); any other
``{ENV_VAR}`` of the given environment.  A path naming a variable that is
unset or empty is dropped with a warning (dropping an allow rule can only
narrow the sandbox).  Anything else in braces (``{lower}``) is literal text,
and ``~`` is not expanded (ollie-core does neither): a ``~`` path is dropped
with a warning.

Our one extension: variables holding colon-separated lists (``PATH``, names
ending in ``_PATH`` or ``_DIRS``) expand into one rule per entry -- no other
value is ever split, so a directory whose name contains a colon cannot
smuggle in a second path.  Relative paths are taken relative to the call's
working directory.

The environment given here must be the dispatcher's own, never one chosen
by the agent: it decides which paths are opened up.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from registry_core.paths import (
    config_home,
    ollie_config_dir,
    ollie_data_dir,
    state_home,
    tools_path_string,
)
from registry_core.sandbox.ldd import LddResolver, LddResult
from registry_core.sandbox.limits import LimitsSection
from registry_core.sandbox.profiles import Access, LogLevel, NetworkMode, SandboxProfile
from registry_core.sandbox.report import SkippedPath

_TEMPLATE_RE = re.compile(r"\{([A-Z_][A-Z0-9_]*)\}")
_DEFAULT_TMPDIR = "/tmp"  # noqa: S108 - the conventional default, not a temp file


class PathRule(NamedTuple):
    """Allow ``access`` beneath ``path``; ``origin`` says which profile key asked."""

    path: str
    access: Access
    origin: str


class NetworkPolicy(NamedTuple):
    mode: NetworkMode
    bind_tcp: tuple[int, ...] = ()
    connect_tcp: tuple[int, ...] = ()
    # Egress through the proxy (registry_core.egress.rules.rules_for_policy):
    # host patterns as written, the origin (key, line) of each, and ask.
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    ask: bool = False
    allow_origins: tuple[str, ...] = ()
    deny_origins: tuple[str, ...] = ()


class EffectiveRules(NamedTuple):
    """What the sandbox of one call enforces (before kernel ABI limits)."""

    profile: str
    source: str
    paths: tuple[PathRule, ...]
    network: NetworkPolicy
    env: tuple[str, ...]
    best_effort: bool
    log_level: LogLevel = LogLevel.INFO
    warnings: tuple[str, ...] = ()
    skipped: tuple[SkippedPath, ...] = ()
    # advanced.ldd / advanced.add_exec: applied to the command of a call (with_command).
    ldd: bool = False
    add_exec: bool = False
    # env entries written NAME=VALUE: set in the tool's environment.
    env_values: tuple[tuple[str, str], ...] = ()
    # The profile's limits section (sandbox.limits.call_limits resolves the defaults).
    limits: LimitsSection = LimitsSection()

    def cache_key(self) -> tuple[object, ...]:
        """Everything the kernel ruleset (and the decision to refuse) depends on."""
        return (
            tuple((rule.path, rule.access) for rule in self.paths),
            self.network,
            self.best_effort,
        )


class UnresolvedTemplateError(ValueError):
    """A path template names a variable that has no value."""

    def __init__(self, template: str, variable: str) -> None:
        self.template = template
        self.variable = variable
        super().__init__(f"{template!r}: template variable {{{variable}}} is not set")


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or str(Path.home())


def _is_list_variable(name: str) -> bool:
    return name == "PATH" or name.endswith(("_PATH", "_DIRS"))


def template_value(name: str, env: Mapping[str, str], cwd: str) -> tuple[str, ...]:
    """The value(s) of template variable ``name``; empty when it is unset."""
    home = _home(env)
    defaults: dict[str, Callable[[], str]] = {
        "CWD": lambda: cwd,
        "HOME": lambda: home,
        "TMPDIR": lambda: env.get("TMPDIR") or _DEFAULT_TMPDIR,
        "XDG_CONFIG_HOME": lambda: str(config_home(env)),
        "XDG_STATE_HOME": lambda: str(state_home(env)),
        "XDG_DATA_HOME": lambda: env.get("XDG_DATA_HOME") or f"{home}/.local/share",
        "XDG_CACHE_HOME": lambda: env.get("XDG_CACHE_HOME") or f"{home}/.cache",
        "XDG_RUNTIME_DIR": lambda: env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}",
        "OLLIE_CFG_PATH": lambda: str(ollie_config_dir(env)),
        "OLLIE_DATA_PATH": lambda: str(ollie_data_dir(env)),
        "OLLIE_TOOLS_PATH": lambda: tools_path_string(env),
    }
    value = defaults[name]() if name in defaults else env.get(name, "")
    if not value:
        return ()
    if _is_list_variable(name):
        return tuple(part for part in value.split(":") if part)
    return (value,)


def expand_path(template: str, env: Mapping[str, str], cwd: str) -> tuple[str, ...]:
    """All absolute, normalised paths ``template`` stands for.

    Raises :class:`UnresolvedTemplateError` for an unset variable or a
    leading ``~`` (not expanded, as in ollie-core).
    """
    text = template
    if text.startswith("~"):
        raise UnresolvedTemplateError(template, "~")
    pieces: list[tuple[str, ...]] = []
    position = 0
    for match in _TEMPLATE_RE.finditer(text):
        pieces.append((text[position : match.start()],))
        values = template_value(match.group(1), env, cwd)
        if not values:
            raise UnresolvedTemplateError(template, match.group(1))
        pieces.append(values)
        position = match.end()
    pieces.append((text[position:],))
    result: list[str] = []
    for combination in itertools.product(*pieces):
        path = os.path.normpath(os.path.join(cwd, "".join(combination)))
        if path not in result:
            result.append(path)
    return tuple(result)


class _Collector:
    def __init__(self, env: Mapping[str, str], cwd: str, warnings: list[str]) -> None:
        self.env = env
        self.cwd = cwd
        self.warnings = warnings
        self.rules: list[PathRule] = []
        self.skipped: list[SkippedPath] = []

    def add(self, template: str, access: Access, origin: str) -> None:
        try:
            paths = expand_path(template, self.env, self.cwd)
        except UnresolvedTemplateError as exc:
            if exc.variable == "~":
                reason = "'~' is not expanded (as in ollie-core); write {HOME}"
            else:
                reason = f"template variable {{{exc.variable}}} is not set"
            self.warnings.append(f"{origin}: {template!r} dropped: {reason}")
            self.skipped.append(SkippedPath(template, reason))
            return
        for path in paths:
            if not any(r.path == path and r.access is access for r in self.rules):
                self.rules.append(PathRule(path, access, origin))


def effective_rules(
    profile: SandboxProfile,
    env: Mapping[str, str],
    cwd: str,
) -> EffectiveRules:
    """Expand ``profile`` for a call in ``cwd`` with the dispatcher's ``env``.

    ``advanced.ldd`` and ``advanced.add_exec`` concern the command a call
    runs; :func:`with_command` applies them once that is known.
    """
    warnings = list(profile.warnings)
    collector = _Collector(env, cwd, warnings)
    for template, access, line in profile.filesystem.located():
        where = f", line {line}" if line is not None else ""
        collector.add(template, access, f"filesystem.{access.value}{where}")
    for template in profile.advanced.exec_paths:
        collector.add(template, Access.ROX, "advanced.add_exec (list)")
    network = profile.network
    policy = NetworkPolicy(network.mode)
    if network.mode is NetworkMode.RESTRICTED:
        allow_origins, deny_origins = network.host_origins()
        policy = NetworkPolicy(
            network.mode,
            network.bind_tcp,
            network.connect_tcp,
            allow_hosts=network.allow_hosts,
            deny_hosts=network.deny_hosts,
            ask=network.ask,
            allow_origins=allow_origins,
            deny_origins=deny_origins,
        )
    return EffectiveRules(
        profile=profile.name,
        source=profile.source,
        paths=tuple(collector.rules),
        network=policy,
        env=profile.env,
        best_effort=profile.general.best_effort,
        log_level=profile.general.log_level,
        warnings=tuple(warnings),
        skipped=tuple(collector.skipped),
        ldd=profile.advanced.ldd,
        add_exec=profile.advanced.add_exec,
        env_values=profile.env_values,
        limits=profile.limits,
    )


def with_command(
    rules: EffectiveRules,
    command: str,
    *,
    origin: str = "advanced.add_exec",
    always: bool = False,
    libraries: Callable[[str], LddResult] | None = None,
) -> EffectiveRules:
    """``rules`` for a call that runs the executable file ``command``.

    As landrun does for ollie-core: ``add_exec`` (or ``always``) allows
    executing ``command`` itself, ``ldd`` adds the shared libraries
    ``command`` loads (read+execute) -- only that file's, never those of
    other executables the profile names.  ``libraries`` resolves them
    (default: a fresh :class:`LddResolver`; pass a long-lived one to cache).
    """
    added: list[PathRule] = []
    warnings = list(rules.warnings)
    if always or rules.add_exec:
        added.append(PathRule(command, Access.ROX, origin))
    if rules.ldd:
        try:
            result = (libraries or LddResolver())(command)
        except OSError as exc:
            warnings.append(f"advanced.ldd: {command}: {exc}")
        else:
            warnings.extend(
                f"advanced.ldd: {command}: library {name} not found" for name in result.missing
            )
            added.extend(
                PathRule(library, Access.ROX, f"advanced.ldd ({command})")
                for library in result.libraries
            )
    new = [
        r for r in added if not any(o.path == r.path and o.access is r.access for o in rules.paths)
    ]
    return rules._replace(paths=(*rules.paths, *new), warnings=tuple(warnings))
