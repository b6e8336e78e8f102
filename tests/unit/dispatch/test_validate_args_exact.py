"""``validate_args`` pinned exactly: every refusal word for word.

Runs the real argument check on small tools of a real registry (see
dispatch_helpers.py): which error of several is named, the path of a nested
one, and when the fast path hands over to jsonschema.
"""

from __future__ import annotations

from typing import Any

import pytest
from dispatch_helpers import MARKER, Stack

from registry_core.dispatch import dispatcher as dispatcher_module
from registry_core.dispatch import validate_args
from registry_core.errors import ArgumentsError
from registry_core.registry.model import Tool

# --- validate_args: every refusal word for word ----------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "mode"],
    "properties": {
        "zeta": {"type": "integer"},
        "path": {"type": "string"},
        "mode": {"enum": ["fast", "slow"]},
        "alpha": {"type": "integer"},
        "name": {"type": "string", "pattern": "^[a-z]+$"},
    },
}


def _tool(stack: Stack, schema: dict[str, Any] = SCHEMA, name: str = "strict") -> Tool:
    stack.tool(name, MARKER, args=schema)
    return stack.registry().get(name)


def _refusal(tool: Tool, args: Any) -> ArgumentsError:
    with pytest.raises(ArgumentsError) as caught:
        validate_args(tool, args)
    return caught.value


@pytest.mark.parametrize("args", [[1, 2], "text", None, 3])
def test_arguments_that_are_not_an_object(stack: Stack, args: Any) -> None:
    error = _refusal(_tool(stack), args)
    assert (error.tool, error.field, error.message) == (
        "strict",
        "(arguments)",
        "must be a JSON object",
    )
    assert str(error) == "strict: invalid argument (arguments): must be a JSON object"


def test_a_missing_property_names_the_first_one_missing(stack: Stack) -> None:
    error = _refusal(_tool(stack), {"path": "p"})
    assert (error.tool, error.field, error.message) == ("strict", "mode", "is required")
    assert str(error) == "strict: invalid argument mode: is required"
    error = _refusal(_tool(stack), {})
    assert (error.field, error.message) == ("path", "is required")


def test_a_missing_nested_property_names_its_path(stack: Stack) -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "required": ["a", "b"]},
            }
        },
    }
    error = _refusal(_tool(stack, schema), {"items": [{"a": 1, "b": 2}, {"a": 1}]})
    assert (error.field, error.message) == ("items[1].b", "is required")


def test_a_value_outside_an_enum_is_not_taken_for_a_missing_property(stack: Stack) -> None:
    error = _refusal(_tool(stack), {"path": "p", "mode": "medium"})
    assert (error.tool, error.field, error.message) == (
        "strict",
        "mode",
        "'medium' is not one of ['fast', 'slow']",
    )


def test_of_two_sibling_errors_the_best_match_is_reported(stack: Stack) -> None:
    # jsonschema's best match among siblings is the last by path, not the first sorted.
    args = {"path": "p", "mode": "fast", "alpha": "a", "zeta": "z"}
    error = _refusal(_tool(stack), args)
    assert (error.field, error.message) == ("zeta", "'z' is not of type 'integer'")
    assert str(error) == "strict: invalid argument zeta: 'z' is not of type 'integer'"


def test_the_best_match_does_not_depend_on_the_schemas_order(stack: Stack) -> None:
    # zeta comes first in the schema, so the validator finds its error first.
    args = {"path": "p", "mode": "fast", "alpha": 1.5, "zeta": 2.5}
    error = _refusal(_tool(stack), args)
    assert (error.field, error.message) == ("zeta", "2.5 is not of type 'integer'")


def test_an_error_the_fast_path_cannot_judge_is_explained_by_jsonschema(stack: Stack) -> None:
    error = _refusal(_tool(stack), {"path": "p", "mode": "slow", "name": "UPPER"})
    assert (error.field, error.message) == ("name", "'UPPER' does not match '^[a-z]+$'")


def test_valid_arguments_the_fast_path_cannot_judge_are_accepted(stack: Stack) -> None:
    validate_args(_tool(stack), {"path": "p", "mode": "slow", "name": "lower"})


def test_valid_arguments_under_a_simple_schema_never_reach_jsonschema(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _tool(stack, {"type": "object", "properties": {"n": {"type": "integer"}}})

    def no_validator(schema: Any) -> Any:
        raise AssertionError(f"jsonschema was asked about {schema!r}")

    monkeypatch.setattr(dispatcher_module, "validator_for", no_validator)
    validate_args(tool, {"n": 3})
    with pytest.raises(AssertionError, match="jsonschema was asked"):
        validate_args(tool, {"n": "three"})
