"""Unit tests of the elevation wire protocol v1 codec: encoding, framing, the spec's examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from protocol_helpers import decoder_for, frame
from protocol_samples import ELEVATE, REPLIES, REQUESTS

from registry_core.broker.wire.codec import encode, load_frame, parse_request
from registry_core.broker.wire.framing import FrameDecoder, reply_decoder, request_decoder
from registry_core.broker.wire.messages import (
    MAX_FRAME,
    Direction,
    ElevateRequest,
    Kind,
    MessageError,
    PingRequest,
    PongReply,
    UnknownReply,
)

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

SPEC = Path(__file__).resolve().parents[4] / "docs" / "protocol.md"
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
