"""Data model of the registry: what a ``.meta`` declares and what the host made of it.

All classes are named tuples: immutable, and cheap to build (a registry of
ten thousand tools builds tens of thousands of them on every scan, and a
frozen dataclass costs about five times as much to construct).  ``args``
schemas are plain JSON data that callers must treat as read-only (copy before
changing).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from registry_core.errors import MetaError

JsonObject = Mapping[str, Any]


class Tier(StrEnum):
    """Context retention tier of a tool (spec: hot, warm, cold)."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


class Status(StrEnum):
    AVAILABLE = "available"
    HIDDEN = "hidden"
    BROKEN = "broken"


class Resolution(StrEnum):
    """Which step of the spec's executable resolution found the executable."""

    TOOLS_DIR = "tools_dir"
    CMD = "cmd"
    PATH = "path"


class MatchKey(StrEnum):
    BINARY = "binary"
    FILE = "file"
    OS = "os"
    ARCH = "arch"
    ENV = "env"
    NENV = "nenv"


class Fields(NamedTuple):
    """The overridable fields of a ``.meta`` (top level or one variant); ``None`` = unset."""

    description: str | None = None
    prompt: str | None = None
    args: JsonObject | None = None
    tier: Tier | None = None
    read_only: bool | None = None
    cmd: str | None = None
    sudo: bool | None = None
    elevated: bool | None = None

    def merged_over(self, base: Fields) -> Fields:
        """These fields where set, ``base`` elsewhere (the spec's variant merging)."""
        return Fields._make([a if a is not None else b for a, b in zip(self, base, strict=True)])

    def set_names(self) -> tuple[str, ...]:
        """The ``.meta`` spelling of every field that is set (for the browser)."""
        return tuple([k for k, v in zip(_FIELD_NAMES, self, strict=True) if v is not None])


# The .meta spelling of Fields' attributes, in declaration order.
_FIELD_NAMES = ("description", "prompt", "args", "tier", "readOnly", "cmd", "sudo", "elevated")


class MetaWarning(NamedTuple):
    """A non-fatal problem in a ``.meta`` (unknown key, no executable, ...)."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def location(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}:{self.column or 1}"
        return self.path

    def __str__(self) -> str:
        return f"{self.location()}: {self.message}"


class Condition(NamedTuple):
    key: MatchKey
    value: str


class VariantDef(NamedTuple):
    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose
    conditions: tuple[Condition, ...]
    fields: Fields


class MetaFile(NamedTuple):
    """One parsed ``.meta`` file: its declarations, not yet evaluated on a host."""

    path: str
    name: str
    top: Fields
    variants: tuple[VariantDef, ...] | None
    warnings: tuple[MetaWarning, ...] = ()


class ConditionResult(NamedTuple):
    key: str
    value: str
    passed: bool
    detail: str


class VariantResult(NamedTuple):
    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose
    matched: bool
    conditions: tuple[ConditionResult, ...]
    fields: tuple[str, ...] = ()


class Tool(NamedTuple):
    """Everything the registry knows about one tool name on one host.

    File names are stored as strings and offered as :class:`~pathlib.Path` by
    properties (``source``, ``executable``, ``shadowed``, ``directory``): a
    scan builds ten thousand tools, a ``Path`` costs more to build than the rest
    of a tool, and most are never asked for.
    """

    name: str
    source_file: str
    status: Status
    description: str = ""
    prompt: str = ""
    args: JsonObject = MappingProxyType({})
    tier: Tier = Tier.HOT
    read_only: bool = False
    cmd: str | None = None
    sudo: bool = False
    elevated: bool = False
    variant: int | None = None
    variants: tuple[VariantResult, ...] = ()
    executable_file: str | None = None
    resolution: Resolution | None = None
    resolution_detail: str = ""
    errors: tuple[MetaError, ...] = ()
    warnings: tuple[MetaWarning, ...] = ()
    shadowed_files: tuple[str, ...] = ()

    @property
    def source(self) -> Path:
        """The ``.meta`` file this tool comes from."""
        return Path(self.source_file)

    @property
    def executable(self) -> Path | None:
        return None if self.executable_file is None else Path(self.executable_file)

    @property
    def shadowed(self) -> tuple[Path, ...]:
        """``.meta`` files of the same name later on the search path (not used)."""
        return tuple([Path(p) for p in self.shadowed_files])

    @property
    def directory(self) -> Path:
        return Path(os.path.dirname(self.source_file))

    @property
    def available(self) -> bool:
        return self.status is Status.AVAILABLE

    @property
    def needs_elevation(self) -> bool:
        """``sudo`` implies elevation (spec)."""
        return self.elevated or self.sudo

    @property
    def problem(self) -> str:
        """Why the tool cannot be used, in words ("" when available)."""
        if self.status is Status.BROKEN:
            return "; ".join(str(e) for e in self.errors) or "broken"
        if self.status is Status.HIDDEN:
            if not self.variants:
                return "no variant"
            failed = [
                f"variant {v.index}: "
                + ", ".join(f"{c.key} {c.value} → {c.detail}" for c in v.conditions if not c.passed)
                for v in self.variants
            ]
            return "no variant matches this host (" + "; ".join(failed) + ")"
        return ""
