"""Unit tests of the elevation wire protocol v1 codec (messages + framing)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from protocol_helpers import decoder_for, frame

from registry_core.elevation import protocol
from registry_core.elevation.messages import (
    MAX_FRAME,
    AckReply,
    AskpassRequest,
    DecidedBy,
    Decision,
    DecisionReply,
    Direction,
    ElevateRequest,
    ErrorCode,
    ErrorReply,
    Kind,
    Message,
    MessageError,
    OpenBrowserRequest,
    PasswordReply,
    PingRequest,
    PongReply,
    ProgressNotice,
    ProgressState,
    StatusReply,
    StatusRequest,
    SudoResultRequest,
    UnknownReply,
)
from registry_core.elevation.protocol import (
    FrameDecoder,
    encode,
    load_frame,
    parse_message,
    parse_reply,
    parse_request,
    reply_decoder,
    request_decoder,
)
from registry_core.errors import ElevationError, ProtocolError

GRANT = "g" * 43  # the shape of secrets.token_urlsafe(32)

ELEVATE = ElevateRequest(
    id="req-1",
    tool="system_logs",
    kind=Kind.SUDO,
    argv=("sudo", "-A", "--", "/usr/local/bin/system_logs"),
    args={"lines": "10", "source": "dmesg", "nested": {"list": [1, 2.5, None, True]}},
    cwd="/home/alice/project",
    host="build-box.example.org",
    code=None,
    timeout=120.0,
)

REQUESTS: list[Message] = [
    PingRequest(id=1),
    ELEVATE,
    ElevateRequest(
        id=2,
        tool="execute_code",
        kind=Kind.SANDBOX,
        argv=("bash", "-c", "ls /root"),
        args={},
        cwd="/",
        code="ls /root\necho done",
    ),
    AskpassRequest(id=3, grant=GRANT, prompt="[sudo] password for alice: ", attempt=2),
    SudoResultRequest(id=4, grant=GRANT, exit_code=1, auth_failed=True),
    SudoResultRequest(id=5, grant=GRANT, exit_code=-9, auth_failed=False),
    StatusRequest(id="s"),
    OpenBrowserRequest(id=0),
]

REPLIES: list[Message] = [
    PongReply(id=1),
    DecisionReply(
        id="req-1",
        decision=Decision.ALLOW,
        reason="approved in dialog",
        by=DecidedBy.USER,
        remember="15m",
        grant=GRANT,
    ),
    DecisionReply(id=2, decision=Decision.DENY, reason="no front-end", by=DecidedBy.NO_FRONT_END),
    PasswordReply(id=3, password="correct horse battery staple ünïcode"),
    AckReply(id=4),
    StatusReply(id="s", pending=2, paused=False, version="0.1.0"),
    ProgressNotice(id="req-1", state=ProgressState.WAITING_FOR_USER),
    ProgressNotice(id="req-1", state=ProgressState.NOTIFIED),
    ErrorReply(id=None, code=ErrorCode.BAD_JSON, message="invalid JSON"),
    ErrorReply(id=7, code=ErrorCode.NO_GRANT, message="grant expired"),
]


def base(op: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": 9, "op": op, **fields}


def elevate_obj(**changes: Any) -> dict[str, Any]:
    obj = ELEVATE.to_json()
    obj.update(changes)
    return {key: value for key, value in obj.items() if value is not ...}


def rejected(obj: Any, direction: Direction = Direction.TO_BROKER) -> MessageError:
    with pytest.raises(MessageError) as info:
        parse_message(obj, direction)
    return info.value


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
        "v", "id", "op", "tool", "kind", "argv", "args", "cwd", "host", "code", "timeout",
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


# --- encode -------------------------------------------------------------------


def test_encode_refuses_invalid_messages_naming_the_field() -> None:
    bad = ElevateRequest(id=1, tool="t", kind=Kind.SANDBOX, argv=(), args={}, cwd="/")
    with pytest.raises(MessageError, match=r"elevate: field 'argv'") as info:
        encode(bad)
    assert info.value.code == "bad_request"
    assert info.value.request_id == 1
    with pytest.raises(MessageError, match="not a JSON value: set"):
        encode(
            ElevateRequest(id=1, tool="t", kind=Kind.SANDBOX, argv=("x",), args={"s": {1}}, cwd="/")
        )
    with pytest.raises(MessageError, match="'id'"):
        encode(PongReply(id=None))  # type: ignore[arg-type]


def test_encode_refuses_frames_over_the_limit() -> None:
    def request(size: int) -> ElevateRequest:
        return ElevateRequest(
            id=1, tool="execute_code", kind=Kind.SANDBOX, argv=("bash",), args={}, cwd="/",
            code="x" * size,
        )  # fmt: skip

    overhead = len(encode(request(0)))
    assert len(encode(request(MAX_FRAME - overhead))) == MAX_FRAME
    with pytest.raises(MessageError) as info:
        encode(request(MAX_FRAME - overhead + 1))
    assert (info.value.code, info.value.request_id) == ("frame_too_large", 1)
    with pytest.raises(MessageError, match="frame_too_large"):
        encode(PingRequest(id=1), max_frame=10)


def test_encode_refuses_integers_python_cannot_print() -> None:
    huge = ElevateRequest(
        id=1, tool="t", kind=Kind.SANDBOX, argv=("x",), args={"n": 10**5000}, cwd="/"
    )
    with pytest.raises(MessageError) as info:
        encode(huge)
    assert info.value.code == "bad_request"


class CountingParse:
    """Stands in for the protocol module's ``parse_message`` and counts the parses."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        monkeypatch.setattr(protocol, "parse_message", self)

    def __call__(self, obj: Any, direction: Direction = Direction.TO_BROKER) -> Message:
        self.calls += 1
        return parse_message(obj, direction)


def test_encode_parses_a_repeated_content_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "_ACCEPTED", {})
    parses = CountingParse(monkeypatch)
    reason = "remembered: always"
    for request_id in (1, "two", 3):
        reply = DecisionReply(
            id=request_id, decision=Decision.ALLOW, reason=reason, by=DecidedBy.POLICY
        )
        [decoded] = reply_decoder().feed(encode(reply))
        assert decoded == reply
    assert parses.calls == 1
    encode(DecisionReply(id=4, decision=Decision.DENY, reason=reason, by=DecidedBy.POLICY))
    assert parses.calls == 2


def test_a_remembered_content_still_needs_a_valid_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "_ACCEPTED", {})
    encode(PongReply(id=1))
    for bad_id in ("x" * 1000, 2**60, None):
        with pytest.raises(MessageError, match="'id'"):
            encode(PongReply(id=bad_id))  # type: ignore[arg-type]
    encode(ErrorReply(id=1, code=ErrorCode.INTERNAL, message="m"))
    encode(ErrorReply(id=None, code=ErrorCode.INTERNAL, message="m"))  # errors may have none


def test_equal_values_of_other_types_are_validated_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol, "_ACCEPTED", {})
    encode(StatusReply(id=1, pending=0, paused=False, version="1"))
    with pytest.raises(MessageError, match="'paused'"):
        encode(StatusReply(id=1, pending=0, paused=0, version="1"))  # type: ignore[arg-type]
    with pytest.raises(MessageError, match="'pending'"):
        encode(StatusReply(id=1, pending=False, paused=False, version="1"))


def test_secrets_are_never_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    accepted: dict[Any, None] = {}
    monkeypatch.setattr(protocol, "_ACCEPTED", accepted)
    parses = CountingParse(monkeypatch)
    password = "correct horse battery staple"
    for _ in range(2):
        encode(PasswordReply(id=1, password=password))
        encode(
            DecisionReply(id=1, decision=Decision.ALLOW, reason="r", by=DecidedBy.USER, grant=GRANT)
        )
    assert parses.calls == 4
    assert password not in repr(accepted)
    assert GRANT not in repr(accepted)
    with pytest.raises(MessageError):
        encode(PasswordReply(id=1, password=password + "\n"))


def test_containers_are_always_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "_ACCEPTED", {})
    parses = CountingParse(monkeypatch)
    encode(ELEVATE)
    encode(ELEVATE)
    assert parses.calls == 2


def test_the_memory_of_accepted_contents_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    accepted: dict[Any, None] = {}
    monkeypatch.setattr(protocol, "_ACCEPTED", accepted)
    for n in range(3 * protocol._ACCEPTED_MAX):
        encode(ErrorReply(id=1, code=ErrorCode.INTERNAL, message=f"m{n}"))
        assert len(accepted) <= protocol._ACCEPTED_MAX


# --- framing -------------------------------------------------------------------


def test_partial_frames_across_feeds_byte_by_byte() -> None:
    data = encode(ELEVATE)
    decoder = request_decoder()
    items = [item for byte in data for item in decoder.feed(bytes([byte]))]
    assert items == [ELEVATE]
    assert decoder.buffered == 0


def test_multiple_frames_in_one_feed_keep_their_order() -> None:
    data = b"".join(encode(message) for message in REQUESTS)
    assert request_decoder().feed(data) == REQUESTS


def test_frames_split_at_arbitrary_points() -> None:
    data = b"".join(encode(message) for message in REPLIES)
    decoder = reply_decoder()
    items = decoder.feed(data[:7]) + decoder.feed(data[7:200]) + decoder.feed(data[200:])
    assert items == REPLIES


def test_crlf_line_endings_are_tolerated() -> None:
    data = b"".join(encode(message)[:-1] + b"\r\n" for message in REQUESTS[:3])
    assert request_decoder().feed(data) == REQUESTS[:3]


def test_blank_lines_are_skipped() -> None:
    decoder = request_decoder()
    assert decoder.feed(b"\n\r\n  \t \n" + encode(PingRequest(id=1)) + b"\n") == [PingRequest(id=1)]


def test_accepts_bytearray_and_memoryview() -> None:
    data = encode(PingRequest(id=1))
    decoder = request_decoder()
    assert decoder.feed(bytearray(data)) + decoder.feed(memoryview(data)) == [PingRequest(id=1)] * 2


def test_an_error_frame_does_not_disturb_the_next_ones() -> None:
    data = encode(PingRequest(id=1)) + b"garbage\n" + b'{"v":2}\n' + encode(PingRequest(id=2))
    items = request_decoder().feed(data)
    assert items[0] == PingRequest(id=1)
    assert [item.code for item in items[1:3] if isinstance(item, MessageError)] == [
        "bad_json",
        "bad_version",
    ]
    assert items[3] == PingRequest(id=2)


def test_a_frame_of_exactly_the_limit_is_accepted_one_byte_more_is_not() -> None:
    def ping_of(size: int) -> bytes:
        prefix = b'{"v":1,"id":1,"op":"ping","pad":"'
        return prefix + b"x" * (size - len(prefix) - 3) + b'"}\n'

    assert len(ping_of(MAX_FRAME)) == MAX_FRAME
    decoder = request_decoder()
    assert decoder.feed(ping_of(MAX_FRAME)) == [PingRequest(id=1)]
    [error] = decoder.feed(ping_of(MAX_FRAME + 1))
    assert isinstance(error, MessageError)
    assert error.code == "frame_too_large"
    assert error.request_id is None


def test_oversize_frame_in_one_feed_then_recovery() -> None:
    decoder = request_decoder()
    data = b"x" * (3 * MAX_FRAME) + b"\n" + encode(PingRequest(id=2))
    [error, ping] = decoder.feed(data)
    assert isinstance(error, MessageError)
    assert error.code == "frame_too_large"
    assert ping == PingRequest(id=2)


def test_oversize_frame_across_feeds_is_reported_once_without_buffering_it() -> None:
    decoder = request_decoder()
    assert decoder.feed(b'{"v":1,"id":1,"op":"ping","pad":"') == []
    reported = []
    for _ in range(10):  # 10 x 16 KiB: far past the limit, never buffered
        reported += decoder.feed(b"y" * 16384)
        assert decoder.buffered < MAX_FRAME
    assert [item.code for item in reported if isinstance(item, MessageError)] == ["frame_too_large"]
    assert len(reported) == 1
    assert decoder.buffered == 0  # skipping: nothing held
    assert decoder.feed(b'"}\n' + encode(PingRequest(id=3))) == [PingRequest(id=3)]


def test_oversize_frame_ending_exactly_at_a_feed_boundary() -> None:
    decoder = request_decoder()
    [error] = decoder.feed(b"z" * MAX_FRAME)
    assert isinstance(error, MessageError)
    assert error.code == "frame_too_large"
    assert decoder.feed(b"\n") == []  # the newline ends the skipped frame
    assert decoder.feed(encode(PingRequest(id=4))) == [PingRequest(id=4)]


def test_non_utf8_non_object_and_wrong_version_frames_through_the_decoder() -> None:
    items = request_decoder().feed(b"\x80abc\n[]\n{}\n" + frame({"v": 0, "id": "a", "op": "ping"}))
    codes = [(item.code, item.request_id) for item in items if isinstance(item, MessageError)]
    assert codes == [
        ("bad_json", None),
        ("bad_json", None),
        ("bad_version", None),
        ("bad_version", "a"),
    ]


def test_eof_inside_a_frame_is_reported() -> None:
    decoder = request_decoder()
    assert decoder.feed(b'{"v":1,"id":1,') == []
    [error] = decoder.feed_eof()
    assert isinstance(error, MessageError)
    assert error.code == "bad_json"
    assert "without a newline" in error.message
    assert decoder.buffered == 0
    assert decoder.feed_eof() == []


def test_eof_after_whitespace_or_while_skipping_reports_nothing_more() -> None:
    decoder = request_decoder()
    decoder.feed(encode(PingRequest(id=1)) + b"  ")
    assert decoder.feed_eof() == []
    decoder.feed(b"x" * (MAX_FRAME + 5))
    assert decoder.feed_eof() == []
    assert decoder.feed(encode(PingRequest(id=2))) == [PingRequest(id=2)]


def test_a_smaller_limit_can_be_configured() -> None:
    decoder = request_decoder(max_frame=32)
    ok = encode(PingRequest(id=1))
    assert len(ok) <= 32
    assert decoder.feed(ok) == [PingRequest(id=1)]
    [error] = decoder.feed(encode(PingRequest(id="a-rather-long-identifier")))
    assert isinstance(error, MessageError)
    assert "exceeds 32 bytes" in error.message
    with pytest.raises(ValueError, match="max_frame"):
        FrameDecoder(parse_request, max_frame=1)


def test_load_frame_returns_plain_json() -> None:
    assert load_frame(b'{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    with pytest.raises(MessageError, match="bad_json"):
        load_frame(b"{'single': 'quotes'}")


# --- the specification's examples ----------------------------------------------------

SPEC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
EXAMPLE_LINE = re.compile(r"^(?:\w+ +)?([→←]) (\{.*\})$")


def test_every_example_frame_in_the_specification_is_what_the_codec_does() -> None:
    examples = [
        (match[1], match[2])
        for line in SPEC.read_text(encoding="utf-8").splitlines()
        if (match := EXAMPLE_LINE.match(line.rstrip()))
    ]
    assert len(examples) >= 25
    for (arrow, body), (next_arrow, next_body) in zip(
        examples, [*examples[1:], ("", "")], strict=True
    ):
        decoder = decoder_for(Direction.TO_BROKER if arrow == "→" else Direction.TO_CLIENT)
        [item] = decoder.feed(body.encode() + b"\n")
        if isinstance(item, MessageError):
            # A deliberate mistake: the documented answer is exactly the codec's.
            assert next_arrow == "←", body
            assert item.to_reply().to_json() == json.loads(next_body), body
        else:
            assert not isinstance(item, UnknownReply), body
            encoded = json.loads(encode(item))
            assert encoded | json.loads(body) == encoded, body  # same values, nulls spelled out
