"""The message module's rules pinned exactly: ids at their limits, the short
renderings in error messages, every JSON-tree refusal word for word.

Written against the mutants of ``messages.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.messages import (
    MAX_DEPTH,
    MAX_SAFE_INT,
    ErrorCode,
    ErrorReply,
    MessageError,
    check_json_tree,
    describe_value,
    is_request_id,
)

# --- ids ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (MAX_SAFE_INT, True),
        (-MAX_SAFE_INT, True),
        (MAX_SAFE_INT + 1, False),
        (-MAX_SAFE_INT - 1, False),
        (0, True),
        (True, False),  # a bool is no integer id
        ("x" * m.MAX_ID_LENGTH, True),
        ("x" * (m.MAX_ID_LENGTH + 1), False),
        ("é\U0001f40d", True),
        ("a\ud800", False),
        ("\udfff", False),
        (1.0, False),
        (None, False),
        (b"1", False),
    ],
)
def test_is_request_id_at_its_limits(value: Any, valid: bool) -> None:
    assert is_request_id(value) is valid


# --- describe_value ----------------------------------------------------------------


def test_describe_value_is_ascii_json_cut_at_sixty_characters() -> None:
    assert describe_value("é") == '"\\u00e9"'
    assert describe_value([1, None, True]) == "[1, null, true]"
    fits = "x" * 58  # 60 characters with its quotes
    assert describe_value(fits) == f'"{fits}"'
    longer = "x" * 59
    assert describe_value(longer) == '"' + "x" * 56 + "..."
    assert len(describe_value("y" * 1000)) == 60


def test_describe_value_falls_back_to_ascii_for_what_json_cannot_write() -> None:
    assert describe_value({1}) == "{1}"  # TypeError
    loop: list[Any] = []
    loop.append(loop)
    assert describe_value(loop) == "[[...]]"  # ValueError: a circular reference
    assert describe_value(b"\xff") == "b'\\xff'"


# --- MessageError and the error reply --------------------------------------------


def test_message_error_carries_code_message_and_id_into_its_reply() -> None:
    error = MessageError(ErrorCode.BAD_REQUEST, "field 'x' must be y", "req-3")
    assert (error.code, error.message, error.error_code) == (
        "bad_request",
        "field 'x' must be y",
        ErrorCode.BAD_REQUEST,
    )
    assert error.request_id == "req-3"
    assert error.to_reply() == ErrorReply(
        id="req-3", code=ErrorCode.BAD_REQUEST, message="field 'x' must be y"
    )
    assert MessageError(ErrorCode.INTERNAL, "m").request_id is None
    assert ErrorReply(id=1, code="too_many_requests", message="").error_code is (
        ErrorCode.TOO_MANY_REQUESTS
    )
    assert ErrorReply(id=1, code="brand_new", message="").error_code is None


def test_message_fields_name_the_secret_ones() -> None:
    assert m.message_fields(m.PasswordReply) == (("id", False), ("password", True))
    assert m.message_fields(m.AskpassRequest) == (
        ("id", False),
        ("grant", True),
        ("prompt", False),
        ("attempt", False),
    )
    assert m.message_fields(m.PasswordReply) is m.message_fields(m.PasswordReply)


def test_to_json_writes_the_envelope_first_then_every_field_in_order() -> None:
    request = m.ElevateRequest(
        id=7, tool="t", kind=m.Kind.SUDO, argv=("a", "b"), args={"k": [1]}, cwd="/"
    )
    obj = request.to_json()
    assert list(obj) == [
        "v", "id", "op", "tool", "kind", "argv", "args", "cwd", "host", "code", "timeout",
        "client",
    ]  # fmt: skip
    assert obj == {
        "v": 1, "id": 7, "op": "elevate", "tool": "t", "kind": "sudo", "argv": ["a", "b"],
        "args": {"k": [1]}, "cwd": "/", "host": None, "code": None, "timeout": None,
        "client": None,
    }  # fmt: skip
    assert type(obj["kind"]) is str and type(obj["argv"]) is list
    unknown = m.UnknownReply(id=None, op="newer_notice").to_json()
    assert list(unknown.items()) == [("v", 1), ("id", None), ("op", "newer_notice")]
    assert m.PingRequest(id="p").encode() == b'{"v":1,"id":"p","op":"ping"}\n'


# --- the JSON tree -------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    """A message object whose deepest container is at ``depth`` (the object is 1)."""
    leaf: Any = {}
    for level in range(depth - 2):
        leaf = {"d": leaf} if level % 2 else [leaf]
    return {"v": 1, "deep": leaf} if depth > 1 else {"v": 1}


def refusal(obj: Any) -> str:
    with pytest.raises(MessageError) as info:
        check_json_tree(obj, "r")
    assert (info.value.code, info.value.request_id) == ("bad_request", "r")
    return info.value.message


def test_nesting_up_to_the_limit_passes_one_more_is_refused() -> None:
    check_json_tree(nested(MAX_DEPTH), None)
    message = refusal(nested(MAX_DEPTH + 1))
    assert message.startswith("field 'deep[0].d[0]")
    assert message.endswith(f" nests deeper than {MAX_DEPTH} levels")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"a": "\udc80"}, "field 'a' holds an unpaired surrogate (not valid Unicode)"),
        ({"é": ["ok", "\ud800x"]}, "field 'é[1]' holds an unpaired surrogate (not valid Unicode)"),
        ({"x y": [1.0, float("nan")]}, "field '\"x y\"[1]' must be a finite number, got nan"),
        ({"a": {"b": float("-inf")}}, "field 'a.b' must be a finite number, got -inf"),
        ({"t": (1, 2)}, "field 't' is not a JSON value: tuple"),
        ({"b": b"x"}, "field 'b' is not a JSON value: bytes"),
        ({1: "int key"}, "the message has a key that is not valid Unicode text: 1"),
        ({"a": {"\udc80": 1}}, "field 'a' has a key that is not valid Unicode text: \"\\udc80\""),
        ({"a": [{None: 1}]}, "field 'a[0]' has a key that is not valid Unicode text: null"),
    ],
)
def test_every_refusal_of_the_tree_word_for_word(obj: dict[Any, Any], message: str) -> None:
    assert refusal(obj) == message


PLAIN_TREES: list[dict[str, Any]] = [
    {},
    {"s": "plain", "é": "ünï 🐍", "n": 1, "f": -2.5, "t": True, "z": None},
    {"list": [1, "x", [2.0, {"k": [None, False]}]], "obj": {"ключ": {"ü": "ß"}}},
    nested(MAX_DEPTH),
]


@pytest.mark.parametrize("obj", PLAIN_TREES)
def test_a_plain_tree_is_accepted(obj: dict[str, Any]) -> None:
    check_json_tree(obj, None)


UNUSUAL_TREES: list[tuple[Any, str | None]] = [
    (nested(MAX_DEPTH + 1), "nests deeper"),
    ({"a": ["\udc80"]}, "surrogate"),
    ({"a": {"\ud800": 1}}, "key"),
    ({"\ud800": 1}, "key"),
    ({1: 1}, "key"),
    ({"a": [float("inf")]}, "finite"),
    ({"a": float("nan")}, "finite"),
    ({"a": (1,)}, "tuple"),
    ({"a": m.Kind.SANDBOX, "b": [m.Kind.SUDO]}, None),  # str subclasses: accepted
]


@pytest.mark.parametrize(("obj", "problem"), UNUSUAL_TREES)
def test_an_unusual_tree_is_refused_or_accepted_as_json(
    obj: dict[Any, Any], problem: str | None
) -> None:
    if problem is None:
        check_json_tree(obj, None)
    else:
        assert problem in refusal(obj)


def test_a_dict_subclass_is_accepted() -> None:
    class Ordered(dict[str, Any]):
        pass

    check_json_tree(Ordered(a=1), None)
    check_json_tree({"a": Ordered(b=[1])}, None)
