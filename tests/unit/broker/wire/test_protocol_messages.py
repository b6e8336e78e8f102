"""Unit tests of the elevation wire protocol v1 messages: round trips and validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from protocol_helpers import decoder_for, frame
from protocol_samples import ELEVATE, GRANT, REPLIES, REQUESTS, base, elevate_obj, rejected

from registry_core.broker.wire.codec import encode, parse_reply, parse_request
from registry_core.broker.wire.framing import reply_decoder, request_decoder
from registry_core.broker.wire.messages import (
    AckReply,
    AskpassRequest,
    DecidedBy,
    Decision,
    DecisionReply,
    Direction,
    ElevateRequest,
    ErrorCode,
    ErrorReply,
    Message,
    MessageError,
    PasswordReply,
    PingRequest,
    StatusReply,
    StatusRequest,
    SudoResultRequest,
    UnknownReply,
)
from registry_core.errors import ElevationError, ProtocolError

# --- round trips -------------------------------------------------------------------


@pytest.mark.parametrize("message", REQUESTS + REPLIES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_through_encode_and_decoder(message: Message) -> None:
    data = encode(message)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert message.encode() == data
    decoder = decoder_for(message.direction)
    assert decoder.feed(data) == [message]
    assert decoder.buffered == 0


def test_frames_are_compact_json_with_the_envelope_first() -> None:
    assert encode(PingRequest(id=1)) == b'{"v":1,"id":1,"op":"ping"}\n'
    assert list(json.loads(encode(ELEVATE))) == [
        "v", "id", "op", "tool", "kind", "argv", "args", "cwd", "host", "code", "timeout", "client",
    ]  # fmt: skip


def test_non_ascii_text_is_sent_as_utf8() -> None:
    data = encode(PasswordReply(id=1, password="pässwörd"))
    assert "pässwörd".encode() in data


def test_status_op_means_a_request_or_a_reply_by_direction() -> None:
    obj = base("status")
    assert parse_request(obj) == StatusRequest(id=9)
    reply = base("status", pending=0, paused=True, version="1.2")
    assert parse_reply(reply) == StatusReply(id=9, pending=0, paused=True, version="1.2")
    assert rejected(obj, Direction.TO_CLIENT).code == "bad_request"


def test_unknown_extra_fields_are_ignored() -> None:
    obj = base("ping", future_field={"anything": [1, 2]}, priority=5)
    assert parse_request(obj) == PingRequest(id=9)
    assert parse_request(elevate_obj(colour="blue")) == ELEVATE


def test_optional_fields_may_be_absent_or_null() -> None:
    minimal = elevate_obj(host=..., code=..., timeout=...)
    assert parse_request(minimal) == ElevateRequest(
        id=ELEVATE.id, tool=ELEVATE.tool, kind=ELEVATE.kind, argv=ELEVATE.argv,
        args=ELEVATE.args, cwd=ELEVATE.cwd,
    )  # fmt: skip
    assert parse_request(elevate_obj(host=None, code=None, timeout=None)) == parse_request(minimal)
    deny = base("decision", decision="deny", reason="r", by="timeout")
    expected = DecisionReply(id=9, decision=Decision.DENY, reason="r", by=DecidedBy.TIMEOUT)
    assert parse_reply(deny) == expected
    assert parse_reply(deny | {"remember": None, "grant": None}) == expected


def test_integer_timeout_is_accepted_as_seconds() -> None:
    request = parse_request(elevate_obj(timeout=5))
    assert isinstance(request, ElevateRequest)
    assert request.timeout == 5.0


def test_secrets_never_appear_in_reprs() -> None:
    password = PasswordReply(id=1, password="hunter2")
    assert "hunter2" not in repr(password)
    for message in (
        AskpassRequest(id=1, grant=GRANT, prompt="p", attempt=1),
        SudoResultRequest(id=1, grant=GRANT, exit_code=0, auth_failed=False),
        REPLIES[1],
    ):
        assert GRANT not in repr(message)


def test_messages_are_frozen() -> None:
    with pytest.raises(AttributeError):
        PingRequest(id=1).id = 2  # type: ignore[misc]


# --- the error codes -----------------------------------------------------------


def test_message_error_is_a_protocol_error_and_answers_with_an_error_reply() -> None:
    error = rejected({"v": 1, "id": "abc", "op": "nope"})
    assert isinstance(error, ProtocolError)
    assert isinstance(error, ElevationError)
    assert error.code == "unknown_op"
    assert error.error_code is ErrorCode.UNKNOWN_OP
    assert error.request_id == "abc"
    reply = error.to_reply()
    assert reply == ErrorReply(id="abc", code="unknown_op", message=error.message)
    assert json.loads(encode(reply))["code"] == "unknown_op"


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (b"{", "invalid JSON"),
        (b'{"v":1,"id":1,"op":"ping"} trailing', "invalid JSON"),
        (b"\xff\xfe{}", "UTF-8"),
        (b'{"v":1,"id":"\xc3"}', "UTF-8"),
        (b'{"v":1,"id":1,"op":"ping","x":NaN}', "NaN"),
        (b'{"v":1,"id":1,"op":"ping","x":-Infinity}', "Infinity"),
        (b'{"v":1,"id":1,"op":"ping","x":1e999}', "out of range"),
        (b'{"v":1,"id":1,"op":"ping","op":"elevate"}', "duplicate key"),
        (b'{"v":1,"id":1,"op":"ping","a":{"k":1,"k":2}}', "duplicate key"),
        (b"[" * 5000 + b"]" * 5000, "nests too deeply"),
        (b'{"x":' + b"1" * 5000 + b"}", "invalid JSON"),
        (b"[1, 2]", "got an array"),
        (b'"ping"', 'got "ping"'),
        (b"42", "got 42"),
        (b"null", "got null"),
    ],
)
def test_bad_json(line: bytes, detail: str) -> None:
    [error] = request_decoder().feed(line + b"\n")
    assert isinstance(error, MessageError)
    assert error.code == "bad_json"
    assert error.request_id is None
    assert detail in error.message


@pytest.mark.parametrize("version", [..., None, 0, 2, "1", 1.0, True, [1]])
def test_bad_version(version: Any) -> None:
    obj: dict[str, Any] = {"id": 5, "op": "ping"}
    if version is not ...:
        obj["v"] = version
    error = rejected(obj)
    assert error.code == "bad_version"
    assert error.request_id == 5  # the id is echoed when readable
    assert "v1" in error.message


def test_bad_version_is_reported_before_a_bad_id() -> None:
    error = rejected({"v": 2, "id": {"complex": "id"}, "op": "ping"})
    assert (error.code, error.request_id) == ("bad_version", None)


@pytest.mark.parametrize(
    "bad_id",
    [..., None, True, 1.5, [1], {"a": 1}, "x" * 257, 2**53, -(2**53), "\udcff"],
)
def test_invalid_or_missing_ids_are_bad_requests_answered_with_null_id(bad_id: Any) -> None:
    obj: dict[str, Any] = {"v": 1, "op": "ping"}
    if bad_id is not ...:
        obj["id"] = bad_id
    error = rejected(obj)
    assert (error.code, error.request_id) == ("bad_request", None)
    assert "'id'" in error.message


@pytest.mark.parametrize("good_id", [0, -1, 2**53 - 1, "", "x" * 256, "ünï 🐍"])
def test_valid_ids(good_id: Any) -> None:
    assert parse_request({"v": 1, "id": good_id, "op": "ping"}) == PingRequest(id=good_id)


@pytest.mark.parametrize("op", [..., None, 7, ["ping"]])
def test_missing_or_non_string_op_is_a_bad_request(op: Any) -> None:
    obj: dict[str, Any] = {"v": 1, "id": 3}
    if op is not ...:
        obj["op"] = op
    error = rejected(obj)
    assert (error.code, error.request_id) == ("bad_request", 3)
    assert "'op'" in error.message


@pytest.mark.parametrize("op", ["frobnicate", "PING", "", "decision", "pong", "password"])
def test_unknown_op_at_the_broker(op: str) -> None:
    error = rejected(base(op))
    assert (error.code, error.request_id) == ("unknown_op", 9)
    assert json.dumps(op) in error.message


def test_clients_skip_unknown_ops_instead_of_failing() -> None:
    decoder = reply_decoder()
    items = decoder.feed(
        frame({"v": 1, "id": None, "op": "heartbeat", "n": 1}) + encode(AckReply(id=1))
    )
    assert items == [UnknownReply(id=None, op="heartbeat"), AckReply(id=1)]
    # ...but a request op sent to a client is unknown to it too.
    assert parse_reply(base("ping")) == UnknownReply(id=9, op="ping")


def test_a_broker_message_still_needs_the_right_version() -> None:
    assert rejected({"v": 3, "id": 1, "op": "heartbeat"}, Direction.TO_CLIENT).code == "bad_version"


# bad_request: every required field missing, then wrong values, per op.

REQUIRED: list[tuple[Direction, dict[str, Any], list[str]]] = [
    (Direction.TO_BROKER, ELEVATE.to_json(), ["tool", "kind", "argv", "args", "cwd"]),
    (Direction.TO_BROKER, REQUESTS[3].to_json(), ["grant", "prompt", "attempt"]),
    (Direction.TO_BROKER, REQUESTS[4].to_json(), ["grant", "exit_code", "auth_failed"]),
    (Direction.TO_CLIENT, REPLIES[1].to_json(), ["decision", "reason", "by"]),
    (Direction.TO_CLIENT, REPLIES[3].to_json(), ["password"]),
    (Direction.TO_CLIENT, REPLIES[5].to_json(), ["pending", "paused", "version"]),
    (Direction.TO_CLIENT, REPLIES[6].to_json(), ["state"]),
    (Direction.TO_CLIENT, REPLIES[9].to_json(), ["code", "message"]),
]


@pytest.mark.parametrize(
    ("direction", "obj", "name"),
    [(d, obj, name) for d, obj, names in REQUIRED for name in names],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_missing_required_field(direction: Direction, obj: dict[str, Any], name: str) -> None:
    incomplete = {key: value for key, value in obj.items() if key != name}
    error = rejected(incomplete, direction)
    assert error.code == "bad_request"
    assert error.request_id == obj["id"]
    assert f"missing required field {name!r}" in error.message
    assert obj["op"] in error.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tool", ""),
        ("tool", ".hidden"),
        ("tool", "../etc/passwd"),
        ("tool", "has space"),
        ("tool", "x" * 256),
        ("tool", 5),
        ("kind", "root"),
        ("kind", "SUDO"),
        ("kind", None),
        ("argv", []),
        ("argv", "sudo -A dmesg"),
        ("args", []),
        ("args", "{}"),
        ("args", None),
        ("cwd", "relative/dir"),
        ("cwd", ""),
        ("cwd", "/nul\x00"),
        ("host", ""),
        ("host", "two words"),
        ("host", "-leading-dash"),
        ("host", 1),
        ("code", "a\x00b"),
        ("code", ["ls"]),
        ("timeout", 0),
        ("timeout", -1),
        ("timeout", 86401),
        ("timeout", True),
        ("timeout", "30"),
    ],
)
def test_invalid_elevate_fields_are_named_with_their_value(field: str, value: Any) -> None:
    error = rejected(elevate_obj(**{field: value}))
    assert (error.code, error.request_id) == ("bad_request", "req-1")
    assert error.message.startswith(f"elevate: field {field!r} must be ")
    assert f"got {json.dumps(value)[:50]}" in error.message


def test_argv_items_are_named_by_index() -> None:
    error = rejected(elevate_obj(argv=["ok", 3]))
    assert "field 'argv[1]'" in error.message
    assert "got 3" in error.message
    error = rejected(elevate_obj(argv=["ok", "ok", "nul\x00byte"]))
    assert "field 'argv[2]' must be a string without NUL" in error.message


@pytest.mark.parametrize(
    ("op", "fields", "bad_field"),
    [
        ("askpass", {"grant": GRANT, "prompt": "p", "attempt": 0}, "attempt"),
        ("askpass", {"grant": GRANT, "prompt": "p", "attempt": True}, "attempt"),
        ("askpass", {"grant": GRANT, "prompt": "p", "attempt": 1.0}, "attempt"),
        ("askpass", {"grant": GRANT, "prompt": None, "attempt": 1}, "prompt"),
        ("sudo_result", {"grant": GRANT, "exit_code": 1.5, "auth_failed": False}, "exit_code"),
        ("sudo_result", {"grant": GRANT, "exit_code": 2**60, "auth_failed": False}, "exit_code"),
        ("sudo_result", {"grant": GRANT, "exit_code": 0, "auth_failed": 0}, "auth_failed"),
        ("sudo_result", {"grant": GRANT, "exit_code": 0, "auth_failed": "no"}, "auth_failed"),
    ],
)
def test_invalid_request_fields(op: str, fields: dict[str, Any], bad_field: str) -> None:
    error = rejected(base(op, **fields))
    assert (error.code, error.request_id) == ("bad_request", 9)
    assert f"{op}: field {bad_field!r}" in error.message
    assert "got " in error.message


@pytest.mark.parametrize("grant", ["short", "x" * 129, "has space in it....", 42, "/" * 20])
def test_bad_grants_are_rejected_without_echoing_them(grant: Any) -> None:
    for op, extra in (
        ("askpass", {"prompt": "p", "attempt": 1}),
        ("sudo_result", {"exit_code": 0, "auth_failed": False}),
    ):
        error = rejected(base(op, grant=grant, **extra))
        assert error.code == "bad_request"
        assert "'grant'" in error.message
        assert "value not shown" in error.message
        assert str(grant) not in error.message


@pytest.mark.parametrize("password", ["two\nlines", "cr\r", "nul\x00"])
def test_passwords_that_sudo_cannot_read_are_rejected_without_echoing_them(password: str) -> None:
    error = rejected(base("password", password=password), Direction.TO_CLIENT)
    assert error.code == "bad_request"
    assert "'password'" in error.message
    assert password not in error.message
    with pytest.raises(MessageError):
        encode(PasswordReply(id=1, password=password))


@pytest.mark.parametrize(
    ("op", "fields", "bad_field"),
    [
        ("decision", {"decision": "maybe", "reason": "r", "by": "user"}, "decision"),
        ("decision", {"decision": "allow", "reason": 1, "by": "user"}, "reason"),
        ("decision", {"decision": "allow", "reason": "r", "by": "cat"}, "by"),
        ("decision", {"decision": "allow", "reason": "r", "by": "user", "remember": 1}, "remember"),
        ("status", {"pending": -1, "paused": False, "version": "1"}, "pending"),
        ("status", {"pending": 0, "paused": "no", "version": "1"}, "paused"),
        ("status", {"pending": 0, "paused": False, "version": 1}, "version"),
        ("progress", {"state": "thinking"}, "state"),
        ("error", {"code": "Bad Code", "message": "m"}, "code"),
        ("error", {"code": "bad_json", "message": None}, "message"),
    ],
)
def test_invalid_reply_fields(op: str, fields: dict[str, Any], bad_field: str) -> None:
    error = rejected(base(op, **fields), Direction.TO_CLIENT)
    assert (error.code, error.request_id) == ("bad_request", 9)
    assert f"{op}: field {bad_field!r}" in error.message


def test_a_denied_decision_carries_no_grant() -> None:
    obj = base("decision", decision="deny", reason="r", by="user", grant=GRANT)
    error = rejected(obj, Direction.TO_CLIENT)
    assert "'grant'" in error.message
    assert GRANT not in error.message


@pytest.mark.parametrize("op", ["pong", "decision", "password", "ack", "status", "progress"])
def test_only_errors_may_carry_a_null_id(op: str) -> None:
    reply = next(r for r in REPLIES if r.op == op).to_json() | {"id": None}
    error = rejected(reply, Direction.TO_CLIENT)
    assert error.code == "bad_request"
    assert "'id'" in error.message


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_error_code_round_trips(code: ErrorCode) -> None:
    reply = ErrorReply(id="r", code=code, message=f"about {code}")
    [decoded] = reply_decoder().feed(encode(reply))
    assert decoded == reply
    assert isinstance(decoded, ErrorReply)
    assert decoded.error_code is code


def test_error_codes_cover_the_specified_set() -> None:
    assert {code.value for code in ErrorCode} >= {
        "bad_json", "frame_too_large", "bad_version", "bad_request", "unknown_op", "peer_uid",
        "unknown_tool", "tool_unavailable", "no_grant", "shutting_down", "internal",
    }  # fmt: skip


def test_unknown_error_codes_from_newer_brokers_are_kept() -> None:
    reply = parse_reply(base("error", code="rate_limited", message="slow down"))
    assert isinstance(reply, ErrorReply)
    assert reply.code == "rate_limited"
    assert reply.error_code is None


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        ({"s": "\udc80"}, "field 'args.s' holds an unpaired surrogate"),
        ({"a": [0, {"\ud800": 1}]}, "field 'args.a[1]' has a key"),
        ({"x y": [float("nan")]}, "must be a finite number"),
        ({"t": (1, 2)}, "is not a JSON value: tuple"),
        ({1: "int key"}, "has a key"),
    ],
)
def test_json_tree_rules_name_the_path(args: dict[Any, Any], detail: str) -> None:
    error = rejected(elevate_obj(args=args))
    assert error.code == "bad_request"
    assert detail in error.message
    assert error.request_id == "req-1"


def test_nesting_is_limited() -> None:
    deep: Any = "leaf"
    for _ in range(70):
        deep = [deep]
    error = rejected(elevate_obj(args={"deep": deep}))
    assert "nests deeper than 64 levels" in error.message
    line = encode(ELEVATE).replace(
        b'"args":{', b'"args":{"deep":' + json.dumps(deep).encode() + b","
    )
    [item] = request_decoder().feed(line)
    assert isinstance(item, MessageError)
    assert item.code == "bad_request"
