"""Data model of the registry: what a ``.meta`` declares and what the host made of it.

All classes are named tuples: immutable, and cheap to build (a registry of
ten thousand tools builds tens of thousands of them on every scan, and a
frozen dataclass costs about five times as much to construct).  ``args``
schemas are plain JSON data that callers must treat as read-only (copy before
changing).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from enum import StrEnum
from itertools import compress
from operator import is_not
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from registry_core.errors import MetaError, OllieError

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
        return tuple(compress(_FIELD_NAMES, map(is_not, self, _UNSET)))


# The .meta spelling of Fields' attributes, in declaration order.
_FIELD_NAMES = ("description", "prompt", "args", "tier", "readOnly", "cmd", "sudo", "elevated")
_UNSET = (None,) * len(_FIELD_NAMES)


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
    # Set when this MetaFile was rebuilt from the scan cache: prompt and args are read
    # from there on demand (its Fields hold placeholders for them).
    docs_source: DocsSource | None = None


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


# What a tool without ``args`` accepts (shared, read-only like every schema here).
DEFAULT_ARGS: JsonObject = {"type": "object", "properties": {}}
_NO_ARGS: JsonObject = MappingProxyType({})


class DocsSource(Protocol):
    """Where deferred :class:`ToolDocs` come from: the content of one ``.meta`` version."""

    def content(self) -> bytes:
        """That version's bytes; raises :class:`~registry_core.errors.OllieError` if gone."""
        ...


class ToolDocs:
    """A tool's prompt and argument schema: the bulk of its ``.meta``.

    Either given, or read and decoded on first use: a scan that finds an
    unchanged file in its cache knows everything else about it without
    reading it (see scan_cache.py).  The source checks that the file is still
    the version the scan saw, so the docs always belong to the snapshot's
    tool; if it is not (the file changed after the scan) reading them raises
    a :class:`~registry_core.errors.ToolChangedError` instead.
    """

    __slots__ = ("_args", "_prompt", "_source", "_variant")

    def __init__(
        self,
        prompt: str = "",
        args: JsonObject = _NO_ARGS,
        _source: DocsSource | None = None,
        _variant: int | None = None,
    ) -> None:
        self._prompt = prompt
        self._args = args
        self._source = _source
        self._variant = _variant

    @classmethod
    def deferred(cls, source: DocsSource, variant: int | None) -> ToolDocs:
        """The docs of a flawless ``.meta`` version, with ``variant`` chosen."""
        return cls("", _NO_ARGS, source, variant)

    @property
    def decoded(self) -> bool:
        return self._source is None

    def _decode(self, source: DocsSource, loads: Callable[[bytes], Any] = json.loads) -> None:
        body = source.content()
        try:
            doc = loads(body)
            chosen = doc["variants"][self._variant] if self._variant is not None else {}
            prompt = chosen["prompt"] if "prompt" in chosen else doc.get("prompt", "")
            args = chosen["args"] if "args" in chosen else doc.get("args")
        except (ValueError, LookupError, TypeError, AttributeError) as exc:
            # The source vouched for this content: only a corrupt cache gets here.
            raise OllieError(f"cannot decode the cached tool documentation: {exc}") from exc
        if not isinstance(prompt, str) or not (args is None or isinstance(args, dict)):
            raise OllieError("cannot decode the cached tool documentation: unexpected types")
        # Fields first, then the marker: another thread sees both or decodes again.
        self._prompt = prompt
        self._args = DEFAULT_ARGS if args is None else args
        self._source = None

    def _ensure_decoded(self) -> None:
        source = self._source
        if source is not None:
            self._decode(source)

    def decode_with(self, loads: Callable[[bytes], Any]) -> None:
        """Read deferred docs now, decoding the file with ``loads`` (a JSON parser that
        agrees with :func:`json.loads` on valid JSON: the file was validated when the
        scan cache learnt it); nothing happens when they are already read.  For bulk
        readers (``tools/list`` reads every schema) with a faster parser at hand."""
        source = self._source
        if source is not None:
            self._decode(source, loads)

    @property
    def prompt(self) -> str:
        self._ensure_decoded()
        return self._prompt

    @property
    def args(self) -> JsonObject:
        self._ensure_decoded()
        return self._args

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolDocs):
            return NotImplemented
        return self is other or (self.prompt, self.args) == (other.prompt, other.args)

    __hash__ = None  # type: ignore[assignment]  # holds a dict: unhashable like one

    def __repr__(self) -> str:
        if self._source is not None:
            return f"ToolDocs(<not read yet: {self._source!r}, variant {self._variant}>)"
        return f"ToolDocs(prompt={self._prompt!r}, args={self._args!r})"


NO_DOCS = ToolDocs()


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
    docs: ToolDocs = NO_DOCS
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
    def prompt(self) -> str:
        """The full documentation for the model (Markdown)."""
        return self.docs.prompt

    @property
    def args(self) -> JsonObject:
        """The JSON Schema of the arguments (read-only: copy before changing)."""
        return self.docs.args

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
