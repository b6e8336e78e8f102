"""The frame decoder's edges pinned exactly: its words, CRLF, the limit's floor.

Written against the mutants of ``framing.py``: each test failed on at least one
of them.
"""

from __future__ import annotations

from typing import Any

import pytest
from protocol_helpers import outcome

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import parse_reply, parse_request
from registry_core.broker.wire.framing import FrameDecoder, reply_decoder, request_decoder

BAD_FRAMES = [
    b'{"v":1,"id":1',  # ends inside the object
    b'{"v":1,"id":1,"op":"ping",}',
    b"garbage",
    b'{"v":1,"id":1,"op":"ping"} x',
]


@pytest.mark.parametrize("bad", BAD_FRAMES)
def test_a_crlf_frame_gets_the_lf_frames_outcome_word_for_word(bad: bytes) -> None:
    """The CR is the line ending's, not the frame's: error columns count without it."""
    lf = outcome(request_decoder().feed(bad + b"\n"))
    crlf = outcome(request_decoder().feed(bad + b"\r\n"))
    assert crlf == lf
    assert outcome(FrameDecoder(parse_request).feed(bad + b"\r\n")) == lf


def test_an_unterminated_object_is_reported_at_its_end_column() -> None:
    for decoder in (request_decoder(), reply_decoder(), FrameDecoder(parse_request)):
        assert outcome(decoder.feed(b'{"v":1,"id":1\r\n')) == [
            ("bad_json", "invalid JSON at column 14: Expecting ',' delimiter", None)
        ]


def test_the_oversize_and_eof_errors_word_for_word() -> None:
    decoder = request_decoder(max_frame=16)
    assert outcome(decoder.feed(b"x" * 16 + b"\n")) == [
        ("frame_too_large", "frame exceeds 16 bytes; skipped", None)
    ]
    assert decoder.feed(b'{"v":1,') == []
    assert outcome(decoder.feed_eof()) == [
        ("bad_json", "stream ended inside a frame (7 bytes without a newline)", None)
    ]
    decoder.feed(b"  ab \t")
    assert outcome(decoder.feed_eof()) == [
        ("bad_json", "stream ended inside a frame (2 bytes without a newline)", None)
    ]


def test_the_smallest_limit_holds_one_byte_and_the_newline() -> None:
    decoder: FrameDecoder[Any] = FrameDecoder(parse_reply, max_frame=2)
    assert outcome(decoder.feed(b"1\n")) == [
        ("bad_json", "a frame must hold a JSON object, got 1", None)
    ]
    assert outcome(decoder.feed(b"12\n")) == [
        ("frame_too_large", "frame exceeds 2 bytes; skipped", None)
    ]
    with pytest.raises(
        ValueError, match=r"^max_frame must leave room for one byte and the newline$"
    ):
        FrameDecoder(parse_reply, max_frame=1)


def test_a_frame_of_exactly_the_limit_is_accepted_when_it_arrives_in_pieces() -> None:
    """The byte-by-byte path counts the newline once, like the one-read path."""
    decoder: FrameDecoder[Any] = FrameDecoder(parse_reply, max_frame=2)
    assert decoder.feed(b"1") == []
    assert outcome(decoder.feed(b"\n")) == [
        ("bad_json", "a frame must hold a JSON object, got 1", None)
    ]
    ping = b'{"v":1,"id":1,"op":"ping"}\n'
    exact = request_decoder(max_frame=len(ping))
    assert exact.feed(ping[:5]) == []
    assert exact.feed(ping[5:] + ping) == [m.PingRequest(id=1), m.PingRequest(id=1)]
    assert outcome(exact.feed(b" " + ping)) == [
        ("frame_too_large", f"frame exceeds {len(ping)} bytes; skipped", None)
    ]


def test_both_decoders_take_the_limit_they_are_given() -> None:
    for decoder in (reply_decoder(max_frame=16), request_decoder(max_frame=16)):
        assert outcome(decoder.feed(b'{"v":1,"id":1234567}\n')) == [
            ("frame_too_large", "frame exceeds 16 bytes; skipped", None)
        ]


def test_the_tail_of_an_oversize_frame_read_on_its_own_is_dropped() -> None:
    """An oversize frame is skipped up to its newline even when its tail arrives as a
    read of its own that looks like one whole frame (the one-read path is not taken
    while skipping)."""
    ping = b'{"v":1,"id":1,"op":"ping"}\n'
    decoder = request_decoder(max_frame=len(ping))
    assert outcome(decoder.feed(b"x" * (len(ping) + 1))) == [
        ("frame_too_large", f"frame exceeds {len(ping)} bytes; skipped", None)
    ]
    assert decoder.feed(b'{"v":1,"id":2,"op":"ping"}\n') == []  # still the big frame's
    assert decoder.feed(ping) == [m.PingRequest(id=1)]
