"""Repeated ``elevate`` frames recognised from their bytes (``frame_memo.py``, issue 19).

The one rule: whatever bytes stand where the id stands, a broker's decoder with
a memo yields exactly what parsing the frame yields (the same request, or the
same typed error).  Hypothesis writes the id tokens, from well-formed ids to
byte soup, after a frame the memo has learned.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.elevation import messages as m
from registry_core.elevation.frame_memo import MAX_REMEMBERED, FrameMemo, split_id
from registry_core.elevation.framing import FrameDecoder, request_decoder
from registry_core.elevation.protocol import parse_request

HEAD = b'{"v":1,"id":'


def rest_of(fields: dict[str, Any]) -> bytes:
    """The bytes after the id of a compact frame holding ``fields``."""
    return json.dumps(fields, separators=(",", ":")).encode()[1:]


def line(token: bytes, fields: dict[str, Any]) -> bytes:
    return HEAD + token + b"," + rest_of(fields)


FIELDS: dict[str, Any] = {
    "op": "elevate",
    "tool": "greet",
    "kind": "sandbox",
    "argv": ["/opt/tools/greet"],
    "args": {"path": "/home/a", "n": [1, 2.5, None, True], "deep": {"x": "é"}},
    "cwd": "/home/a",
    "client": "agent/1",
}


def outcome(item: Any) -> Any:
    if isinstance(item, m.MessageError):
        return ("error", item.code, item.message, item.request_id)
    return ("request", type(item), item)


def parsed(frame: bytes) -> list[Any]:
    return [outcome(i) for i in FrameDecoder(parse_request).feed(frame + b"\n")]


def through(memo: FrameMemo, frame: bytes) -> list[Any]:
    return [outcome(i) for i in request_decoder(memo=memo).feed(frame + b"\n")]


def learned(fields: dict[str, Any] = FIELDS) -> FrameMemo:
    memo = FrameMemo()
    through(memo, line(b"1", fields))
    assert len(memo) == 1
    return memo


def test_a_repeat_with_a_new_id_is_the_same_request_with_that_id() -> None:
    memo = learned()
    for token, expected in ((b"2", 2), (b'"req-7"', "req-7"), (b"-0", 0), (b'""', "")):
        [(kind, cls, request)] = through(memo, line(token, FIELDS))
        assert (kind, cls) == ("request", m.ElevateRequest)
        assert request.id == expected and type(request.id) is type(expected)
        assert request == parse_request(json.loads(line(token, FIELDS)))
    assert len(memo) == 1  # recognised, not learned again


def test_every_decoder_of_the_broker_shares_what_was_learned() -> None:
    memo = FrameMemo()
    through(memo, line(b"1", FIELDS))
    other_connection = request_decoder(memo=memo)
    [request] = other_connection.feed(line(b"99", FIELDS) + b"\n")
    assert isinstance(request, m.ElevateRequest) and request.id == 99
    assert len(memo) == 1


@pytest.mark.parametrize(
    "token",
    [
        b"1.5",
        b"1e3",
        b"true",
        b"null",
        b"9007199254740992",  # beyond the safe integers
        b"-9007199254740992",
        b"01",
        b"123456789012345678901",
        b'"a\\"b"',  # an escape: parsed, never recognised
        b'"\\ud800"',  # a lone surrogate
        b'"' + b"x" * (m.MAX_ID_LENGTH + 1) + b'"',
        b'"\x01"',
        b'"\xff"',
        b"[1]",
        b"",
        b" 1",
    ],
)
def test_whatever_stands_for_the_id_the_outcome_is_the_parsers(token: bytes) -> None:
    memo = learned()
    frame = line(token, FIELDS)
    assert through(memo, frame) == parsed(frame)


def test_a_second_id_later_in_the_frame_is_refused_every_time() -> None:
    fields = {**FIELDS, "id": 5}
    memo = FrameMemo()
    for token in (b"1", b"1", b"2"):
        [(kind, code, message, _rid)] = through(memo, line(token, fields))
        assert (kind, code) == ("error", m.ErrorCode.BAD_JSON)
        assert "duplicate key" in message
    assert len(memo) == 0


def test_refused_and_other_requests_are_never_remembered() -> None:
    memo = FrameMemo()
    through(memo, line(b"1", {**FIELDS, "kind": "root"}))
    through(memo, HEAD + b'1,"op":"ping"}')
    through(memo, b'{"id":1,"v":1,' + rest_of(FIELDS))  # another layout
    assert len(memo) == 0
    big = {**FIELDS, "args": {"blob": "x" * MAX_REMEMBERED}}
    through(memo, line(b"1", big))
    assert len(memo) == 0


def test_the_memo_is_bounded() -> None:
    memo = FrameMemo(max_entries=4)
    for i in range(6):
        through(memo, line(b"1", {**FIELDS, "cwd": f"/d{i}"}))
        assert len(memo) <= 4
    [(kind, _cls, request)] = through(memo, line(b"8", {**FIELDS, "cwd": "/d5"}))
    assert kind == "request" and request.cwd == "/d5"


def test_split_id_reads_only_plain_ids_that_end_where_the_value_ends() -> None:
    assert split_id(HEAD + b'12,"x":1}') == (12, b',"x":1}')
    assert split_id(HEAD + b'"a b"}') == ("a b", b"}")
    assert split_id(HEAD + b"12 ,") is None
    assert split_id(HEAD + b'"a\\"b",') is None
    assert split_id(b'{"v":1, "id":1,') is None


ID_PIECES = [b"0", b"1", b"9", b"-", b".", b"e", b"+", b'"', b"\\", b"u", b"d800", b"\x00"]
ID_PIECES += [b"\x1f", b" ", b"a", b"\xc3\xa9", b"\xff", b"{", b"[", b"]", b"}", b",", b"true"]
ID_BYTES = st.sampled_from(ID_PIECES)


@settings(max_examples=400, deadline=None)
@given(st.lists(ID_BYTES, max_size=8).map(b"".join))
def test_property_any_id_bytes_give_the_parsers_outcome(token: bytes) -> None:
    memo = learned()
    frame = line(token, FIELDS)
    assert through(memo, frame) == parsed(frame)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(min_value=-(2**60), max_value=2**60),
        st.text(max_size=m.MAX_ID_LENGTH + 2),
    ),
    st.booleans(),
)
def test_property_any_json_id_gives_the_parsers_outcome(value: int | str, ascii_only: bool) -> None:
    memo = learned()
    frame = line(json.dumps(value, ensure_ascii=ascii_only).encode(), FIELDS)
    assert through(memo, frame) == parsed(frame)


class CountingDecoder:
    """A broker's decoder whose parser counts the frames it had to parse."""

    def __init__(self, memo: FrameMemo) -> None:
        self.parsed = 0
        self.decoder = request_decoder(memo=memo)

        def counting(obj: Any, *, tree_checked: bool = False) -> m.Request:
            self.parsed += 1
            return parse_request(obj, tree_checked=tree_checked)

        self.decoder._parse = counting  # type: ignore[attr-defined]

    def feed(self, frame: bytes) -> list[Any]:
        return self.decoder.feed(frame + b"\n")


def test_a_repeat_is_not_parsed_again() -> None:
    decoder = CountingDecoder(FrameMemo())
    decoder.feed(line(b"1", FIELDS))
    assert decoder.parsed == 1
    for token in (b"2", b'"x"', b"3"):
        [request] = decoder.feed(line(token, FIELDS))
        assert isinstance(request, m.ElevateRequest)
    assert decoder.parsed == 1
    decoder.feed(line(b"4", {**FIELDS, "cwd": "/other"}))  # new content: parsed
    assert decoder.parsed == 2


def test_every_frame_up_to_the_limit_is_remembered_side_by_side() -> None:
    decoder = CountingDecoder(FrameMemo(max_entries=4))
    contents = [{**FIELDS, "cwd": f"/d{i}"} for i in range(4)]
    for fields in contents:
        decoder.feed(line(b"1", fields))
    for fields in contents:
        decoder.feed(line(b"2", fields))
    assert decoder.parsed == 4


def test_frames_of_exactly_the_remembered_size_are_remembered() -> None:
    short = len(line(b"1", {**FIELDS, "cwd": "/"}))
    fields = {**FIELDS, "cwd": "/" + "x" * (MAX_REMEMBERED - short)}
    assert len(line(b"1", fields)) == MAX_REMEMBERED
    decoder = CountingDecoder(FrameMemo())
    decoder.feed(line(b"1", fields))
    decoder.feed(line(b"2", fields))
    assert decoder.parsed == 1
    longer = line(b"12", fields)  # one byte over: parsed every time
    decoder.feed(longer)
    decoder.feed(longer)
    assert decoder.parsed == 3
