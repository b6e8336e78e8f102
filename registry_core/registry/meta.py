"""Parse and validate one ``.meta`` file (the spec's sidecar format).

:func:`parse_meta` never raises for bad content: it returns a
:class:`ParsedMeta` whose ``errors`` name the file, the field and, where the
problem has a position, the line and column.  Unknown keys are warnings.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from registry_core.errors import MetaError
from registry_core.registry.jsonpos import format_path, line_col, locate
from registry_core.registry.model import (
    Condition,
    DocsSource,
    Fields,
    MatchKey,
    MetaFile,
    MetaWarning,
    Tier,
    VariantDef,
)
from registry_core.registry.schema import fast_check, schema_error

MAX_META_BYTES = 1024 * 1024
MAX_META_DEPTH = 64
"""Deepest nesting of JSON arrays and objects accepted in a ``.meta`` (a JSON Schema
in ``args`` rarely needs 10; 5,000 levels exhausted Python's recursion limit)."""

# A JSON string (escapes included) or one bracket: what decides nesting depth.
_DEPTH_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def nesting_error(text: str, limit: int = MAX_META_DEPTH) -> tuple[int, int] | None:
    """The 1-based (line, column) where ``text`` nests arrays/objects deeper than ``limit``.

    ``None`` when it does not.  Counting brackets first (in C) spares almost every
    file the token scan.
    """
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = 0
    for match in _DEPTH_TOKEN.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return line_col(text, match.start())
        elif char in "]}":
            depth -= 1
    return None


TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")

_FIELD_KEYS = ("description", "prompt", "args", "tier", "readOnly", "cmd", "sudo", "elevated")
TOP_LEVEL_KEYS = frozenset((*_FIELD_KEYS, "variants"))
VARIANT_KEYS = frozenset((*_FIELD_KEYS, "match"))
_MATCH_KEYS = {k.value: k for k in MatchKey}
_TIERS = {t.value: t for t in Tier}

Path_ = list[str | int]


class ParsedMeta(NamedTuple):
    meta: MetaFile | None
    errors: tuple[MetaError, ...]
    warnings: tuple[MetaWarning, ...]
    # Accepted by the fast path: flawless, every ``args`` proven by schema.fast_check's
    # own rules (what a verdicts file may remember; see verdicts.py).
    fast: bool = False


def tool_name_error(name: str) -> str | None:
    if not name:
        return "empty tool name"
    if name.startswith("."):
        return f"tool name {name!r} must not start with '.'"
    if not TOOL_NAME_RE.fullmatch(name):
        return f"tool name {name!r} may only contain letters, digits, '_', '.' and '-'"
    return None


class _Checker:
    """Collects errors with positions while walking one decoded document."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.errors: list[MetaError] = []
        self.warnings: list[MetaWarning] = []

    def error(self, where: Path_, message: str) -> None:
        pos = locate(self.text, where) if where else None
        prefix = f"{format_path(where)}: " if where else ""
        line, column = pos if pos else (None, None)
        self.errors.append(MetaError(self.path, prefix + message, line, column))

    def warn(self, where: Path_, message: str) -> None:
        pos = locate(self.text, where)
        line, column = pos if pos else (None, None)
        text = f"{format_path(where)}: {message}"
        self.warnings.append(MetaWarning(self.path, text, line, column))

    def fields(self, obj: dict[str, Any], where: Path_) -> Fields:
        def string(key: str) -> str | None:
            if key not in obj:
                return None
            value = obj[key]
            if isinstance(value, str):
                return value
            self.error([*where, key], f"must be a string, not {_json_type(value)}")
            return None

        def boolean(key: str) -> bool | None:
            if key not in obj:
                return None
            value = obj[key]
            if isinstance(value, bool):
                return value
            self.error([*where, key], f"must be true or false, not {json.dumps(value)}")
            return None

        tier: Tier | None = None
        if "tier" in obj:
            raw = obj["tier"]
            tier = _TIERS.get(raw) if isinstance(raw, str) else None
            if tier is None:
                self.error(
                    [*where, "tier"], f"unknown tier {json.dumps(raw)} (use hot, warm or cold)"
                )
        cmd = string("cmd")
        if cmd is not None and (not cmd.strip() or "\0" in cmd):
            self.error([*where, "cmd"], f"invalid command {cmd!r}")
            cmd = None
        return Fields(
            description=string("description"),
            prompt=string("prompt"),
            args=self.args(obj, where),
            tier=tier,
            read_only=boolean("readOnly"),
            cmd=cmd,
            sudo=boolean("sudo"),
            elevated=boolean("elevated"),
        )

    def args(self, obj: dict[str, Any], where: Path_) -> dict[str, Any] | None:
        if "args" not in obj:
            return None
        value = obj["args"]
        if not isinstance(value, dict):
            self.error([*where, "args"], f"must be a JSON Schema object, not {_json_type(value)}")
            return None
        problem = schema_error(value)
        if problem is not None:
            message, inner = problem
            self.error([*where, "args", *inner], f"not a valid JSON Schema: {message}")
            return None
        if value.get("type", "object") != "object":
            self.warn([*where, "args", "type"], "tool arguments should be a JSON object schema")
        return value

    def conditions(self, variant: dict[str, Any], where: Path_) -> tuple[Condition, ...]:
        if "match" not in variant:
            self.warn(where, "variant without 'match' always matches")
            return ()
        match = variant["match"]
        if not isinstance(match, dict):
            self.error([*where, "match"], f"must be an object, not {_json_type(match)}")
            return ()
        out: list[Condition] = []
        for key, value in match.items():
            match_key = _MATCH_KEYS.get(key)
            if match_key is None:
                known = ", ".join(_MATCH_KEYS)
                self.error([*where, "match", key], f"unknown match key {key!r} (known: {known})")
            elif not isinstance(value, str) or not value:
                self.error(
                    [*where, "match", key],
                    f"must be a non-empty string, not {json.dumps(value)}",
                )
            else:
                out.append(Condition(match_key, value))
        return tuple(out)

    def unknown_keys(self, obj: dict[str, Any], known: frozenset[str], where: Path_) -> None:
        for key in obj:
            if key not in known:
                self.warn([*where, key], f"unknown key {key!r} (ignored)")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_meta(file: Path | str, data: bytes, name: str | None = None) -> ParsedMeta:
    """Validate ``data`` (the content of ``file``) as a ``.meta`` document."""
    path = os.fspath(file)
    tool = name if name is not None else os.path.basename(path).removesuffix(".meta")
    name_problem = tool_name_error(tool)
    if name_problem:
        return ParsedMeta(None, (MetaError(path, name_problem),), ())
    if len(data) > MAX_META_BYTES:
        too_big = MetaError(path, f"file is {len(data)} bytes, over the 1 MiB limit")
        return ParsedMeta(None, (too_big,), ())
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", "replace")
        line, col = line_col(before, len(before))
        return ParsedMeta(None, (MetaError(path, "not valid UTF-8", line, col),), ())
    too_deep = nesting_error(text)
    if too_deep is not None:
        message = f"JSON nested more than {MAX_META_DEPTH} levels deep"
        return ParsedMeta(None, (MetaError(path, message, *too_deep),), ())
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        err = MetaError(path, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)
        return ParsedMeta(None, (err,), ())
    except RecursionError:  # a deeper stack than the limit assumes: still one broken file
        message = f"JSON nested more than {MAX_META_DEPTH} levels deep"
        return ParsedMeta(None, (MetaError(path, message),), ())
    return check_document(path, tool, text, doc)


# --- the fast path -------------------------------------------------------------------
#
# Almost every .meta is well formed.  These functions accept a document only when
# the full check would report neither an error nor a warning, and then build
# exactly what it builds; anything else returns None and _Checker decides (with
# positions).  They exist because a registry of thousands of tools must load in
# about the time it takes to read and decode the files (bench/registry_load.py).

_MISSING: Any = object()


def _quick_fields(obj: dict[str, Any]) -> Fields | None:
    get = obj.get
    description = get("description", _MISSING)
    if description is _MISSING:
        description = None
    elif not isinstance(description, str):
        return None
    prompt = get("prompt", _MISSING)
    if prompt is _MISSING:
        prompt = None
    elif not isinstance(prompt, str):
        return None
    args = get("args", _MISSING)
    if args is _MISSING:
        args = None
    elif (
        not isinstance(args, dict)
        or args.get("type", "object") != "object"
        or fast_check(args) is not True
    ):
        return None
    tier = get("tier", _MISSING)
    if tier is _MISSING:
        tier = None
    else:
        tier = _TIERS.get(tier) if isinstance(tier, str) else None
        if tier is None:
            return None
    cmd = get("cmd", _MISSING)
    if cmd is _MISSING:
        cmd = None
    elif not isinstance(cmd, str) or not cmd.strip() or "\0" in cmd:
        return None
    read_only = get("readOnly", _MISSING)
    if read_only is _MISSING:
        read_only = None
    elif not isinstance(read_only, bool):
        return None
    sudo = get("sudo", _MISSING)
    if sudo is _MISSING:
        sudo = None
    elif not isinstance(sudo, bool):
        return None
    elevated = get("elevated", _MISSING)
    if elevated is _MISSING:
        elevated = None
    elif not isinstance(elevated, bool):
        return None
    return Fields(description, prompt, args, tier, read_only, cmd, sudo, elevated)


def _quick_variants(raw: Any) -> tuple[VariantDef, ...] | None:
    if not isinstance(raw, list) or not raw:
        return None
    out: list[VariantDef] = []
    for index, variant in enumerate(raw):
        if not isinstance(variant, dict) or not VARIANT_KEYS.issuperset(variant):
            return None
        match = variant.get("match")
        if not isinstance(match, dict):
            return None
        conditions: list[Condition] = []
        for key, value in match.items():
            match_key = _MATCH_KEYS.get(key)
            if match_key is None or not isinstance(value, str) or not value:
                return None
            conditions.append(Condition(match_key, value))
        fields = _quick_fields(variant)
        if fields is None:
            return None
        out.append(VariantDef(index, tuple(conditions), fields))
    return tuple(out)


def _quick_meta(path: str, tool: str, doc: dict[str, Any]) -> MetaFile | None:
    """The :class:`MetaFile` of a flawless document, else None."""
    if not TOP_LEVEL_KEYS.issuperset(doc):
        return None
    top = _quick_fields(doc)
    if top is None:
        return None
    variants: tuple[VariantDef, ...] | None = None
    if "variants" in doc:
        variants = _quick_variants(doc["variants"])
        if variants is None:
            return None
    return MetaFile(path, tool, top, variants, ())


def check_document(path: str, tool: str, text: str, doc: Any) -> ParsedMeta:
    if isinstance(doc, dict):
        quick = _quick_meta(path, tool, doc)
        if quick is not None:
            return ParsedMeta(quick, (), (), fast=True)
    checker = _Checker(path, text)
    if not isinstance(doc, dict):
        checker.error([], f"the top level must be a JSON object, not {_json_type(doc)}")
        return ParsedMeta(None, tuple(checker.errors), ())
    checker.unknown_keys(doc, TOP_LEVEL_KEYS, [])
    top = checker.fields(doc, [])
    variants: tuple[VariantDef, ...] | None = None
    if "variants" in doc:
        raw = doc["variants"]
        if not isinstance(raw, list):
            checker.error(["variants"], f"must be an array, not {_json_type(raw)}")
        else:
            if not raw:
                checker.warn(["variants"], "empty 'variants': the tool is hidden on every host")
            out: list[VariantDef] = []
            for index, variant in enumerate(raw):
                where: Path_ = ["variants", index]
                if not isinstance(variant, dict):
                    checker.error(where, f"a variant must be an object, not {_json_type(variant)}")
                    continue
                checker.unknown_keys(variant, VARIANT_KEYS, where)
                conditions = checker.conditions(variant, where)
                out.append(VariantDef(index, conditions, checker.fields(variant, where)))
            variants = tuple(out)
    if checker.errors:
        return ParsedMeta(None, tuple(checker.errors), tuple(checker.warnings))
    meta = MetaFile(path, tool, top, variants, tuple(checker.warnings))
    return ParsedMeta(meta, (), tuple(checker.warnings))


# --- skeletons: what the scan cache keeps of a flawless .meta ------------------------
#
# Everything but the prompt and the args schema (the bulk of the file), as compact
# JSON rows: [top, variants] where a fields row is [description, prompt set?, args
# set?, tier, readOnly, cmd, sudo, elevated] and a variant is [[key, value, ...],
# fields row].  Rebuilding checks every type again (a cache file is data, not code)
# but takes the schema proof, made when the file was first read, as given; prompt
# and args are read from the file when somebody asks (model.ToolDocs).

_PLACEHOLDER_ARGS: dict[str, Any] = {}
_OPTIONAL_STR = frozenset((str, type(None)))
_OPTIONAL_BOOL = frozenset((bool, type(None)))


def _fields_row(fields: Fields) -> list[Any]:
    description, prompt, args, tier, read_only, cmd, sudo, elevated = fields
    tier_name = None if tier is None else tier.value
    return [
        description,
        prompt is not None,
        args is not None,
        tier_name,
        read_only,
        cmd,
        sudo,
        elevated,
    ]


def skeleton_of(meta: MetaFile) -> list[Any]:
    """The skeleton of a flawless ``.meta`` (JSON data)."""
    variants = None
    if meta.variants is not None:
        variants = [
            [[part for c in v.conditions for part in (c.key.value, c.value)], _fields_row(v.fields)]
            for v in meta.variants
        ]
    return [_fields_row(meta.top), variants]


def _fields_from(row: Any) -> Fields:
    """The Fields of a skeleton row; TypeError/ValueError/KeyError when it is not one."""
    description, prompt, args, tier, read_only, cmd, sudo, elevated = row
    if (
        type(description) not in _OPTIONAL_STR
        or type(prompt) is not bool
        or type(args) is not bool
        or type(read_only) not in _OPTIONAL_BOOL
        or type(sudo) not in _OPTIONAL_BOOL
        or type(elevated) not in _OPTIONAL_BOOL
        or (cmd is not None and (type(cmd) is not str or not cmd.strip() or "\0" in cmd))
    ):
        raise TypeError("not a skeleton row")
    return Fields(
        description,
        "" if prompt else None,
        _PLACEHOLDER_ARGS if args else None,
        None if tier is None else _TIERS[tier],
        read_only,
        cmd,
        sudo,
        elevated,
    )


def meta_from_skeleton(path: str, tool: str, skeleton: Any, docs: DocsSource) -> MetaFile | None:
    """The :class:`MetaFile` a skeleton describes, its prompt and args to read from ``docs``.

    ``None`` when the skeleton does not pass the checks (then read the file).
    """
    if tool_name_error(tool) is not None:
        return None
    try:
        top_row, variant_rows = skeleton
        top = _fields_from(top_row)
        variants: tuple[VariantDef, ...] | None = None
        if variant_rows is not None:
            out: list[VariantDef] = []
            for index, (flat, row) in enumerate(variant_rows):
                conditions: list[Condition] = []
                for at in range(0, len(flat), 2):
                    value = flat[at + 1]
                    if type(value) is not str or not value:
                        return None
                    conditions.append(Condition(_MATCH_KEYS[flat[at]], value))
                out.append(VariantDef(index, tuple(conditions), _fields_from(row)))
            if not out:
                return None
            variants = tuple(out)
    except (TypeError, ValueError, KeyError, IndexError):
        return None
    return MetaFile(path, tool, top, variants, (), docs)


# --- what the scan cache keeps of a broken .meta --------------------------------------


def problems_of(parsed: ParsedMeta) -> dict[str, Any]:
    """The errors and warnings of a broken ``.meta`` version, as JSON data."""
    return {
        "errors": [[e.message, e.line, e.column] for e in parsed.errors],
        "warnings": [[w.message, w.line, w.column] for w in parsed.warnings],
    }


def _positioned(row: Any) -> tuple[str, int | None, int | None]:
    message, line, column = row
    if (
        type(message) is not str
        or (line is not None and type(line) is not int)
        or (column is not None and type(column) is not int)
    ):
        raise TypeError("not a problem row")
    return message, line, column


def parsed_from_problems(path: str, problems: Any) -> ParsedMeta | None:
    """The broken :class:`ParsedMeta` :func:`problems_of` describes; None if malformed."""
    try:
        errors = tuple([MetaError(path, *_positioned(r)) for r in problems["errors"]])
        warnings = tuple([MetaWarning(path, *_positioned(r)) for r in problems["warnings"]])
    except (TypeError, ValueError, KeyError):
        return None
    return ParsedMeta(None, errors, warnings) if errors else None
