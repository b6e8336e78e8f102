"""The messages of the elevation broker's wire protocol v1, as typed values.

One frozen dataclass per ``op`` and direction; enums for every fixed choice;
the wire constants; :class:`MessageError`, the typed error every codec
function raises; and the rules every JSON value in a message obeys.  Nothing
here parses or does I/O: turning bytes into these objects (and back) is
:mod:`registry_core.broker.wire.codec`'s job, and the specification a third
party implements is ``docs/protocol.md``.

``op`` and ``direction`` are class attributes: ``status`` exists in both
directions (a request without fields, a reply with fields), so the op name
alone does not say which class a frame is.  ``to_json()`` builds the wire
object (``v``, ``id``, ``op`` first, then the fields in declaration order;
optional fields are always written, as ``null`` when unset).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias, cast

from registry_core.broker.wire import kinds
from registry_core.errors import ProtocolError

PROTOCOL_VERSION = 1
"""The value of ``"v"`` in every v1 message."""

MAX_FRAME = 65536
"""Largest frame in bytes, the terminating newline included."""

MAX_DEPTH = 64
"""Deepest nesting of objects/arrays in one message (the message itself is 1)."""

MAX_ID_LENGTH = 256
"""Longest string ``id`` in characters."""

MAX_SAFE_INT = 2**53 - 1
"""Integers on the wire stay within ±this, so every JSON implementation keeps them exact."""

REQUEST_CODE_TOOL = "execute_code"
"""The pseudo tool of ``ollie-elevate`` (ollie-core's ``x/elevate`` plugin): bash code."""

MAX_CLIENT_LENGTH = 128
"""Longest ``client`` label (an agent's name, e.g. an MCP client's) in characters."""

MAX_TIMEOUT = 86400.0
"""Largest ``timeout`` an ``elevate`` request may carry (one day, in seconds)."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SHOW_LIMIT = 60

JsonObject: TypeAlias = dict[str, Any]
RequestId: TypeAlias = str | int
"""A client-chosen request id: a string or an integer, echoed in every related reply."""


def is_request_id(value: object) -> bool:
    """Whether ``value`` is a valid v1 id (a short valid-Unicode string or a safe integer)."""
    if type(value) is int:
        return -MAX_SAFE_INT <= value <= MAX_SAFE_INT
    if not isinstance(value, str) or len(value) > MAX_ID_LENGTH:
        return False
    return _SURROGATE_RE.search(value) is None


class Direction(enum.Enum):
    """Who sends a message: the codec validates each direction's ops separately."""

    TO_BROKER = "to_broker"
    TO_CLIENT = "to_client"


Kind = kinds.Kind  # defined apart (kinds.py); part of the protocol's vocabulary


class PatternKind(enum.StrEnum):
    """What a remembered ``action`` choice covers (see ``docs/protocol.md`` §6.9)."""

    PROGRAM = "program"  # a shell command whose program (first word) is the pattern
    PATH = "path"  # a file at the pattern (a file) or beneath it (a directory ending in /)
    EXACT = "exact"  # exactly this summary (the command line, the URL...)


class ActionDisplay(enum.StrEnum):
    """How the dialog shows an ``action``'s ``detail``."""

    COMMAND = "command"
    DIFF = "diff"
    TEXT = "text"


class Decision(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class DecidedBy(enum.StrEnum):
    """Who or what made a decision."""

    USER = "user"
    POLICY = "policy"
    TIMEOUT = "timeout"
    NO_FRONT_END = "no_front_end"
    SHUTDOWN = "shutdown"
    CLIENT_GONE = "client_gone"
    PAUSED = "paused"


class ProgressState(enum.StrEnum):
    WAITING_FOR_USER = "waiting_for_user"
    NOTIFIED = "notified"


class ErrorCode(enum.StrEnum):
    """The ``code`` of an ``error`` message.  Clients must accept codes not listed here."""

    BAD_JSON = "bad_json"
    FRAME_TOO_LARGE = "frame_too_large"
    BAD_VERSION = "bad_version"
    BAD_REQUEST = "bad_request"
    UNKNOWN_OP = "unknown_op"
    UNSUPPORTED = "unsupported"
    PEER_UID = "peer_uid"
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_UNAVAILABLE = "tool_unavailable"
    NO_GRANT = "no_grant"
    SANDBOXED_REQUESTER = "sandboxed_requester"
    SHUTTING_DOWN = "shutting_down"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    TOO_MANY_REQUESTS = "too_many_requests"
    INTERNAL = "internal"


class MessageError(ProtocolError):
    """A frame or message that breaks the protocol.

    ``code`` is an :class:`ErrorCode`; ``request_id`` is the offending
    message's ``id`` when it could be read (else ``None``), so the peer can
    be answered with :meth:`to_reply`.
    """

    def __init__(self, code: ErrorCode, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(code, message)
        self.error_code = code
        self.request_id = request_id

    def to_reply(self) -> ErrorReply:
        """The ``error`` message that answers this problem on the wire."""
        return ErrorReply(id=self.request_id, code=self.error_code, message=self.message)


# --- JSON values -----------------------------------------------------------------


def describe_value(value: Any) -> str:
    """A short ASCII rendering of ``value`` for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = ascii(value)
    return text if len(text) <= _SHOW_LIMIT else text[: _SHOW_LIMIT - 3] + "..."


def check_json_tree(obj: JsonObject, request_id: RequestId | None) -> None:
    """Raise ``bad_request`` unless every value in ``obj`` is plain JSON, nests at most
    :data:`MAX_DEPTH` deep and is valid Unicode (no unpaired surrogates); the
    error names the offending field."""
    # Each entry: a value, its depth, and where it is (the parent's entry and the key or
    # index), so a path is spelled only for the field it names.  The common values
    # (exact str, int, bool, None) are let through on their type alone; an ASCII
    # string cannot hold a surrogate, so only other strings are searched.
    stack: list[tuple[Any, int, Any, Any]] = [(obj, 1, None, None)]
    while stack:
        entry = stack.pop()
        value, depth = entry[0], entry[1]
        kind = type(value)
        if kind is str:
            if value.isascii() or not _SURROGATE_RE.search(value):
                continue
        elif kind is int or kind is bool or value is None:
            continue
        problem = ""
        if isinstance(value, dict | list) and depth > MAX_DEPTH:
            problem = f"nests deeper than {MAX_DEPTH} levels"
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or (not key.isascii() and _SURROGATE_RE.search(key)):
                    problem = f"has a key that is not valid Unicode text: {describe_value(key)}"
                    break
                stack.append((item, depth + 1, entry, key))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, entry, i) for i, item in enumerate(value))
        elif isinstance(value, str) and _SURROGATE_RE.search(value):
            problem = "holds an unpaired surrogate (not valid Unicode)"
        elif isinstance(value, float) and not math.isfinite(value):
            problem = f"must be a finite number, got {value!r}"
        elif not isinstance(value, str | int | float | type(None)):
            problem = f"is not a JSON value: {type(value).__name__}"
        if problem:
            path = _path(entry)
            where = f"field {path!r}" if path else "the message"
            raise MessageError(ErrorCode.BAD_REQUEST, f"{where} {problem}", request_id)


def _path(entry: tuple[Any, int, Any, Any]) -> str:
    """Where the walk's ``entry`` is: ``args.items[2]`` (``""``: the message itself)."""
    parts: list[str] = []
    while entry[2] is not None:
        key = entry[3]
        if type(key) is int:
            parts.append(f"[{key}]")
        else:
            name = key if key.isidentifier() else describe_value(key)
            parts.append(f".{name}")
        entry = entry[2]
    return "".join(reversed(parts)).removeprefix(".")


_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def message_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(name, secret)`` for each field of the message class ``cls``, in declaration
    order; a secret field (a grant, a password) is one kept out of the repr."""
    found = _FIELDS.get(cls)
    if found is None:
        specs = dataclasses.fields(cast(Any, cls))
        found = _FIELDS[cls] = tuple((spec.name, not spec.repr) for spec in specs)
    return found


class _Message:
    """Behaviour shared by every message class."""

    __slots__ = ()
    op: ClassVar[str]
    direction: ClassVar[Direction]
    id: RequestId | None

    def to_json(self) -> JsonObject:
        """The JSON object sent on the wire: envelope first, then every field in order."""
        obj: JsonObject = {"v": PROTOCOL_VERSION, "id": self.id, "op": self.op}
        for name, _secret in message_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            obj.setdefault(name, value)
        return obj

    def encode(self) -> bytes:
        """This message as one validated frame (see :func:`protocol.encode`)."""
        from registry_core.broker.wire.codec import encode

        return encode(self)  # type: ignore[arg-type]  # every subclass is in Message


class _ToBroker(_Message):
    __slots__ = ()
    direction: ClassVar[Direction] = Direction.TO_BROKER


class _ToClient(_Message):
    __slots__ = ()
    direction: ClassVar[Direction] = Direction.TO_CLIENT


# --- client -> broker ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PingRequest(_ToBroker):
    op: ClassVar[str] = "ping"
    id: RequestId


@dataclass(frozen=True, kw_only=True)
class ElevateRequest(_ToBroker):
    """Ask to run ``tool`` outside the sandbox (``sandbox``) or as root (``sudo``)."""

    op: ClassVar[str] = "elevate"
    id: RequestId
    tool: str
    kind: Kind
    argv: tuple[str, ...]
    args: JsonObject = field(hash=False)
    cwd: str
    host: str | None = None  # None: the broker's own host
    code: str | None = None  # ollie-elevate's execute_code: the full bash code
    timeout: float | None = None  # seconds the requester waits; None: broker default
    client: str | None = None  # the agent/client the request came through (its own claim)


@dataclass(frozen=True, kw_only=True)
class ActionRequest(_ToBroker):
    """An agent's own action (a shell command, a file edit...) awaiting a person's yes."""

    op: ClassVar[str] = "action"
    id: RequestId
    agent: str
    tool: str
    summary: str
    input: JsonObject = field(hash=False)
    cwd: str
    pattern_kind: PatternKind
    pattern: str
    detail: str | None = None
    display: ActionDisplay | None = None
    command: str | None = None
    path: str | None = None
    session: str | None = None
    timeout: float | None = None


@dataclass(frozen=True, kw_only=True)
class AskpassRequest(_ToBroker):
    """``ollie-askpass`` (run by ``sudo -A``) asks for the password of a grant."""

    op: ClassVar[str] = "askpass"
    id: RequestId
    grant: str = field(repr=False)
    prompt: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class SudoResultRequest(_ToBroker):
    """The dispatcher reports how ``sudo`` ended for a grant."""

    op: ClassVar[str] = "sudo_result"
    id: RequestId
    grant: str = field(repr=False)
    exit_code: int
    auth_failed: bool


@dataclass(frozen=True, kw_only=True)
class StatusRequest(_ToBroker):
    op: ClassVar[str] = "status"
    id: RequestId


@dataclass(frozen=True, kw_only=True)
class OpenBrowserRequest(_ToBroker):
    """Ask a running tray to show its Tool Browser."""

    op: ClassVar[str] = "open_browser"
    id: RequestId


# --- broker -> client ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PongReply(_ToClient):
    op: ClassVar[str] = "pong"
    id: RequestId


@dataclass(frozen=True, kw_only=True)
class DecisionReply(_ToClient):
    """The answer to ``elevate`` (and a refusal of ``askpass``).

    ``grant`` is set only when a ``sudo`` request is allowed: the single-use
    token the requester hands to ``ollie-askpass`` through the environment.
    """

    op: ClassVar[str] = "decision"
    id: RequestId
    decision: Decision
    reason: str
    by: DecidedBy
    remember: str | None = None
    grant: str | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class PasswordReply(_ToClient):
    """The sudo password, sent only to ``ollie-askpass`` and never shown in a repr."""

    op: ClassVar[str] = "password"
    id: RequestId
    password: str = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class AckReply(_ToClient):
    op: ClassVar[str] = "ack"
    id: RequestId


@dataclass(frozen=True, kw_only=True)
class StatusReply(_ToClient):
    op: ClassVar[str] = "status"
    id: RequestId
    pending: int
    paused: bool
    version: str


@dataclass(frozen=True, kw_only=True)
class ProgressNotice(_ToClient):
    """Sent by the broker, unasked, while the request ``id`` is pending."""

    op: ClassVar[str] = "progress"
    id: RequestId
    state: ProgressState


@dataclass(frozen=True, kw_only=True)
class ErrorReply(_ToClient):
    """A typed error; ``id`` is ``None`` when the offending frame had no readable id."""

    op: ClassVar[str] = "error"
    id: RequestId | None
    code: str  # an ErrorCode when known; newer brokers may send other codes
    message: str

    @property
    def error_code(self) -> ErrorCode | None:
        """The code as an :class:`ErrorCode`, or ``None`` for a code this version does not know."""
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None


@dataclass(frozen=True, kw_only=True)
class UnknownReply(_ToClient):
    """A broker message whose ``op`` this version does not know: clients skip it silently."""

    id: RequestId | None
    op: str  # type: ignore[misc]  # an instance field here, a class constant elsewhere


Request: TypeAlias = (
    PingRequest
    | ElevateRequest
    | ActionRequest
    | AskpassRequest
    | SudoResultRequest
    | StatusRequest
    | OpenBrowserRequest
)
"""Every message a client sends to the broker."""

Reply: TypeAlias = (
    PongReply
    | DecisionReply
    | PasswordReply
    | AckReply
    | StatusReply
    | ProgressNotice
    | ErrorReply
    | UnknownReply
)
"""Every message the broker sends to a client (replies and unasked notices)."""

Message: TypeAlias = Request | Reply
