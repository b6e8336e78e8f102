"""Sans-I/O codec of the elevation broker's wire protocol v1 (spec: ``docs/protocol.md``).

No sockets, no event loop (like h11 or jeepney): the asyncio server, the
blocking clients and the tests share this one codec.

- :func:`load_frame` decodes one frame's bytes (the byte-stream splitting
  lives in :mod:`registry_core.broker.wire.framing`).
- :func:`parse_request` / :func:`parse_reply` validate a decoded JSON value
  strictly and raise :class:`MessageError` naming the field and the offending
  value (secrets are never echoed).  Unknown extra fields are ignored, so later
  revisions of v1 can add optional fields.
- :func:`encode` validates a message the same way before framing it, so a peer
  never sends what the other side would reject.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.messages import ErrorCode, JsonObject, MessageError, RequestId

# Tool names as the registry allows them, hosts as DNS names or IP
# literals, grants as URL-safe base64 (secrets.token_urlsafe), codes as identifiers.
_TOOL_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,254}")
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")
_GRANT_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_CODE_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_ABSOLUTE_RE = re.compile(r"/[^\x00]*")
# A client label is shown in a dialog: printable text only, no control characters.
_CLIENT_RE = re.compile(
    rf"[^\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]{{1,{m.MAX_CLIENT_LENGTH}}}"
)
_MISSING: Any = object()
CLIENT_EXPECTED = f"a client name (1-{m.MAX_CLIENT_LENGTH} printable characters)"
E = TypeVar("E", bound=enum.Enum)


class _Fields:
    """Reads one message's fields; every failure is a bad_request naming field and value."""

    def __init__(self, obj: JsonObject, request_id: RequestId | None) -> None:
        self.obj = obj
        self.request_id = request_id
        self.op = ""  # known once the envelope is checked

    def fail(self, name: str, expected: str, value: Any, *, secret: bool = False) -> NoReturn:
        got = "(value not shown)" if secret else f"got {m.describe_value(value)}"
        where = f"{self.op}: field {name!r}" if self.op else f"field {name!r}"
        message = f"{where} must be {expected}, {got}"
        raise MessageError(ErrorCode.BAD_REQUEST, message, self.request_id)

    def get(self, name: str, *, required: bool = True) -> Any:
        value = self.obj.get(name, _MISSING)
        if value is _MISSING and required:
            where = f"{self.op}: missing" if self.op else "missing"
            message = f"{where} required field {name!r}"
            raise MessageError(ErrorCode.BAD_REQUEST, message, self.request_id)
        return None if value is _MISSING else value  # optional null == absent

    def id(self) -> RequestId:
        if self.request_id is None:
            self.fail("id", f"a string or integer for op {self.op!r}", None)
        return self.request_id

    def text(
        self,
        name: str,
        expected: str = "a string",
        *,
        pattern: re.Pattern[str] | None = None,
        forbid: str = "",
        secret: bool = False,
    ) -> str:
        value = self.get(name)
        if (
            not isinstance(value, str)
            or (pattern is not None and not pattern.fullmatch(value))
            or any(char in value for char in forbid)
        ):
            self.fail(name, expected, value, secret=secret)
        return value

    def optional_text(self, name: str, expected: str = "a string", **checks: Any) -> str | None:
        return (
            None if self.get(name, required=False) is None else self.text(name, expected, **checks)
        )

    def integer(self, name: str, low: int) -> int:
        value = self.get(name)
        if type(value) is not int or not low <= value <= m.MAX_SAFE_INT:
            self.fail(name, f"an integer from {low} to {m.MAX_SAFE_INT}", value)
        return value

    def boolean(self, name: str) -> bool:
        value = self.get(name)
        if type(value) is not bool:
            self.fail(name, "true or false", value)
        return value

    def choice(self, name: str, enum_type: type[E]) -> E:
        value = self.get(name)
        if not isinstance(value, str) or value not in _enum_values(enum_type):
            choices = [member.value for member in enum_type]
            self.fail(name, "one of " + ", ".join(map(m.describe_value, choices)), value)
        return enum_type(value)

    def text_list(self, name: str) -> tuple[str, ...]:
        value = self.get(name)
        if not isinstance(value, list) or not value:
            self.fail(name, "a non-empty array of strings", value)
        for index, item in enumerate(value):
            if not isinstance(item, str) or "\x00" in item:
                self.fail(f"{name}[{index}]", "a string without NUL", item)
        return tuple(value)

    def json_object(self, name: str) -> JsonObject:
        value = self.get(name)
        if not isinstance(value, dict):
            self.fail(name, "a JSON object", value)
        return value

    def seconds(self, name: str) -> float | None:
        value = self.get(name, required=False)
        if value is not None and (
            type(value) not in (int, float) or not 0 < value <= m.MAX_TIMEOUT
        ):
            self.fail(name, f"a number of seconds above 0 and at most {m.MAX_TIMEOUT:g}", value)
        return None if value is None else float(value)

    def grant(self) -> str:
        expected = "a grant token (16-128 characters of A-Z a-z 0-9 _ -)"
        return self.text("grant", expected, pattern=_GRANT_RE, secret=True)


@functools.cache
def _enum_values(enum_type: type[enum.Enum]) -> frozenset[Any]:
    return frozenset(member.value for member in enum_type)


def _elevate(f: _Fields) -> m.ElevateRequest:
    return m.ElevateRequest(
        id=f.id(),
        tool=f.text("tool", "a tool name ([A-Za-z0-9_.-], no leading '.')", pattern=_TOOL_RE),
        kind=f.choice("kind", m.Kind),
        argv=f.text_list("argv"),
        args=f.json_object("args"),
        cwd=f.text("cwd", "an absolute path without NUL", pattern=_ABSOLUTE_RE),
        host=f.optional_text("host", "a host name", pattern=_HOST_RE),
        code=f.optional_text("code", "a string without NUL", forbid="\x00"),
        timeout=f.seconds("timeout"),
        client=f.optional_text("client", CLIENT_EXPECTED, pattern=_CLIENT_RE),
    )


_ACTION_TOOL_EXPECTED = f"an agent tool name (1-{m.MAX_CLIENT_LENGTH} printable characters)"


def _action(f: _Fields) -> m.ActionRequest:
    display = (
        None if f.get("display", required=False) is None else f.choice("display", m.ActionDisplay)
    )
    return m.ActionRequest(
        id=f.id(),
        agent=f.text("agent", CLIENT_EXPECTED, pattern=_CLIENT_RE),
        tool=f.text("tool", _ACTION_TOOL_EXPECTED, pattern=_CLIENT_RE),
        summary=f.text("summary", "a string without NUL", forbid="\x00"),
        input=f.json_object("input"),
        cwd=f.text("cwd", "an absolute path without NUL", pattern=_ABSOLUTE_RE),
        pattern_kind=f.choice("pattern_kind", m.PatternKind),
        pattern=f.text("pattern", "a string without NUL", forbid="\x00"),
        detail=f.optional_text("detail", "a string without NUL", forbid="\x00"),
        display=display,
        command=f.optional_text("command", "a string without NUL", forbid="\x00"),
        path=f.optional_text("path", "an absolute path without NUL", pattern=_ABSOLUTE_RE),
        session=f.optional_text("session", CLIENT_EXPECTED, pattern=_CLIENT_RE),
        timeout=f.seconds("timeout"),
    )


def _decision(f: _Fields) -> m.DecisionReply:
    reply = m.DecisionReply(
        id=f.id(),
        decision=f.choice("decision", m.Decision),
        reason=f.text("reason"),
        by=f.choice("by", m.DecidedBy),
        remember=f.optional_text("remember"),
        grant=None if f.get("grant", required=False) is None else f.grant(),
    )
    if reply.grant is not None and reply.decision is m.Decision.DENY:
        f.fail("grant", "null when the decision is 'deny'", None, secret=True)
    return reply


def _error(f: _Fields) -> m.ErrorReply:
    code = f.text("code", "an error code ([a-z][a-z0-9_]*)", pattern=_CODE_RE)
    known = code in {member.value for member in ErrorCode}
    message = f.text("message")
    return m.ErrorReply(id=f.request_id, code=ErrorCode(code) if known else code, message=message)


_REQUEST_PARSERS: dict[str, Callable[[_Fields], m.Request]] = {
    "ping": lambda f: m.PingRequest(id=f.id()),
    "elevate": _elevate,
    "action": _action,
    "askpass": lambda f: m.AskpassRequest(
        id=f.id(), grant=f.grant(), prompt=f.text("prompt"), attempt=f.integer("attempt", 1)
    ),
    "sudo_result": lambda f: m.SudoResultRequest(
        id=f.id(),
        grant=f.grant(),
        exit_code=f.integer("exit_code", -m.MAX_SAFE_INT),
        auth_failed=f.boolean("auth_failed"),
    ),
    "status": lambda f: m.StatusRequest(id=f.id()),
    "open_browser": lambda f: m.OpenBrowserRequest(id=f.id()),
}

_REPLY_PARSERS: dict[str, Callable[[_Fields], m.Reply]] = {
    "pong": lambda f: m.PongReply(id=f.id()),
    "decision": _decision,
    "password": lambda f: m.PasswordReply(
        id=f.id(),
        password=f.text(
            "password", "a string without NUL, CR or LF", forbid="\x00\r\n", secret=True
        ),
    ),
    "ack": lambda f: m.AckReply(id=f.id()),
    "status": lambda f: m.StatusReply(
        id=f.id(),
        pending=f.integer("pending", 0),
        paused=f.boolean("paused"),
        version=f.text("version"),
    ),
    "progress": lambda f: m.ProgressNotice(id=f.id(), state=f.choice("state", m.ProgressState)),
    "error": _error,
}


def _envelope(obj: Any) -> _Fields:
    """Check ``v``, ``id``, ``op`` and the JSON tree; ``v`` first, echoing a readable id."""
    if not isinstance(obj, dict):
        got = "an array" if isinstance(obj, list) else m.describe_value(obj)
        raise MessageError(ErrorCode.BAD_JSON, f"a frame must hold a JSON object, got {got}")
    raw_id = obj.get("id", _MISSING)
    fields = _Fields(obj, raw_id if m.is_request_id(raw_id) else None)
    version = obj.get("v", _MISSING)
    if type(version) is not int or version != m.PROTOCOL_VERSION:
        got = "no 'v' field" if version is _MISSING else f"'v' = {m.describe_value(version)}"
        message = f"unsupported protocol version ({got}); this peer speaks v{m.PROTOCOL_VERSION}"
        raise MessageError(ErrorCode.BAD_VERSION, message, fields.request_id)
    if fields.get("id") is not None and fields.request_id is None:
        fields.fail(
            "id", f"a string of at most {m.MAX_ID_LENGTH} characters or a safe integer", raw_id
        )
    m.check_json_tree(obj, fields.request_id)
    fields.op = fields.text("op")
    return fields


def parse_request(obj: Any) -> m.Request:
    """Validate one decoded JSON value as a client -> broker message."""
    fields = _envelope(obj)
    parser = _REQUEST_PARSERS.get(fields.op)
    if parser is None:
        hint = " (sent by the broker, not to it)" if fields.op in _REPLY_PARSERS else ""
        message = f"unknown op {m.describe_value(fields.op)}{hint}"
        raise MessageError(ErrorCode.UNKNOWN_OP, message, fields.request_id)
    return parser(fields)


def parse_reply(obj: Any) -> m.Reply:
    """Validate one decoded JSON value as a broker -> client message.

    An unknown ``op`` is no error here but an :class:`UnknownReply` that clients
    skip, so newer brokers can add notices.
    """
    fields = _envelope(obj)
    parser = _REPLY_PARSERS.get(fields.op)
    return m.UnknownReply(id=fields.request_id, op=fields.op) if parser is None else parser(fields)


def parse_message(obj: Any, direction: m.Direction = m.Direction.TO_BROKER) -> m.Message:
    """Validate one decoded JSON value as a message travelling in ``direction``."""
    return parse_request(obj) if direction is m.Direction.TO_BROKER else parse_reply(obj)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> JsonObject:
    # Parsers disagree on which duplicate wins, so two components could see two
    # different requests in one frame; refusing duplicates removes the ambiguity.
    obj: JsonObject = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {m.describe_value(key)}")
        seen.add(key)
    raise AssertionError("unreachable: fewer keys than pairs means a duplicate")


def _finite_float(text: str) -> float:  # also gets NaN, Infinity, -Infinity
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {m.describe_value(text)} is out of range")
    return value


# Built once: json.loads/json.dumps with options build a new coder per call.
# Neither keeps state between calls that could mix two frames.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicate_keys, parse_constant=_finite_float, parse_float=_finite_float
)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def load_frame(line: bytes) -> Any:
    """Decode one frame (without its newline) into a JSON value.

    Raises :class:`MessageError` ``bad_json`` for invalid UTF-8 or JSON,
    NaN/Infinity, duplicate keys and absurd nesting.
    """
    try:
        text = line.decode("utf-8")
        if text.startswith("\ufeff"):  # what json.loads says about a BOM
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _DECODER.decode(text)
    except UnicodeDecodeError as error:
        raise _bad_json(f"frame is not valid UTF-8 (byte {error.start})") from error
    except json.JSONDecodeError as error:
        raise _bad_json(f"invalid JSON at column {error.colno}: {error.msg}") from error
    except RecursionError as error:
        raise _bad_json("JSON nests too deeply") from error
    except ValueError as error:  # the hooks above; integers beyond Python's digit limit
        raise _bad_json(f"invalid JSON: {error}") from error


def _bad_json(problem: str) -> MessageError:
    return MessageError(ErrorCode.BAD_JSON, problem)


def encode(message: m.Message, *, max_frame: int = m.MAX_FRAME) -> bytes:
    """One frame (compact JSON + ``\\n``) for ``message``, validated like a received one.

    Raises :class:`MessageError`: ``bad_request`` naming the invalid field, or
    ``frame_too_large`` when the frame would exceed ``max_frame`` bytes.

    Validation is the receiver's own parse of the frame's JSON, so it cannot
    drift from what a peer accepts.
    """
    request_id = message.id if m.is_request_id(message.id) else None
    obj = message.to_json()
    parse_message(obj, message.direction)
    try:
        text = _ENCODER.encode(obj)
    except ValueError as error:  # an integer in args beyond Python's digit limit
        raise MessageError(ErrorCode.BAD_REQUEST, str(error), request_id) from error
    data = text.encode("utf-8") + b"\n"
    if len(data) > max_frame:
        message_text = f"{message.op} message is {len(data)} bytes, the limit is {max_frame}"
        raise MessageError(ErrorCode.FRAME_TOO_LARGE, message_text, request_id)
    return data
