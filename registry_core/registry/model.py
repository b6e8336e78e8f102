"""Data model of the registry: what a ``.meta`` declares and what the host made of it.

All classes are frozen; ``args`` schemas are plain JSON data that callers must
treat as read-only (copy before changing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Fields:
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
        return Fields(
            description=self.description if self.description is not None else base.description,
            prompt=self.prompt if self.prompt is not None else base.prompt,
            args=self.args if self.args is not None else base.args,
            tier=self.tier if self.tier is not None else base.tier,
            read_only=self.read_only if self.read_only is not None else base.read_only,
            cmd=self.cmd if self.cmd is not None else base.cmd,
            sudo=self.sudo if self.sudo is not None else base.sudo,
            elevated=self.elevated if self.elevated is not None else base.elevated,
        )

    def set_names(self) -> tuple[str, ...]:
        """The ``.meta`` spelling of every field that is set (for the browser)."""
        values = (
            self.description,
            self.prompt,
            self.args,
            self.tier,
            self.read_only,
            self.cmd,
            self.sudo,
            self.elevated,
        )
        return tuple([k for k, v in zip(_FIELD_NAMES, values, strict=True) if v is not None])


# The .meta spelling of Fields' attributes, in declaration order.
_FIELD_NAMES = ("description", "prompt", "args", "tier", "readOnly", "cmd", "sudo", "elevated")


@dataclass(frozen=True, slots=True)
class MetaWarning:
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


@dataclass(frozen=True, slots=True)
class Condition:
    key: MatchKey
    value: str


@dataclass(frozen=True, slots=True)
class VariantDef:
    index: int
    conditions: tuple[Condition, ...]
    fields: Fields


@dataclass(frozen=True, slots=True)
class MetaFile:
    """One parsed ``.meta`` file: its declarations, not yet evaluated on a host."""

    path: Path
    name: str
    top: Fields
    variants: tuple[VariantDef, ...] | None
    warnings: tuple[MetaWarning, ...] = ()


@dataclass(frozen=True, slots=True)
class ConditionResult:
    key: str
    value: str
    passed: bool
    detail: str


@dataclass(frozen=True, slots=True)
class VariantResult:
    index: int
    matched: bool
    conditions: tuple[ConditionResult, ...]
    fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Tool:
    """Everything the registry knows about one tool name on one host."""

    name: str
    source: Path
    status: Status
    description: str = ""
    prompt: str = ""
    args: JsonObject = field(default_factory=dict)
    tier: Tier = Tier.HOT
    read_only: bool = False
    cmd: str | None = None
    sudo: bool = False
    elevated: bool = False
    variant: int | None = None
    variants: tuple[VariantResult, ...] = ()
    executable: Path | None = None
    resolution: Resolution | None = None
    resolution_detail: str = ""
    errors: tuple[MetaError, ...] = ()
    warnings: tuple[MetaWarning, ...] = ()
    shadowed: tuple[Path, ...] = ()

    @property
    def directory(self) -> Path:
        return self.source.parent

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
