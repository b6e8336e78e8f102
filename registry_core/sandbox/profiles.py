"""Sandbox profiles: the YAML files in ``<ollie config>/sandbox``.

The key set **and meaning** are those of the public ollie-core runtime, so its
profiles load here unchanged and ours load there (docs/ollie-core.md lists the
few deliberate differences)::

    filesystem: {ro: [...], rox: [...], rw: [...], rwx: [...]}
    network: {enabled: true, unrestricted: false, bind_tcp: [], connect_tcp: ["443"],
              allow_hosts: [api.github.com], deny_hosts: [], ask: false}  # hosts: ours
    env: [PATH, LANG, EDITOR=vi]
    general: {best_effort: false, log_level: error}
    advanced: {ldd: false, add_exec: false}
    limits: {tasks: 256, memory: 4G, cpu: 10m}   # ours; ollie-core ignores it

The YAML is read with ollie-core's (yaml.v3) rules, see
:mod:`registry_core.sandbox.yamlnodes`.  This module only reads and
validates; a :class:`SandboxProfile` is the profile *as written* (path
templates unexpanded).  Unknown keys are collected as warnings (ollie-core
ignores them); wrong types or values raise :class:`ProfileError` naming the
file, the key and the value.  Template expansion lives in
:mod:`registry_core.sandbox.rules`.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from registry_core.errors import ProfileError
from registry_core.paths import resources_dir, sandbox_profile_path
from registry_core.safe_open import FileTooLargeError, read_regular
from registry_core.sandbox.limits import LimitsSection

MAX_PROFILE_BYTES = 1024 * 1024
DEFAULT_PROFILE = "default"
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class Access(enum.Enum):
    """Filesystem access classes of the ``filesystem`` section."""

    RO = "ro"  # read files, list directories
    ROX = "rox"  # ... and execute
    RW = "rw"  # read, write, create, remove, rename
    RWX = "rwx"  # ... and execute


class NetworkMode(enum.Enum):
    """What the ``network`` section amounts to."""

    DENY = "deny"  # enabled: false (or missing) -> no TCP bind/connect at all
    RESTRICTED = "restricted"  # only the listed TCP ports
    UNRESTRICTED = "unrestricted"  # Landlock does not restrict the network


class LogLevel(enum.Enum):
    """``general.log_level``: ollie-core hands it to landrun (error, info, debug)."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"
    OFF = "off"


_LANDRUN_LEVELS = (LogLevel.ERROR, LogLevel.INFO, LogLevel.DEBUG)
# Accepted before ollie-core compatibility was checked; landrun does not know them.
_LEGACY_LEVELS = {
    "trace": LogLevel.TRACE,
    "warn": LogLevel.WARN,
    "warning": LogLevel.WARN,
    "off": LogLevel.OFF,
    "none": LogLevel.OFF,
}


# landrun's own default when ollie-core passes no --log-level.
DEFAULT_LOG_LEVEL = LogLevel.ERROR


class FilesystemSection(NamedTuple):
    ro: tuple[str, ...] = ()
    rox: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    rwx: tuple[str, ...] = ()
    # The file line (1-based) of each entry, in :meth:`entries` order; empty when unknown.
    lines: tuple[int, ...] = ()

    def entries(self) -> Iterator[tuple[str, Access]]:
        """Every ``(path template, access)`` in file order, section by section."""
        for access in Access:
            for path in getattr(self, access.value):
                yield path, access

    def located(self) -> Iterator[tuple[str, Access, int | None]]:
        """:meth:`entries` with the line each was written on (``None`` when unknown)."""
        for index, (path, access) in enumerate(self.entries()):
            yield path, access, self.lines[index] if index < len(self.lines) else None


class NetworkSection(NamedTuple):
    # Missing means false, as in ollie-core: no TCP at all.
    enabled: bool = False
    unrestricted: bool = False
    bind_tcp: tuple[int, ...] = ()
    connect_tcp: tuple[int, ...] = ()
    # Ours (ollie-core ignores them): host patterns as written, checked by
    # registry_core.egress.rules; ask: unknown destinations asked, else denied.
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    ask: bool = False
    # The file line of each allow_hosts then deny_hosts entry; empty when unknown.
    host_lines: tuple[int, ...] = ()

    def host_origins(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``network.allow_hosts, line 7``-style origins of each entry, allow then deny."""
        origins = []
        for index in range(len(self.allow_hosts) + len(self.deny_hosts)):
            key = "allow_hosts" if index < len(self.allow_hosts) else "deny_hosts"
            line = self.host_lines[index] if index < len(self.host_lines) else None
            origins.append(f"network.{key}" + (f", line {line}" if line is not None else ""))
        split = len(self.allow_hosts)
        return tuple(origins[:split]), tuple(origins[split:])

    @property
    def mode(self) -> NetworkMode:
        # ollie-core lets unrestricted win over enabled: false; we deny (safer) and warn.
        if not self.enabled:
            return NetworkMode.DENY
        if self.unrestricted:
            return NetworkMode.UNRESTRICTED
        return NetworkMode.RESTRICTED


class GeneralSection(NamedTuple):
    best_effort: bool = False
    log_level: LogLevel = DEFAULT_LOG_LEVEL


class AdvancedSection(NamedTuple):
    # ollie-core's meaning: ``ldd`` adds the shared libraries of the command
    # that runs, ``add_exec`` the command's own executable (both read+execute).
    ldd: bool = False
    add_exec: bool = False
    # Extra read+execute paths: the list form ``add_exec: [...]`` of earlier
    # Ollie Tray versions (ollie-core's loader rejects it; warned).
    exec_paths: tuple[str, ...] = ()


class SandboxProfile(NamedTuple):
    """A profile as written in its file; ``source`` is that file's path."""

    name: str
    source: str
    filesystem: FilesystemSection = FilesystemSection()
    network: NetworkSection = NetworkSection()
    # Variables passed through by name (``PREFIX*`` passes every match).
    env: tuple[str, ...] = ()
    general: GeneralSection = GeneralSection()
    advanced: AdvancedSection = AdvancedSection()
    warnings: tuple[str, ...] = ()
    # ``KEY=VALUE`` entries of ``env``: the variable is set to VALUE.
    env_values: tuple[tuple[str, str], ...] = ()
    # Per-call resource bounds (registry_core.sandbox.limits); unset keys take defaults.
    limits: LimitsSection = LimitsSection()


def parse_profile_text(text: str, *, name: str, source: str) -> SandboxProfile:
    """Parse YAML ``text`` as ollie-core would; errors name the key, value and line."""
    from registry_core.sandbox import profile_parse  # YAML: imported only to parse

    return profile_parse.parse_profile_text(text, name=name, source=source)


def parse_profile(data: object, *, name: str, source: str) -> SandboxProfile:
    """Validate already-parsed ``data`` (dicts, lists, scalars) as if it were the file's YAML."""
    from registry_core.sandbox import profile_parse

    return profile_parse.parse_profile(data, name=name, source=source)


def load_profile_file(
    path: Path, *, name: str | None = None, remember: bool = False
) -> SandboxProfile:
    """Read and validate the profile at ``path`` (at most 1 MiB).

    ``remember``: use and keep the parse beside the profile
    (:mod:`~registry_core.sandbox.profile_cache`); only the user's own
    configured profiles do (:func:`load_profile`), so reading any other file
    (the shipped default, a file given on a command line) writes nothing.
    """
    try:
        # Links are followed (profiles may live in a dotfiles checkout); a FIFO or
        # device never blocks: O_NONBLOCK and a regular-file check.
        raw = read_regular(path, limit=MAX_PROFILE_BYTES + 1, follow_symlinks=True)
    except FileNotFoundError as exc:
        raise ProfileError(str(path), "sandbox profile not found") from exc
    except FileTooLargeError:
        raw = b"\0" * (MAX_PROFILE_BYTES + 1)  # reported as too large below
    except OSError as exc:
        raise ProfileError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_PROFILE_BYTES:
        raise ProfileError(str(path), f"larger than {MAX_PROFILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(str(path), f"not UTF-8: {exc}") from exc
    name, source = name or path.stem, str(path)
    if not remember:
        return parse_profile_text(text, name=name, source=source)
    from registry_core.sandbox import profile_cache

    remembered = profile_cache.recall(path, text, name=name, source=source)
    if remembered is not None:
        return remembered  # the parse of exactly this text: no YAML parser needed
    profile = parse_profile_text(text, name=name, source=source)
    profile_cache.remember(path, text, profile)
    return profile


def shipped_default_profile() -> Path:
    """The default profile bundled in ``resources/sandbox``."""
    return resources_dir() / "sandbox" / "default.yaml"


def install_default_profile(env: Mapping[str, str]) -> Path:
    """Copy the shipped default profile into place unless one exists; return its path.

    The copy is written to a temporary file and hard-linked into place, so a
    concurrent installer or an existing (user-edited) file is never clobbered.
    """
    target = sandbox_profile_path(env, DEFAULT_PROFILE)
    if target.exists():
        return target
    shipped = shipped_default_profile()
    try:
        content = shipped.read_bytes()
    except OSError as exc:
        raise ProfileError(str(shipped), f"shipped default profile unreadable: {exc}") from exc
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temp.write_bytes(content)
        try:
            os.link(temp, target)
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    except OSError as exc:
        raise ProfileError(str(target), f"cannot install the default profile: {exc}") from exc
    return target


def load_profile(env: Mapping[str, str], name: str = DEFAULT_PROFILE) -> SandboxProfile:
    """Load ``<ollie config>/sandbox/<name>.yaml`` (:func:`~registry_core.paths.ollie_config_dir`).

    The default profile is installed from ``resources/`` on first use (where
    ollie-core would refuse: a deliberate difference, docs/ollie-core.md);
    any other missing profile is a :class:`ProfileError`.
    """
    if not _NAME_RE.fullmatch(name):
        raise ProfileError(name, "invalid profile name (allowed: A-Z a-z 0-9 _ . -)")
    path = sandbox_profile_path(env, name)
    if name == DEFAULT_PROFILE and not path.exists():
        install_default_profile(env)
        profile = load_profile_file(path, name=name, remember=True)
        note = (
            f"the default profile was missing and has been installed at {path} "
            "(ollie-core would refuse to run without it)"
        )
        return profile._replace(warnings=(*profile.warnings, note))
    return load_profile_file(path, name=name, remember=True)
