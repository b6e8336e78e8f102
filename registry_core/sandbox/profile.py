"""Sandbox profiles: the YAML files in ``$XDG_CONFIG_HOME/ollie/sandbox``.

The key set is the one of the public ollie-core runtime, so its profiles load
unchanged::

    filesystem: {ro: [...], rox: [...], rw: [...], rwx: [...]}
    network: {enabled: true, unrestricted: false, bind_tcp: [], connect_tcp: [443]}
    env: [PATH, LANG]
    general: {best_effort: false, log_level: info}
    advanced: {ldd: false, add_exec: []}

This module only reads and validates; a :class:`SandboxProfile` is the
profile *as written* (path templates unexpanded).  Unknown keys are collected
as warnings; wrong types or values raise :class:`ProfileError` naming the
file, the key and the value.  Template expansion lives in
:mod:`registry_core.sandbox.rules`.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from registry_core.errors import ProfileError
from registry_core.paths import resources_dir, sandbox_profile_path

MAX_PROFILE_BYTES = 1024 * 1024
DEFAULT_PROFILE = "default"
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# An env allowlist entry: a variable name, optionally ending in ``*`` (prefix).
_ENV_ENTRY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


class Access(enum.Enum):
    """Filesystem access classes of the ``filesystem`` section."""

    RO = "ro"  # read files, list directories
    ROX = "rox"  # ... and execute
    RW = "rw"  # read, write, create, remove, rename
    RWX = "rwx"  # ... and execute


class NetworkMode(enum.Enum):
    """What the ``network`` section amounts to."""

    DENY = "deny"  # enabled: false -> no TCP bind/connect at all
    RESTRICTED = "restricted"  # only the listed TCP ports
    UNRESTRICTED = "unrestricted"  # Landlock does not restrict the network


class LogLevel(enum.Enum):
    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"
    OFF = "off"


_LOG_LEVEL_ALIASES = {"warning": LogLevel.WARN, "none": LogLevel.OFF}


@dataclass(frozen=True)
class FilesystemSection:
    ro: tuple[str, ...] = ()
    rox: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    rwx: tuple[str, ...] = ()

    def entries(self) -> Iterator[tuple[str, Access]]:
        """Every ``(path template, access)`` in file order, section by section."""
        for access in Access:
            for path in getattr(self, access.value):
                yield path, access


@dataclass(frozen=True)
class NetworkSection:
    enabled: bool = True
    unrestricted: bool = False
    bind_tcp: tuple[int, ...] = ()
    connect_tcp: tuple[int, ...] = ()

    @property
    def mode(self) -> NetworkMode:
        if not self.enabled:
            return NetworkMode.DENY
        if self.unrestricted:
            return NetworkMode.UNRESTRICTED
        return NetworkMode.RESTRICTED


@dataclass(frozen=True)
class GeneralSection:
    best_effort: bool = False
    log_level: LogLevel = LogLevel.INFO


@dataclass(frozen=True)
class AdvancedSection:
    ldd: bool = False
    add_exec: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxProfile:
    """A profile as written in its file; ``source`` is that file's path."""

    name: str
    source: str
    filesystem: FilesystemSection = FilesystemSection()
    network: NetworkSection = NetworkSection()
    env: tuple[str, ...] = ()
    general: GeneralSection = GeneralSection()
    advanced: AdvancedSection = AdvancedSection()
    warnings: tuple[str, ...] = ()


class _Parser:
    """Validates the parsed YAML of one file, collecting warnings."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.warnings: list[str] = []

    def fail(self, key: str, message: str, value: object) -> ProfileError:
        return ProfileError(self.source, f"{key}: {message}, got {value!r}")

    def section(self, key: str, value: object, known: tuple[str, ...]) -> Mapping[str, object]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(key, "expected a mapping", value)
        for sub in value:
            if sub not in known:
                self.warnings.append(f"unknown key '{key}.{sub}' (ignored)")
        return value

    def boolean(self, key: str, value: object, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, "expected true or false", value)
        return value

    def strings(self, key: str, value: object) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, list):
            raise self.fail(key, "expected a list of strings", value)
        for item in value:
            if not isinstance(item, str) or not item:
                raise self.fail(key, "expected a non-empty string", item)
        return tuple(value)

    def ports(self, key: str, value: object) -> tuple[int, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(key, "expected a list of TCP ports", value)
        ports: list[int] = []
        for item in value:
            port = _port(item)
            if port is None:
                raise self.fail(key, "expected a TCP port number 1..65535", item)
            if port not in ports:
                ports.append(port)
        return tuple(ports)

    def log_level(self, key: str, value: object) -> LogLevel:
        if value is None:
            return LogLevel.INFO
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _LOG_LEVEL_ALIASES:
                return _LOG_LEVEL_ALIASES[word]
            for level in LogLevel:
                if level.value == word:
                    return level
        choices = ", ".join(level.value for level in LogLevel)
        raise self.fail(key, f"expected one of {choices}", value)


def _port(item: object) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        number = item
    elif isinstance(item, str) and item.strip().isdigit():
        number = int(item.strip())
    else:
        return None
    return number if 1 <= number <= 65535 else None


def parse_profile(data: object, *, name: str, source: str) -> SandboxProfile:
    """Validate YAML-parsed ``data`` into a :class:`SandboxProfile`."""
    parser = _Parser(source)
    top = parser.section("profile", data, ("filesystem", "network", "env", "general", "advanced"))
    fs = parser.section("filesystem", top.get("filesystem"), tuple(a.value for a in Access))
    filesystem = FilesystemSection(
        **{a.value: parser.strings(f"filesystem.{a.value}", fs.get(a.value)) for a in Access}
    )
    net = parser.section(
        "network", top.get("network"), ("enabled", "unrestricted", "bind_tcp", "connect_tcp")
    )
    network = NetworkSection(
        enabled=parser.boolean("network.enabled", net.get("enabled"), True),
        unrestricted=parser.boolean("network.unrestricted", net.get("unrestricted"), False),
        bind_tcp=parser.ports("network.bind_tcp", net.get("bind_tcp")),
        connect_tcp=parser.ports("network.connect_tcp", net.get("connect_tcp")),
    )
    if network.mode is not NetworkMode.RESTRICTED and (network.bind_tcp or network.connect_tcp):
        parser.warnings.append(
            f"network: bind_tcp/connect_tcp are ignored when the network is {network.mode.value}"
        )
    env = parser.strings("env", top.get("env"))
    for entry in env:
        if not _ENV_ENTRY_RE.fullmatch(entry):
            raise parser.fail("env", "expected an environment variable name (or PREFIX*)", entry)
    gen = parser.section("general", top.get("general"), ("best_effort", "log_level"))
    general = GeneralSection(
        best_effort=parser.boolean("general.best_effort", gen.get("best_effort"), False),
        log_level=parser.log_level("general.log_level", gen.get("log_level")),
    )
    adv = parser.section("advanced", top.get("advanced"), ("ldd", "add_exec"))
    advanced = AdvancedSection(
        ldd=parser.boolean("advanced.ldd", adv.get("ldd"), False),
        add_exec=parser.strings("advanced.add_exec", adv.get("add_exec")),
    )
    return SandboxProfile(
        name=name,
        source=source,
        filesystem=filesystem,
        network=network,
        env=env,
        general=general,
        advanced=advanced,
        warnings=tuple(parser.warnings),
    )


def parse_profile_text(text: str, *, name: str, source: str) -> SandboxProfile:
    """Parse YAML ``text``; syntax errors name the line and column."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(source, f"invalid YAML: {where}{problem}") from exc
    return parse_profile(data, name=name, source=source)


def load_profile_file(path: Path, *, name: str | None = None) -> SandboxProfile:
    """Read and validate the profile at ``path`` (at most 1 MiB)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PROFILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise ProfileError(str(path), "sandbox profile not found") from exc
    except OSError as exc:
        raise ProfileError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_PROFILE_BYTES:
        raise ProfileError(str(path), f"larger than {MAX_PROFILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(str(path), f"not UTF-8: {exc}") from exc
    return parse_profile_text(text, name=name or path.stem, source=str(path))


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
    """Load ``$XDG_CONFIG_HOME/ollie/sandbox/<name>.yaml``.

    The default profile is installed from ``resources/`` on first use; any
    other missing profile is a :class:`ProfileError`.
    """
    if not _NAME_RE.fullmatch(name):
        raise ProfileError(name, "invalid profile name (allowed: A-Z a-z 0-9 _ . -)")
    path = sandbox_profile_path(env, name)
    if name == DEFAULT_PROFILE and not path.exists():
        install_default_profile(env)
    return load_profile_file(path, name=name)
