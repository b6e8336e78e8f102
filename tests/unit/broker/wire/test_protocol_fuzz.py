"""Property tests of the elevation protocol codec: garbage never breaks it, valid data survives."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_helpers import decoder_for, frame, outcome

from registry_core.broker.wire.codec import encode, parse_message, parse_request
from registry_core.broker.wire.framing import FrameDecoder, request_decoder
from registry_core.broker.wire.messages import (
    MAX_FRAME,
    MAX_SAFE_INT,
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
)

FUZZ = settings(max_examples=200, deadline=None)

# --- strategies ------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
text_no_nul = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
ids = st.one_of(st.integers(-MAX_SAFE_INT, MAX_SAFE_INT), st.text(max_size=20).filter(
    lambda s: not any("\ud800" <= c <= "\udfff" for c in s)
))  # fmt: skip
grants = st.from_regex(r"[A-Za-z0-9_-]{16,128}", fullmatch=True)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=20,
)
json_objects = st.dictionaries(text, json_values, max_size=5)

elevate_requests = st.builds(
    ElevateRequest,
    id=ids,
    tool=st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,30}", fullmatch=True),
    kind=st.sampled_from(Kind),
    argv=st.lists(text_no_nul, min_size=1, max_size=5).map(tuple),
    args=json_objects,
    cwd=text_no_nul.map(lambda s: "/" + s),
    host=st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,30}", fullmatch=True),
    code=st.none() | text_no_nul,
    timeout=st.none() | st.floats(min_value=0, max_value=86400, exclude_min=True),
)
decisions = st.builds(
    DecisionReply,
    id=ids,
    decision=st.just(Decision.DENY),
    reason=text,
    by=st.sampled_from(DecidedBy),
    remember=st.none() | text,
) | st.builds(
    DecisionReply,
    id=ids,
    decision=st.just(Decision.ALLOW),
    reason=text,
    by=st.sampled_from(DecidedBy),
    remember=st.none() | text,
    grant=st.none() | grants,
)
requests: st.SearchStrategy[Message] = st.one_of(
    st.builds(PingRequest, id=ids),
    elevate_requests,
    st.builds(
        AskpassRequest, id=ids, grant=grants, prompt=text, attempt=st.integers(1, MAX_SAFE_INT)
    ),
    st.builds(
        SudoResultRequest,
        id=ids,
        grant=grants,
        exit_code=st.integers(-MAX_SAFE_INT, MAX_SAFE_INT),
        auth_failed=st.booleans(),
    ),
    st.builds(StatusRequest, id=ids),
    st.builds(OpenBrowserRequest, id=ids),
)
replies: st.SearchStrategy[Message] = st.one_of(
    st.builds(PongReply, id=ids),
    decisions,
    st.builds(
        PasswordReply,
        id=ids,
        password=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r\n")),
    ),
    st.builds(AckReply, id=ids),
    st.builds(
        StatusReply, id=ids, pending=st.integers(0, 1000), paused=st.booleans(), version=text
    ),
    st.builds(ProgressNotice, id=ids, state=st.sampled_from(ProgressState)),
    st.builds(
        ErrorReply,
        id=st.none() | ids,
        code=st.sampled_from(ErrorCode) | st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
        message=text,
    ),
)

# Byte streams that look enough like the protocol to reach deep into the parser.
fragments = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"\n", b"\r\n", b"{", b"}", b'"v":1,', b'"id":1,', b'"op":"ping"', b"\xff"]),
    st.builds(lambda n, b: b * n, st.integers(0, 3 * MAX_FRAME), st.sampled_from([b"x", b"["])),
)
streams = st.lists(fragments, max_size=12).map(b"".join)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def parse_or_error(obj: Any, direction: Direction) -> Message | MessageError:
    try:
        return parse_message(obj, direction)
    except MessageError as error:
        return error


# --- properties --------------------------------------------------------------------


@FUZZ
@given(data=streams, cuts=st.lists(st.integers(0, 10**6), max_size=20))
def test_arbitrary_bytes_in_arbitrary_chunks_never_raise_and_stay_bounded(
    data: bytes, cuts: list[int]
) -> None:
    decoder = request_decoder()
    items = []
    for chunk in split(data, cuts):
        items += decoder.feed(chunk)
        assert decoder.buffered < MAX_FRAME
    items += decoder.feed_eof()
    assert decoder.buffered == 0
    for item in items:
        assert isinstance(item, MessageError) or item.direction is Direction.TO_BROKER
    # How the stream is chunked never changes what is decoded.
    whole = request_decoder()
    assert outcome(items) == outcome(whole.feed(data) + whole.feed_eof())


@FUZZ
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=10))
def test_a_small_limit_holds_for_any_input(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(parse_request, max_frame=40)
    for chunk in split(data, cuts):
        for item in decoder.feed(chunk):
            assert isinstance(item, MessageError) or item.direction is Direction.TO_BROKER
        assert decoder.buffered < 40


@FUZZ
@given(message=st.one_of(requests, replies))
def test_valid_messages_round_trip_byte_by_byte(message: Message) -> None:
    data = encode(message)
    assert len(data) <= MAX_FRAME
    decoder = decoder_for(message.direction)
    items = []
    for index in range(len(data)):
        items += decoder.feed(data[index : index + 1])
    assert items == [message]
    assert json.loads(data)["v"] == 1


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Draw from ``good`` nine times in ten, so random messages often get deep or get accepted."""
    return st.integers(0, 9).flatmap(lambda n: good if n else bad)


ABSENT = object()
ops = st.sampled_from(
    ["ping", "elevate", "askpass", "sudo_result", "status", "open_browser", "pong", "decision",
     "password", "ack", "progress", "error"]
)  # fmt: skip
plausible_fields: dict[str, st.SearchStrategy[Any]] = {
    "tool": st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,10}", fullmatch=True),
    "kind": st.sampled_from(Kind).map(str),
    "argv": st.lists(text_no_nul, min_size=1, max_size=3),
    "args": json_objects,
    "cwd": text_no_nul.map(lambda s: "/" + s),
    "host": st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,10}", fullmatch=True),
    "code": st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
    "timeout": st.none() | st.integers(1, 86400) | st.floats(0.001, 86400),
    "grant": grants,
    "prompt": text,
    "attempt": st.integers(1, 5),
    "exit_code": st.integers(-255, 255),
    "auth_failed": st.booleans(),
    "decision": st.sampled_from(Decision).map(str),
    "reason": text,
    "by": st.sampled_from(DecidedBy).map(str),
    "remember": st.none() | text,
    "password": st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r\n")),
    "pending": st.integers(0, 10),
    "paused": st.booleans(),
    "version": text,
    "state": st.sampled_from(ProgressState).map(str),
    "message": text,
}
random_messages = st.fixed_dictionaries(
    {
        "v": mostly(st.just(1), json_scalars | st.just(ABSENT)),
        "id": mostly(ids, json_values | st.just(ABSENT)),  # a nested id is never echoed
        "op": mostly(ops, json_scalars | text | st.just(ABSENT)),
        **{
            name: mostly(plausible, json_scalars | st.just(ABSENT))
            for name, plausible in plausible_fields.items()
        },
    }
).map(lambda obj: {key: value for key, value in obj.items() if value is not ABSENT})


@FUZZ
@given(obj=random_messages | json_values, direction=st.sampled_from(Direction))
def test_parse_message_either_parses_or_raises_a_message_error(
    obj: Any, direction: Direction
) -> None:
    message = parse_or_error(obj, direction)
    # The same object arriving as a frame is decoded to the same outcome.
    assert outcome(decoder_for(direction).feed(frame(obj))) == outcome([message])
    if isinstance(message, MessageError):
        assert message.code in {"bad_json", "bad_version", "bad_request", "unknown_op"}
        assert message.request_id is None or message.request_id == obj.get("id")
        return
    # Whatever is accepted can be sent back unchanged.
    assert message.direction is direction
    assert parse_message(json.loads(encode(message)), direction) == message
