"""The codec's remaining edges, each pinned exactly.

Written against the survivors of ``protocol.py``'s mutation run after
``test_protocol_exact.py``: the refusals of the envelope before the op is
known, the default expectations ("a string") and what the default checks
let through, the smallest accepted timeout, the walk skipped for a request
the caller vouches for, and the encoder's memory of accepted contents.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire import codec as protocol
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import parse_reply, parse_request

GRANT = "G-_" + "g" * 13


def refused(obj: Any, direction: m.Direction = m.Direction.TO_BROKER) -> tuple[str, str, Any]:
    """Code, message and id of ``obj``'s refusal."""
    with pytest.raises(m.MessageError) as info:
        protocol.parse_message(obj, direction)
    return info.value.code, info.value.message, info.value.request_id


# --- the envelope, before the op is known ------------------------------------------


def test_a_frame_without_an_op_or_an_id_is_refused_in_words() -> None:
    assert refused({"v": 1, "id": 4}) == ("bad_request", "missing required field 'op'", 4)
    assert refused({"v": 1, "op": "ping"}) == ("bad_request", "missing required field 'id'", None)
    assert refused({"v": 1, "id": "r", "op": 5}) == (
        "bad_request",
        "field 'op' must be a string, got 5",
        "r",
    )


def test_a_missing_field_after_the_op_names_the_op() -> None:
    assert refused({"v": 1, "id": 4, "op": "askpass", "grant": GRANT, "attempt": 1}) == (
        "bad_request",
        "askpass: missing required field 'prompt'",
        4,
    )


# --- plain strings: the default expectation and the default checks -----------------


def reply(op: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": 3, "op": op} | fields


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            reply("decision", decision="deny", reason=1, by="user"),
            "decision: field 'reason' must be a string, got 1",
        ),
        (
            reply("decision", decision="deny", reason="r", by="user", remember=["x"]),
            "decision: field 'remember' must be a string, got [\"x\"]",
        ),
        (
            reply("status", pending=0, paused=False, version=None),
            "status: field 'version' must be a string, got null",
        ),
        (
            reply("error", code="internal", message=2),
            "error: field 'message' must be a string, got 2",
        ),
    ],
)
def test_a_plain_string_field_expects_a_string_in_words(obj: dict[str, Any], message: str) -> None:
    assert refused(obj, m.Direction.TO_CLIENT) == ("bad_request", message, 3)


def test_a_plain_string_field_takes_any_text() -> None:
    # No character is forbidden in a plain string: not even the letters of a marker.
    text = "XX X-ray \x00 \r\n ünï"
    obj = reply("decision", decision="allow", reason=text, by="user", remember=text)
    assert parse_reply(obj) == m.DecisionReply(
        id=3, decision=m.Decision.ALLOW, reason=text, by=m.DecidedBy.USER, remember=text
    )
    prompt = {"v": 1, "id": 4, "op": "askpass", "grant": GRANT, "prompt": "X\x00", "attempt": 1}
    assert parse_request(prompt) == m.AskpassRequest(id=4, grant=GRANT, prompt="X\x00", attempt=1)


ELEVATE: dict[str, Any] = {
    "v": 1,
    "id": 7,
    "op": "elevate",
    "tool": "greet",
    "kind": "sudo",
    "argv": ["/opt/tools/greet"],
    "args": {},
    "cwd": "/home/ada",
}


def test_code_forbids_only_nul_on_both_paths() -> None:
    code = "echo XX; printf 'X\\n'\r\n"
    for extra in ({}, {"timeout": 5}):
        request = parse_request(ELEVATE | extra | {"code": code})
        assert isinstance(request, m.ElevateRequest)
        assert request.code == code


# --- timeouts ----------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [0.001, 0.5, 1, 1.5])
def test_any_timeout_above_zero_is_accepted(seconds: float) -> None:
    request = parse_request(ELEVATE | {"timeout": seconds})
    assert isinstance(request, m.ElevateRequest)
    assert request.timeout == seconds
    assert type(request.timeout) is float


# --- an action's free text ---------------------------------------------------------


def test_an_actions_free_text_forbids_only_nul() -> None:
    text = "XX X\r\n\t"  # control characters and the letters of a marker are text here
    obj = {
        "v": 1,
        "id": "a2",
        "op": "action",
        "agent": "X agent",
        "tool": "XTool",
        "summary": text,
        "input": {},
        "cwd": "/X",
        "pattern_kind": "exact",
        "pattern": text,
        "detail": text,
        "display": "diff",
        "command": text,
        "path": "/X/XX",
        "session": "X",
    }
    assert parse_request(obj) == m.ActionRequest(
        id="a2",
        agent="X agent",
        tool="XTool",
        summary=text,
        input={},
        cwd="/X",
        pattern_kind=m.PatternKind.EXACT,
        pattern=text,
        detail=text,
        display=m.ActionDisplay.DIFF,
        command=text,
        path="/X/XX",
        session="X",
    )


def test_an_elevate_tree_is_walked() -> None:
    obj = ELEVATE | {"args": {"n": float("nan")}}
    with pytest.raises(m.MessageError) as info:
        parse_request(obj)
    assert (info.value.code, info.value.message, info.value.request_id) == (
        "bad_request",
        "field 'args.n' must be a finite number, got nan",
        7,
    )


@pytest.mark.parametrize(
    ("obj", "got"), [([ELEVATE], "an array"), ("elevate", '"elevate"'), (None, "null")]
)
def test_a_frame_that_is_no_object_is_refused_in_words(obj: Any, got: str) -> None:
    for parse in (parse_request, parse_reply):
        with pytest.raises(m.MessageError) as info:
            parse(obj)
        assert (info.value.code, info.value.message, info.value.request_id) == (
            "bad_json",
            f"a frame must hold a JSON object, got {got}",
            None,
        )


# --- the version -------------------------------------------------------------------

ABSENT = object()


@pytest.mark.parametrize(
    ("changes", "got", "request_id"),
    [
        ({"v": 2}, "'v' = 2", 7),
        ({"v": True}, "'v' = true", 7),
        ({"v": 1.0}, "'v' = 1.0", 7),
        ({"v": None}, "'v' = null", 7),
        ({"v": "1", "id": [7]}, "'v' = \"1\"", None),
        ({"v": ABSENT}, "no 'v' field", 7),
    ],
)
def test_an_unsupported_version_is_refused_in_words(
    changes: dict[str, Any], got: str, request_id: Any
) -> None:
    for obj, direction in ((ELEVATE, m.Direction.TO_BROKER), (reply("ack"), m.Direction.TO_CLIENT)):
        sent = {
            key: value for key, value in (obj | {"id": 7} | changes).items() if value is not ABSENT
        }
        assert refused(sent, direction) == (
            "bad_version",
            f"unsupported protocol version ({got}); this peer speaks v1",
            request_id,
        )


# --- unknown ops -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ("pong", 'unknown op "pong" (sent by the broker, not to it)'),
        ("decision", 'unknown op "decision" (sent by the broker, not to it)'),
        ("error", 'unknown op "error" (sent by the broker, not to it)'),
        ("teleport", 'unknown op "teleport"'),
        ("Ping", 'unknown op "Ping"'),
    ],
)
def test_an_unknown_op_is_refused_in_words(op: str, message: str) -> None:
    assert refused({"v": 1, "id": "u", "op": op}) == ("unknown_op", message, "u")


def test_an_unknown_reply_op_is_passed_on_with_its_id() -> None:
    assert parse_reply(reply("newer_notice", x=1)) == m.UnknownReply(id=3, op="newer_notice")
    assert parse_reply(reply("ping")) == m.UnknownReply(id=3, op="ping")


# --- load_frame's refusals ---------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"v":1,"id":1,"id":2}', 'invalid JSON: duplicate key "id"'),
        (b'{"a":{"b":2,"k":1,"k":3},"c":4}', 'invalid JSON: duplicate key "k"'),
        (b'{"a":NaN}', 'invalid JSON: number "NaN" is out of range'),
        (b'{"a":[-Infinity]}', 'invalid JSON: number "-Infinity" is out of range'),
        (b'{"a":1e999}', 'invalid JSON: number "1e999" is out of range'),
        (
            b"\xef\xbb\xbf{}",
            "invalid JSON at column 1: Unexpected UTF-8 BOM (decode using utf-8-sig)",
        ),
        (b'{"a":"\xff"}', "frame is not valid UTF-8 (byte 6)"),
        (b'{"a" 1}', "invalid JSON at column 6: Expecting ':' delimiter"),
        (b"[" * 100_000, "JSON nests too deeply"),
    ],
)
def test_load_frame_refuses_in_words(line: bytes, message: str) -> None:
    with pytest.raises(m.MessageError) as info:
        protocol.load_frame(line)
    assert (info.value.code, info.value.message, info.value.request_id) == (
        "bad_json",
        message,
        None,
    )


def test_load_frame_keeps_finite_numbers_and_the_last_of_distinct_keys() -> None:
    assert protocol.load_frame(b'{"a":1.5,"b":-0.0,"c":1e308,"d":[1,2]}') == {
        "a": 1.5,
        "b": -0.0,
        "c": 1e308,
        "d": [1, 2],
    }


# --- encoding ----------------------------------------------------------------------


def test_an_integer_too_long_to_write_is_refused_with_its_id() -> None:
    request = m.ElevateRequest(
        id=7, tool="t", kind=m.Kind.SUDO, argv=("a",), args={"n": 10**5000}, cwd="/"
    )
    with pytest.raises(m.MessageError) as info:
        protocol.encode(request)
    assert (info.value.code, info.value.request_id) == ("bad_request", 7)
    assert info.value.message == (
        "Exceeds the limit (4300 digits) for integer string conversion;"
        " use sys.set_int_max_str_digits() to increase the limit"
    )


def test_a_frame_over_the_limit_is_refused_in_words() -> None:
    ping = m.PingRequest(id="p")  # b'{"v":1,"id":"p","op":"ping"}\n': 29 bytes
    assert protocol.encode(ping, max_frame=29) == b'{"v":1,"id":"p","op":"ping"}\n'
    with pytest.raises(m.MessageError) as info:
        protocol.encode(ping, max_frame=28)
    assert (info.value.code, info.value.message, info.value.request_id) == (
        "frame_too_large",
        "ping message is 29 bytes, the limit is 28",
        "p",
    )
