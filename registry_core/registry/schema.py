"""Check that a tool's ``args`` is itself a valid JSON Schema.

:func:`schema_error` is exact: jsonschema's ``check_schema`` decides. Before
it, :func:`fast_check` decides the keywords nearly every tool schema is made
of (each by the Draft 2020-12 meta-schema's rule for it) and answers ``None``
for anything else, which then goes to jsonschema.  It is kept for one
user-visible figure: ``ollie-tools call`` of a tool that has an ``args``
schema would otherwise import jsonschema on every call, measured at 1.7x the
call's whole-process time (so far past its 3x budget over ``python -I`` +
``bwrap``).  ``tests/unit/registry/test_schema.py`` holds it to jsonschema's
answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema.protocols

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_non_negative_integer(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0
    return isinstance(v, float) and v.is_integer() and v >= 0


def _check_type(v: Any) -> bool | None:
    if isinstance(v, str):
        return v in _SIMPLE_TYPES
    if isinstance(v, list):
        if not v or not all(isinstance(t, str) and t in _SIMPLE_TYPES for t in v):
            return False
        return len(set(v)) == len(v)
    return False


def _check_pattern(v: Any) -> bool | None:
    """``pattern`` must be a string that compiles (jsonschema's "regex" format check)."""
    if not isinstance(v, str):
        return False
    try:
        re.compile(v)
    except re.error:
        return None  # let jsonschema word the error
    return True


def _check_string_array(v: Any) -> bool | None:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        return False
    return len(set(v)) == len(v)


def _check_schema_map(v: Any) -> bool | None:
    if not isinstance(v, dict):
        return False
    result: bool | None = True
    for sub in v.values():
        r = fast_check(sub)
        if r is False:
            return False
        if r is None:
            result = None
    return result


_KEYWORDS: dict[str, Callable[[Any], bool | None]] = {
    "type": _check_type,
    "properties": _check_schema_map,
    "required": _check_string_array,
    "description": lambda v: isinstance(v, str),
    "title": lambda v: isinstance(v, str),
    "format": lambda v: isinstance(v, str),
    "pattern": _check_pattern,
    "$comment": lambda v: isinstance(v, str),
    "enum": lambda v: isinstance(v, list),
    "examples": lambda v: isinstance(v, list),
    "default": lambda v: True,
    "const": lambda v: True,
    "items": lambda v: fast_check(v),  # noqa: PLW0108 (defined below)
    "additionalProperties": lambda v: fast_check(v),  # noqa: PLW0108
    "minimum": _is_number,
    "maximum": _is_number,
    "exclusiveMinimum": _is_number,
    "exclusiveMaximum": _is_number,
    "minLength": _is_non_negative_integer,
    "maxLength": _is_non_negative_integer,
    "minItems": _is_non_negative_integer,
    "maxItems": _is_non_negative_integer,
    "minProperties": _is_non_negative_integer,
    "maxProperties": _is_non_negative_integer,
    "uniqueItems": lambda v: isinstance(v, bool),
    "readOnly": lambda v: isinstance(v, bool),
    "writeOnly": lambda v: isinstance(v, bool),
    "deprecated": lambda v: isinstance(v, bool),
}


def fast_check(schema: Any) -> bool | None:
    """``True``/``False`` when the common-keyword rules decide, ``None`` when unsure."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    result: bool | None = True
    for key, value in schema.items():
        rule = _KEYWORDS.get(key)
        if rule is None:
            return None
        r = rule(value)
        if r is False:
            return False
        if r is None:
            result = None
    return result


class _UnknownDialect:
    """Sentinel default for ``validator_for``: the ``$schema`` names no known draft."""


def _dialect_error(schema: Any) -> str | None:
    """A problem with the top-level ``$schema`` that ``validator_for`` cannot report.

    ``validator_for`` raises ``TypeError`` for an unhashable ``$schema`` and only
    warns (a ``DeprecationWarning``) for an unknown one, then validates against the
    latest draft; both would let a bad ``.meta`` escape as something else than a
    positioned error.
    """
    if not isinstance(schema, dict) or "$schema" not in schema:
        return None
    uri = schema["$schema"]
    if not isinstance(uri, str):
        return f"{uri!r} is not of type 'string'"
    import jsonschema.validators

    unknown: Any = _UnknownDialect
    if jsonschema.validators.validator_for(schema, default=unknown) is unknown:
        return f"unknown $schema {uri!r}"
    return None


def schema_error(schema: Any) -> tuple[str, list[str | int]] | None:
    """``None`` when ``schema`` is a valid JSON Schema, else (message, path inside it)."""
    if fast_check(schema) is True:
        return None
    dialect = _dialect_error(schema)
    if dialect is not None:
        return dialect, ["$schema"]
    import jsonschema.exceptions
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return exc.message, [p if isinstance(p, int) else str(p) for p in exc.path]
    return None


def validator_for(schema: Any) -> jsonschema.protocols.Validator:
    """A validator for call arguments against ``schema``."""
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)
