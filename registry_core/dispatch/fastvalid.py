"""Decide "these arguments are certainly valid" without importing jsonschema.

:func:`certainly_valid` answers ``True`` only when every keyword of the schema
is one it implements exactly (Draft 2020-12 semantics) and the arguments
satisfy them; any other keyword, any doubt and every invalid call go to
jsonschema, which also words the error.  It is kept for one user-visible
figure: without it every ``ollie-tools call`` imports jsonschema, measured at
1.7x the call's whole-process time (its budget is 3x ``python -I`` +
``bwrap``, and the call is at about 3x already).  ``test_fastvalid.py`` and
``test_fastvalid_exact.py`` hold it to jsonschema's answers.
"""

from __future__ import annotations

import math
from typing import Any

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})


class _Unsure(Exception):
    """The fast path cannot decide: use jsonschema."""


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float)
    raise _Unsure


def _number(value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Unsure
    return value


def _check(schema: Any, value: Any) -> bool:
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, dict):
        raise _Unsure
    for key, rule in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key == "type":
            names = rule if isinstance(rule, list) else [rule]
            if not all(isinstance(n, str) for n in names):
                raise _Unsure
            if not any(_is_type(value, n) for n in names):
                return False
        elif key == "enum":
            if not isinstance(rule, list) or not all(isinstance(v, str) or v is None for v in rule):
                raise _Unsure  # number/bool equality has JSON subtleties: let jsonschema decide
            if not (isinstance(value, str) or value is None) or value not in rule:
                return False
        elif key == "properties":
            if not isinstance(rule, dict):
                raise _Unsure
            if isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value and not _check(sub, value[name]):
                        return False
        elif key == "required":
            if not isinstance(rule, list):
                raise _Unsure
            if isinstance(value, dict) and any(name not in value for name in rule):
                return False
        elif key == "additionalProperties":
            if isinstance(value, dict):
                known = schema.get("properties", {})
                if "patternProperties" in schema or not isinstance(known, dict):
                    raise _Unsure
                extra = [k for k in value if k not in known]
                if not all(_check(rule, value[k]) for k in extra):
                    return False
        elif key == "items":
            if isinstance(value, list) and not all(_check(rule, item) for item in value):
                return False
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = _number(rule)
            if isinstance(value, int | float) and not isinstance(value, bool):
                ok = {
                    "minimum": value >= bound,
                    "maximum": value <= bound,
                    "exclusiveMinimum": value > bound,
                    "exclusiveMaximum": value < bound,
                }[key]
                if not ok:
                    return False
        elif key in ("minLength", "maxLength", "minItems", "maxItems"):
            limit = _number(rule)
            kind = str if key.endswith("Length") else list
            if isinstance(value, kind):
                size = len(value)
                if (key.startswith("min") and size < limit) or (
                    key.startswith("max") and size > limit
                ):
                    return False
        else:
            raise _Unsure
    return True


def certainly_valid(schema: Any, instance: Any) -> bool:
    """True only when ``instance`` is valid under ``schema`` for sure."""
    try:
        return _check(schema, instance)
    except (_Unsure, RecursionError):
        return False
