"""The jsonschema-free fast path never calls invalid arguments valid."""

from __future__ import annotations

from typing import Any

import jsonschema.validators
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.dispatch.fastvalid import certainly_valid

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from([1.0, 0.0, 2.5]),
    st.text(max_size=4),
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abcd"), inner, max_size=3)
    ),
    max_leaves=8,
)
TYPES = st.sampled_from(["object", "array", "string", "boolean", "null", "integer", "number"])


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    def build(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        keyword = st.one_of(
            st.tuples(
                st.just("type"),
                st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
            ),
            st.tuples(
                st.just("enum"),
                st.lists(
                    st.one_of(st.text(max_size=2), st.none(), st.integers(0, 2), st.booleans()),
                    max_size=3,
                ),
            ),
            st.tuples(
                st.just("properties"),
                st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
            ),
            st.tuples(
                st.just("required"), st.lists(st.sampled_from("abcd"), max_size=3, unique=True)
            ),
            st.tuples(st.just("additionalProperties"), st.one_of(st.booleans(), children)),
            st.tuples(st.just("items"), children),
            st.tuples(
                st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
                st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False)),
            ),
            st.tuples(
                st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]),
                st.integers(0, 3),
            ),
            st.tuples(st.sampled_from(["description", "title"]), st.text(max_size=3)),
            st.tuples(
                st.sampled_from(["const", "pattern", "format", "uniqueItems"]),
                st.sampled_from(["a", "^a", "date", True]),
            ),
        )
        return st.lists(keyword, max_size=4).map(dict)

    return st.recursive(st.just({}), build, max_leaves=6)


@settings(max_examples=600, deadline=None)
@given(schemas(), JSON)
def test_fast_path_never_accepts_what_jsonschema_rejects(
    schema: dict[str, Any], instance: Any
) -> None:
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return  # the registry never hands an invalid schema to the dispatcher
    if certainly_valid(schema, instance):
        assert cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(instance)


def test_common_tool_schemas_need_no_jsonschema() -> None:
    schema = {
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "description": "File path"},
            "lines": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "additionalProperties": False,
    }
    assert certainly_valid(schema, {"path": "/x", "lines": 3, "mode": "a", "tags": ["t"]})
    assert not certainly_valid(schema, {"lines": 3})
    assert not certainly_valid(schema, {"path": "/x", "extra": 1})
    assert not certainly_valid(schema, {"path": "/x", "lines": 0})
    assert not certainly_valid(schema, {"path": "/x", "lines": True})
    assert not certainly_valid(schema, {"path": "/x", "mode": "c"})


def test_unknown_keywords_defer_to_jsonschema() -> None:
    assert not certainly_valid({"type": "string", "format": "date"}, "2026-01-01")
    assert not certainly_valid({"$ref": "#/$defs/x"}, {})
    assert certainly_valid({}, {"anything": 1})
