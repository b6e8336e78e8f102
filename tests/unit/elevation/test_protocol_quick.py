"""The codec's quick paths (issue 19) give exactly what the general paths give.

- ``_elevate_quick`` checks a whole common ``elevate`` at once; whatever it
  accepts, the field-by-field parser accepts as the same request, and it
  never accepts what that parser rejects.
- ``parse_request`` takes a common ``elevate`` frame whole (envelope and
  fields at once) when the tree walk is known to pass: the request or error
  the general path gives.
- ``plain_frame`` lets the decoder skip the JSON tree walk; it may only say
  so for lines whose decoded tree passes the walk.
- ``encode`` reuses a validated content's frame with a new id: the frame is
  the one a fresh encoding gives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from registry_core.elevation import messages as m
from registry_core.elevation import protocol
from registry_core.elevation.framing import request_decoder
from registry_core.elevation.protocol import (
    _elevate_quick,
    _envelope,
    encode,
    load_frame,
    parse_request,
    plain_frame,
)

SETTINGS = settings(max_examples=400, deadline=None)

# Values a field may hold: near misses of each field's rule, and wrong types.
NEAR_MISSES: dict[str, list[Any]] = {
    "tool": ["greet", "g.r-e_e7", ".hidden", "a b", "", "x" * 256, "x" * 255, "ü"],
    "kind": ["sandbox", "sudo", "SUDO", "root", ""],
    "argv": [["/bin/true"], [], ["a\x00b"], ["", "x"], [1], "/bin/true"],
    "args": [{}, {"k": [1, {"n": None}]}, [], "args"],
    "cwd": ["/abs/path", "/", "rel/path", "", "/with\x00nul"],
    "host": ["laptop", "host.example", "::1", "-bad-host", "", "a" * 254, "a b"],
    "code": ["echo hi", "", "with\x00nul"],
    "timeout": [30.0, 1, 0, -1, 86401, True],
    "client": ["claude", "agent name", "bidi\u202ename", "", "x" * 129, "tab\there"],
}
wrong_types = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.just({})
)
FIELDS = tuple(NEAR_MISSES)


def valid_elevate() -> dict[str, Any]:
    return {
        "v": 1,
        "id": 7,
        "op": "elevate",
        "tool": "greet",
        "kind": "sandbox",
        "argv": ["/opt/tools/greet"],
        "args": {"name": "Ada"},
        "cwd": "/home/ada",
    }


@st.composite
def elevate_objects(draw: st.DrawFn) -> dict[str, Any]:
    obj = valid_elevate()
    for name in draw(st.sets(st.sampled_from(FIELDS), max_size=2)):
        choice = draw(st.integers(0, 4))
        if choice == 0:
            obj.pop(name, None)
        elif choice == 1:
            obj[name] = draw(wrong_types)
        else:
            obj[name] = draw(st.sampled_from(NEAR_MISSES[name]))
    obj["id"] = draw(st.sampled_from([7, "id-1", None, 1.5, True]))
    return obj


def general(obj: dict[str, Any]) -> m.ElevateRequest | str:
    """What the field-by-field parser makes of ``obj``: the request or the error."""
    try:
        fields = _envelope(obj)
        fields.op = "elevate"
        # The general path is _elevate's own body, after its quick attempt: run it
        # with the quick path switched off.
        original = protocol._elevate_quick
        protocol._elevate_quick = lambda _o, _i: None  # type: ignore[assignment]
        try:
            return protocol._elevate(fields)
        finally:
            protocol._elevate_quick = original
    except m.MessageError as exc:
        return f"{exc.error_code}: {exc.message}"


@SETTINGS
@given(elevate_objects())
@example(valid_elevate())
@example({**valid_elevate(), "host": "laptop", "client": "claude", "code": "echo hi"})
def test_the_quick_elevate_agrees_with_the_field_by_field_parser(obj: dict[str, Any]) -> None:
    request_id = obj.get("id") if m.is_request_id(obj.get("id")) else None
    quick = _elevate_quick(obj, request_id)
    slow = general(obj)
    if quick is not None:
        assert quick == slow
        assert isinstance(slow, m.ElevateRequest)


def test_the_quick_elevate_takes_the_common_request() -> None:
    # Otherwise the property above would hold for a quick path that never answers.
    assert _elevate_quick(valid_elevate(), 7) == parse_request(valid_elevate())
    with_options = {**valid_elevate(), "host": "laptop", "client": "claude", "code": None}
    assert _elevate_quick(with_options, 7) == parse_request(with_options)


@st.composite
def elevate_frames(draw: st.DrawFn) -> dict[str, Any]:
    """elevate_objects() with the envelope varied too: v, op, and a missing id."""
    obj = draw(elevate_objects())
    for name, values in (
        ("v", [1, 2, 1.0, True, "1", None]),
        ("op", ["elevate", "Elevate", "ping", 1, None]),
        ("id", [7, None, [], -(2**60), "\ud800"]),
    ):
        if draw(st.integers(0, 3)) == 0:
            choice = draw(st.sampled_from([*values, "absent"]))
            if choice == "absent":
                obj.pop(name, None)
            else:
                obj[name] = choice
    return obj


def parsed(obj: dict[str, Any]) -> m.Request | str:
    try:
        return parse_request(obj, tree_checked=True)
    except m.MessageError as exc:
        return f"{exc.error_code}: {exc.message} ({exc.request_id!r})"


@SETTINGS
@given(elevate_frames())
@example(valid_elevate())
@example({**valid_elevate(), "v": True})
@example({**valid_elevate(), "id": None})
def test_the_quick_frame_parse_agrees_with_the_general_one(obj: dict[str, Any]) -> None:
    quick = parsed(obj)
    original = protocol._elevate_frame_quick
    protocol._elevate_frame_quick = lambda _o: None  # type: ignore[assignment]
    try:
        slow = parsed(obj)
    finally:
        protocol._elevate_frame_quick = original
    assert quick == slow
    assert type(quick) is type(slow)


def test_the_quick_frame_parse_takes_the_common_request() -> None:
    assert protocol._elevate_frame_quick(valid_elevate()) == parse_request(valid_elevate())


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=20,
)


def nested(depth: int) -> bytes:
    return b'{"v":1,"id":1,"op":"ping","a":' + b"[" * depth + b"]" * depth + b"}"


@SETTINGS
@given(json_values, st.booleans())
@example("\ud800", True)
@example("\ud800", False)
@example({"k": "\udfff"}, False)
def test_a_plain_frame_always_passes_the_tree_walk(value: Any, ascii_only: bool) -> None:
    line = json.dumps({"v": 1, "id": 1, "op": "ping", "x": value}, ensure_ascii=ascii_only)
    try:
        raw = line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate cannot even be sent as UTF-8
        return
    try:
        obj = load_frame(raw)
    except m.MessageError:
        return
    if plain_frame(raw):
        m.check_json_tree(obj, 1)  # raises if the shortcut were wrong


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        (b'{"v":1,"id":1,"op":"ping"}', True),
        (b'{"v":1,"id":1,"op":"ping","s":"\\ud800"}', False),
        (b'{"v":1,"id":1,"op":"ping","s":"\\u0041"}', False),  # any escape: walk
        (nested(m.MAX_DEPTH - 1), True),
        (nested(m.MAX_DEPTH), False),
    ],
)
def test_plain_frame_judges_by_escapes_and_brackets(line: bytes, plain: bool) -> None:
    assert plain_frame(line) is plain


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b'{"v":1,"id":1,"op":"ping","s":"\\ud800"}\n', m.ErrorCode.BAD_REQUEST),
        (nested(m.MAX_DEPTH) + b"\n", m.ErrorCode.BAD_REQUEST),
        (nested(m.MAX_DEPTH - 1) + b"\n", None),
    ],
)
def test_the_decoder_still_refuses_what_the_walk_refuses(
    line: bytes, code: m.ErrorCode | None
) -> None:
    (item,) = request_decoder().feed(line)
    if code is None:
        assert isinstance(item, m.PingRequest)
    else:
        assert isinstance(item, m.MessageError)
        assert item.error_code is code


reasons = st.sampled_from(["remembered: allow greet", "requests are paused", "ünïcode ✓"])
request_ids = st.one_of(st.integers(-(2**53) + 1, 2**53 - 1), st.text(max_size=12)).filter(
    m.is_request_id
)


@SETTINGS
@given(request_ids, request_ids, reasons, st.sampled_from(list(m.Decision)))
def test_a_remembered_content_encodes_as_a_fresh_one(
    first: m.RequestId, second: m.RequestId, reason: str, decision: m.Decision
) -> None:
    def reply(request_id: m.RequestId) -> m.DecisionReply:
        return m.DecisionReply(
            id=request_id, decision=decision, reason=reason, by=m.DecidedBy.POLICY, remember=None
        )

    encode(reply(first))  # now remembered
    again = encode(reply(second))
    protocol._ACCEPTED.clear()
    assert again == encode(reply(second))  # what a fresh encoding gives
    assert json.loads(again)["id"] == second


def test_a_remembered_content_still_refuses_a_bad_id() -> None:
    good = m.PongReply(id=1)
    encode(good)
    with pytest.raises(m.MessageError) as exc:
        encode(m.PongReply(id="\ud800"))
    assert exc.value.error_code is m.ErrorCode.BAD_REQUEST
