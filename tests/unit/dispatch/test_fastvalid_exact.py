"""The fast path is exact on the keywords it implements, and unsure on everything else.

test_fastvalid.py proves the fast path sound (it never accepts what jsonschema
rejects); these tests prove it complete on its own subset: for schemas made
only of the keywords it implements, it answers exactly as jsonschema does, so
a valid call of a common tool never pays for importing jsonschema.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema.validators
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.dispatch.fastvalid import certainly_valid

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-4, 4),
    st.sampled_from([0.0, 1.0, -2.0, 2.5, -0.5, 3.0]),
    st.text(alphabet="ab", max_size=4),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)
    ),
    max_leaves=10,
)
TYPES = st.sampled_from(["object", "array", "string", "boolean", "null", "integer", "number"])
BOUNDS = st.one_of(st.integers(-3, 3), st.sampled_from([-1.5, 0.0, 0.5, 2.0]))


def supported_schemas() -> st.SearchStrategy[Any]:
    """Schemas of only the keywords the fast path implements, with values it accepts."""

    def build(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keyword = st.one_of(
            st.tuples(
                st.just("type"),
                st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
            ),
            st.tuples(
                st.just("enum"),
                st.lists(st.one_of(st.text(alphabet="ab", max_size=2), st.none()), max_size=3),
            ),
            st.tuples(
                st.just("properties"),
                st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
            ),
            st.tuples(
                st.just("required"), st.lists(st.sampled_from("abcd"), max_size=3, unique=True)
            ),
            st.tuples(st.just("additionalProperties"), children),
            st.tuples(st.just("items"), children),
            st.tuples(
                st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
                BOUNDS,
            ),
            st.tuples(
                st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]),
                st.integers(0, 3),
            ),
            st.sampled_from(
                [
                    ("description", "a note"),
                    ("title", "a note"),
                    ("default", 7),
                    ("examples", [1, "x"]),
                    ("$comment", "a note"),
                    ("deprecated", True),
                ]
            ),
        )
        return st.one_of(st.booleans(), st.lists(keyword, max_size=4).map(dict))

    return st.recursive(st.just({}), build, max_leaves=6)


def jsonschema_says(schema: Any, instance: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return bool(cls(schema).is_valid(instance))


@settings(max_examples=800, deadline=None)
@given(supported_schemas(), VALUES)
def test_on_its_own_keywords_the_fast_path_answers_as_jsonschema(
    schema: Any, instance: Any
) -> None:
    assert certainly_valid(schema, instance) is jsonschema_says(schema, instance)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "object"}, [{}, {"a": 1}], [[], "x", None, 1]),
        ({"type": "array"}, [[], [1]], [{}, "x"]),
        ({"type": "string"}, ["", "x"], [1, None, ["x"]]),
        ({"type": "boolean"}, [True, False], [0, 1, None, "true"]),
        ({"type": "null"}, [None], [0, "", False]),
        ({"type": "integer"}, [0, -3, 2.0], [2.5, True, "1", None]),
        ({"type": "number"}, [0, 2.5, -1], [True, False, "1", None]),
        ({"type": ["string", "null"]}, ["x", None], [1, {}]),
        ({"enum": ["a", None]}, ["a", None], ["b", 1, True, []]),
        ({"required": ["a", "b"]}, [{"a": 1, "b": 2}, [], "x"], [{"a": 1}, {"b": 1}, {}]),
        (
            {"properties": {"a": {"type": "string"}}},
            [{"a": "x"}, {"b": 1}, {}, "not an object"],
            [{"a": 1}],
        ),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            [{"a": 1}, {}, "x"],
            [{"b": 1}, {"a": 1, "b": 1}],
        ),
        (
            {"additionalProperties": {"type": "integer"}},
            [{"a": 1, "b": 2}, {}, "x"],
            [{"a": "x"}],
        ),
        ({"items": {"type": "integer"}}, [[1, 2], [], "ab", {"a": "x"}], [[1, "x"], ["x"]]),
        ({"minimum": 2}, [2, 3, 2.0, "x", True], [1, 1.5]),
        ({"maximum": 2}, [2, 1, "xyz", False], [3, 2.5]),
        ({"exclusiveMinimum": 2}, [3, 2.5], [2, 1]),
        ({"exclusiveMaximum": 2}, [1, 1.5], [2, 3]),
        ({"minLength": 2}, ["ab", "abc", [1], 5], ["a", ""]),
        ({"maxLength": 2}, ["ab", "", [1, 2, 3]], ["abc"]),
        ({"minItems": 2}, [[1, 2], "a"], [[1], []]),
        ({"maxItems": 2}, [[1, 2], [], "abc"], [[1, 2, 3]]),
        ({"description": "d", "type": "string"}, ["x"], [1]),
        ({"title": "t", "default": 1, "maximum": 2}, [2], [3]),
        (True, [1, None, {}], []),
        ({}, [1, None, {}], []),
    ],
)
def test_each_keyword_at_its_boundary(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    for instance in valid:
        assert certainly_valid(schema, instance) is True, instance
        assert jsonschema_says(schema, instance) is True, instance
    for instance in invalid:
        assert certainly_valid(schema, instance) is False, instance
        assert jsonschema_says(schema, instance) is False, instance


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "decimal"}, 1),  # a type name it does not know
        ({"type": [1]}, 1),
        ({"enum": [1, 2]}, 1),  # numbers and booleans: JSON equality has subtleties
        ({"enum": "a"}, "a"),
        ({"properties": ["a"]}, {"a": 1}),
        ({"required": "a"}, {"a": 1}),
        ({"minimum": math.inf}, 1),
        ({"maximum": math.nan}, 1),
        ({"maximum": True}, 0),
        ({"minimum": "1"}, 2),
        ({"minLength": "1"}, "ab"),
        ({"maxItems": math.inf}, []),
        ({"patternProperties": {"^a": {}}, "additionalProperties": False}, {"a": 1}),
        ({"additionalProperties": False, "patternProperties": {"^a": {}}}, {"a": 1}),
        ({"additionalProperties": {}, "properties": ["a"]}, {"a": 1}),
        ({"pattern": "^a"}, "a"),
        ({"items": False}, [1]),
        (False, 1),
        ("not a schema", 1),
    ],
)
def test_anything_else_is_left_to_jsonschema(schema: Any, instance: Any) -> None:
    assert certainly_valid(schema, instance) is False


def test_a_schema_nested_too_deep_is_left_to_jsonschema() -> None:
    schema: dict[str, Any] = {}
    value: Any = 1
    for _ in range(5000):
        schema = {"items": schema}
        value = [value]
    assert certainly_valid(schema, value) is False
