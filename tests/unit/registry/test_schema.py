"""Checking that ``args`` is a JSON Schema (registry_core.registry.schema)."""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.registry import schema as schema_mod
from registry_core.registry.schema import fast_check, schema_error, validator_for

TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]


def reference_valid(schema: Any) -> bool:
    """What jsonschema itself says (the oracle the fast path must agree with)."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


# --- the fast path on hand-picked schemas --------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        True,
        False,
        {},
        {"type": "object", "properties": {}},
        {"type": ["string", "null"]},
        {
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "File path", "minLength": 1},
                "n": {"type": "integer", "minimum": 0, "maximum": 10.5, "default": 3},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "mode": {"enum": ["a", "b"], "title": "Mode", "examples": ["a"]},
            },
            "additionalProperties": False,
        },
        {"minLength": 2.0},
    ],
)
def test_fast_path_accepts_common_schemas(schema: Any) -> None:
    assert fast_check(schema) is True
    assert reference_valid(schema)
    assert schema_error(schema) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": []},
        {"type": ["string", "string"]},
        {"type": 5},
        {"required": ["a", "a"]},
        {"required": "a"},
        {"minimum": True},
        {"minimum": "0"},
        {"minLength": -1},
        {"minLength": 1.5},
        {"maxItems": False},
        {"uniqueItems": 1},
        {"properties": []},
        {"properties": {"a": 5}},
        {"items": [{}]},
        {"enum": "a"},
        {"description": 3},
        {"additionalProperties": "no"},
        [],
        "object",
    ],
)
def test_fast_path_rejects_what_the_meta_schema_rejects(schema: Any) -> None:
    assert fast_check(schema) is False
    assert not reference_valid(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"multipleOf": 2},
        {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}},
        {"$ref": "#/$defs/x", "$defs": {"x": {}}},
        {"items": {"format": "email", "not": {}}},
    ],
)
def test_fast_path_defers_unknown_keywords(schema: Any) -> None:
    assert fast_check(schema) is None


def test_fast_path_covers_exactly_the_keywords_it_declares() -> None:
    for keyword in schema_mod._KEYWORDS:
        assert fast_check({keyword: None}) is not None, keyword
    assert fast_check({"multipleOf": 2}) is None
    assert fast_check({"pattern": "^[a-z]+$"}) is True
    assert fast_check({"pattern": "("}) is None  # jsonschema words the error


# --- schema_error -------------------------------------------------------------------------


def test_schema_error_names_the_path_inside_the_schema() -> None:
    problem = schema_error({"type": "object", "properties": {"a": {"type": "strin"}}})
    assert problem is not None
    message, path = problem
    assert "'strin'" in message
    assert path == ["properties", "a", "type"]


def test_schema_error_uses_the_real_validator_for_other_keywords() -> None:
    problem = schema_error({"type": "object", "properties": {"a": {"pattern": "("}}})
    assert problem is not None
    assert problem[1] == ["properties", "a", "pattern"]
    assert schema_error({"properties": {"a": {"pattern": "^[a-z]+$"}}}) is None


def test_schema_error_with_array_index_in_path() -> None:
    problem = schema_error({"allOf": [{"type": "string"}, {"type": "nope"}]})
    assert problem is not None
    assert problem[1] == ["allOf", 1, "type"]


@pytest.mark.parametrize("dialect", [["x"], 3, {"a": 1}, None])
def test_non_string_dialect_is_reported_not_raised(dialect: Any) -> None:
    problem = schema_error({"$schema": dialect})
    assert problem is not None
    assert problem[1] == ["$schema"]


def test_unknown_dialect_is_an_error_without_a_deprecation_warning() -> None:
    # pytest runs with -W error: a DeprecationWarning from jsonschema would fail here.
    problem = schema_error({"$schema": "https://example.com/nope", "type": "object"})
    assert problem == ("unknown $schema 'https://example.com/nope'", ["$schema"])


def test_known_dialect_is_checked_against_its_own_meta_schema() -> None:
    draft4 = "http://json-schema.org/draft-04/schema#"
    # Draft 4 wants a boolean exclusiveMinimum; 2020-12 wants a number.
    assert schema_error({"$schema": draft4, "minimum": 0, "exclusiveMinimum": True}) is None
    assert schema_error({"$schema": draft4, "minimum": 0, "exclusiveMinimum": 3}) is not None


def test_validator_for_checks_arguments_and_formats() -> None:
    validator = validator_for(
        {
            "type": "object",
            "required": ["n"],
            "properties": {"n": {"type": "integer"}, "when": {"format": "date"}},
        }
    )
    assert validator.is_valid({"n": 1})
    assert not validator.is_valid({})
    assert not validator.is_valid({"n": "1"})
    assert not validator.is_valid({"n": 1, "when": "not a date"})


# --- property: the fast path never disagrees with jsonschema --------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=12)
    | st.sampled_from([0.0, 1.0, -1.0, 2.5, 1e300])
    | st.text(max_size=3)
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
_type_name = st.sampled_from([*TYPES, "strin", "Object", "", "int"])
_names = st.sampled_from(["a", "b", "c"])
_numbers = (
    st.integers(-5, 5)
    | st.sampled_from([0.5, -0.0, 3.0, 1e20])
    | st.booleans()
    | st.text(max_size=1)
)
_counts = st.integers(-2, 5) | st.sampled_from([0.0, 2.0, 1.5, -1.0]) | st.booleans() | st.none()


def _value_for(keyword: str, schemas: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    if keyword == "type":
        return _type_name | st.lists(_type_name, max_size=4) | _json
    if keyword == "properties":
        return st.dictionaries(_names, schemas, max_size=3) | _json
    if keyword == "required":
        return st.lists(_names | st.integers(0, 2), max_size=4) | _json
    if keyword in ("items", "additionalProperties"):
        return schemas | _json
    if keyword in ("enum", "examples"):
        return st.lists(_json, max_size=3) | _json
    if keyword in ("default", "const"):
        return _json
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return _numbers | _json
    if keyword.startswith(("min", "max")):
        return _counts | _json
    if keyword == "pattern":
        return st.sampled_from(["^a", "(", "[a-z]+", "x{2,}", ")"]) | _json
    if keyword in ("uniqueItems", "readOnly", "writeOnly", "deprecated"):
        return st.booleans() | _json
    return st.text(max_size=3) | _json  # description, title, format, $comment


def _schema_dicts(schemas: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keywords = sorted(schema_mod._KEYWORDS)
    return st.lists(st.sampled_from(keywords), max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: _value_for(k, schemas) for k in keys})
    )


_schemas = st.recursive(
    st.booleans() | st.just({}) | st.just({"multipleOf": 2}),
    _schema_dicts,
    max_leaves=6,
)


@settings(max_examples=600, deadline=None)
@given(_schemas)
def test_fast_check_never_disagrees_with_jsonschema(schema: Any) -> None:
    fast = fast_check(schema)
    if fast is not None:
        assert fast == reference_valid(schema), schema
    # And the public entry point always agrees with the oracle.
    assert (schema_error(schema) is None) == reference_valid(schema), schema
