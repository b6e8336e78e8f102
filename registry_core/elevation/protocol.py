"""Sans-I/O codec of the elevation broker's wire protocol v1 (spec: ``docs/protocol.md``).

No sockets, no event loop (like h11 or jeepney): the asyncio server, the
blocking clients and the tests share this one codec.

- :func:`load_frame` decodes one frame's bytes (the byte-stream splitting
  lives in :mod:`registry_core.elevation.framing`).
- :func:`parse_request` / :func:`parse_reply` validate a decoded JSON value
  strictly and raise :class:`MessageError` naming the field and the offending
  value (secrets are never echoed).  Unknown extra fields are ignored, so later
  revisions of v1 can add optional fields.
- :func:`encode` validates a message the same way before framing it, so a peer
  never sends what the other side would reject (remembering which message
  contents it has already accepted, so a broker answering the same decision
  again checks only the new id; see there).
"""

from __future__ import annotations

import enum
import functools
import json
import math
import operator
import re
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from registry_core.elevation import messages as m
from registry_core.elevation.messages import ErrorCode, JsonObject, MessageError, RequestId

# Tool names as the registry allows them (DESIGN §3), hosts as DNS names or IP
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
    quick = _elevate_quick(f.obj, f.request_id)
    if quick is not None:
        return quick
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


_KINDS = {kind.value: kind for kind in m.Kind}


def _optional_matches(value: Any, pattern: re.Pattern[str]) -> bool:
    return value is None or (type(value) is str and pattern.fullmatch(value) is not None)


def _elevate_quick(obj: JsonObject, request_id: RequestId | None) -> m.ElevateRequest | None:
    """The common ``elevate`` (every field valid, no ``timeout``) checked in one go;
    ``None`` for anything else, which the field-by-field path then accepts or
    rejects with its precise message.  It accepts exactly what that path accepts
    (``tests/unit/elevation/test_protocol_quick.py`` compares the two)."""
    tool, kind, argv = obj.get("tool"), obj.get("kind"), obj.get("argv")
    args, cwd, code = obj.get("args"), obj.get("cwd"), obj.get("code")
    if (
        request_id is None
        or type(tool) is not str
        or _TOOL_RE.fullmatch(tool) is None
        or type(kind) is not str
        or kind not in _KINDS
        or type(argv) is not list
        or not argv
        or any(type(item) is not str or "\x00" in item for item in argv)
        or type(args) is not dict
        or type(cwd) is not str
        or _ABSOLUTE_RE.fullmatch(cwd) is None
        or not _optional_matches(obj.get("host"), _HOST_RE)
        or (code is not None and (type(code) is not str or "\x00" in code))
        or obj.get("timeout") is not None
        or not _optional_matches(obj.get("client"), _CLIENT_RE)
    ):
        return None
    return m.ElevateRequest(
        id=request_id,
        tool=tool,
        kind=_KINDS[kind],
        argv=tuple(argv),
        args=args,
        cwd=cwd,
        host=obj.get("host"),
        code=code,
        client=obj.get("client"),
    )


def _elevate_frame_quick(obj: JsonObject) -> m.ElevateRequest | None:
    """A common ``elevate`` frame checked whole, envelope included (``v`` 1 and a
    valid id, then :func:`_elevate_quick`); ``None``: the general path decides.
    Only for a tree known to pass the walk (``tree_checked``)."""
    version, raw_id = obj.get("v"), obj.get("id")
    if type(version) is not int or version != m.PROTOCOL_VERSION or not m.is_request_id(raw_id):
        return None
    return _elevate_quick(obj, raw_id)


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


def _envelope(obj: Any, tree_checked: bool = False) -> _Fields:
    """Check ``v``, ``id``, ``op`` and the JSON tree; ``v`` first, echoing a readable id.

    ``tree_checked``: the caller vouches for the tree (see :func:`plain_frame`)."""
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
    if not tree_checked:
        m.check_json_tree(obj, fields.request_id)
    fields.op = fields.text("op")
    return fields


def parse_request(obj: Any, *, tree_checked: bool = False) -> m.Request:
    """Validate one decoded JSON value as a client -> broker message.

    ``tree_checked``: ``obj`` is what :func:`load_frame` made of a line for which
    :func:`plain_frame` holds, so the walk of :func:`messages.check_json_tree`
    is known to pass and is skipped."""
    if tree_checked and type(obj) is dict and obj.get("op") == "elevate":
        quick = _elevate_frame_quick(obj)
        if quick is not None:
            return quick
    fields = _envelope(obj, tree_checked)
    parser = _REQUEST_PARSERS.get(fields.op)
    if parser is None:
        hint = " (sent by the broker, not to it)" if fields.op in _REPLY_PARSERS else ""
        message = f"unknown op {m.describe_value(fields.op)}{hint}"
        raise MessageError(ErrorCode.UNKNOWN_OP, message, fields.request_id)
    return parser(fields)


def parse_reply(obj: Any, *, tree_checked: bool = False) -> m.Reply:
    """Validate one decoded JSON value as a broker -> client message.

    An unknown ``op`` is no error here but an :class:`UnknownReply` that clients
    skip, so newer brokers can add notices.  ``tree_checked``: as for
    :func:`parse_request`.
    """
    fields = _envelope(obj, tree_checked)
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


def plain_frame(line: bytes) -> bool:
    """Whether :func:`load_frame` of ``line`` (if it succeeds) certainly passes
    :func:`messages.check_json_tree`, judged from the bytes alone.

    The JSON decoder makes only dicts with string keys, lists, strings, ints,
    finite floats (:func:`_finite_float`), booleans and ``None``; a string can
    hold an unpaired surrogate only through a ``\\u`` escape (the UTF-8 decoder
    refuses encoded surrogates); and every level of nesting needs its own
    ``{`` or ``[`` byte.  So a line without ``\\u`` and with at most
    :data:`messages.MAX_DEPTH` brackets needs no walk of its tree."""
    return b"\\u" not in line and line.count(b"{") + line.count(b"[") <= m.MAX_DEPTH


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


_ACCEPTED_MAX = 512
# Contents encode has validated (see there), each with its frame after the id.
_ACCEPTED: dict[tuple[Any, ...], bytes] = {}
_PLAIN_TYPES = frozenset({str, int, bool, type(None)})
_FRAME_HEAD = b'{"v":%d,"id":' % m.PROTOCOL_VERSION
_CONTENT_GETTERS: dict[type, tuple[Callable[[Any], tuple[Any, ...]], tuple[bool, ...]]] = {}


def _content_getter(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], tuple[bool, ...]]:
    """Every field but the id of message class ``cls`` at once, and which are secret."""
    found = _CONTENT_GETTERS.get(cls)
    if found is None:
        fields = [(name, secret) for name, secret in m.message_fields(cls) if name != "id"]
        names = tuple(name for name, _secret in fields)

        def values(message: Any) -> tuple[Any, ...]:
            return tuple(getattr(message, name) for name in names)

        if len(names) > 1:
            values = operator.attrgetter(*names)  # type: ignore[assignment]
        found = _CONTENT_GETTERS[cls] = (values, tuple(secret for _name, secret in fields))
    return found


def _content_key(message: m.Message) -> tuple[Any, ...] | None:
    """Every field's exact type and value except the id (only whether it is null),
    or ``None`` when the content must not be remembered: a container or float
    (whose JSON can differ between equal values), or a set secret (grant,
    password), which no cache may hold."""
    values, secrets = _content_getter(type(message))
    key: list[Any] = [type(message), message.id is None]
    for value, secret in zip(values(message), secrets, strict=True):
        kind = type(value)
        if (secret and value is not None) or not (
            kind in _PLAIN_TYPES or isinstance(value, enum.Enum)
        ):
            return None
        key += (kind, value)
    return tuple(key)


def _frame_head(request_id: RequestId | None) -> bytes:
    """A frame's bytes up to and including its id (``to_json`` puts v and id first)."""
    if type(request_id) is int:  # an integer's JSON is its decimal text
        return _FRAME_HEAD + b"%d" % request_id
    return _FRAME_HEAD + _ENCODER.encode(request_id).encode("utf-8")


def frame_rest(message: m.Message) -> bytes | None:
    """The bytes after the id of ``message``'s frame (:func:`encode`), for a message
    with a valid request id; with :func:`with_id` they give the same content's frame
    under another valid id.  ``None``: the frame does not start with its id."""
    if not m.is_request_id(message.id):
        return None
    data, head = encode(message), _frame_head(message.id)
    return data[len(head) :] if data.startswith(head) else None


def with_id(request_id: RequestId, rest: bytes) -> bytes:
    """The frame of a :func:`frame_rest` under ``request_id`` (a valid request id)."""
    return _frame_head(request_id) + rest


def encode(message: m.Message, *, max_frame: int = m.MAX_FRAME) -> bytes:
    """One frame (compact JSON + ``\\n``) for ``message``, validated like a received one.

    Raises :class:`MessageError`: ``bad_request`` naming the invalid field, or
    ``frame_too_large`` when the frame would exceed ``max_frame`` bytes.

    Validation is the receiver's own parse of the frame's JSON, so it cannot
    drift from what a peer accepts.  Its verdict depends only on the fields'
    types and values, so once a content passed (a broker repeating a policy's
    decision, a progress notice) the same content with another valid id is
    not parsed again: only the id is checked, and the frame is that content's
    frame with the new id (its bytes after the id depend on the content alone).
    Contents holding containers, floats or a secret are always parsed and
    encoded (and a secret never remembered); at most :data:`_ACCEPTED_MAX`
    contents are remembered.  The size limit is checked on every call.
    """
    request_id = message.id if m.is_request_id(message.id) else None
    key = _content_key(message)
    id_ok = message.id is None or request_id is not None
    rest = _ACCEPTED.get(key) if key is not None and id_ok else None
    if rest is not None:
        data = _frame_head(request_id) + rest
    else:
        obj = message.to_json()
        parse_message(obj, message.direction)
        try:
            text = _ENCODER.encode(obj)
        except ValueError as error:  # an integer in args beyond Python's digit limit
            raise MessageError(ErrorCode.BAD_REQUEST, str(error), request_id) from error
        data = text.encode("utf-8") + b"\n"
        if key is not None:
            head = _frame_head(request_id)
            if data.startswith(head):
                if len(_ACCEPTED) >= _ACCEPTED_MAX:
                    _ACCEPTED.clear()
                _ACCEPTED[key] = data[len(head) :]
    if len(data) > max_frame:
        message_text = f"{message.op} message is {len(data)} bytes, the limit is {max_frame}"
        raise MessageError(ErrorCode.FRAME_TOO_LARGE, message_text, request_id)
    return data
