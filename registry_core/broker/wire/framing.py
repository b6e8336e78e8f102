"""Splitting the broker protocol's byte stream into frames (sans-I/O, like :mod:`.protocol`).

:class:`FrameDecoder` is fed whatever ``recv()`` returned and gives back, in
order, one item per complete frame: a message, or a :class:`MessageError` to
answer with ``error.to_reply()`` before reading on.  It never raises on input
and never holds more than one frame's bytes: an oversize frame is reported at
once, then skipped up to its newline.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import load_frame, parse_reply, parse_request
from registry_core.broker.wire.messages import ErrorCode, MessageError

M = TypeVar("M")
M_co = TypeVar("M_co", covariant=True)


class Parser(Protocol[M_co]):
    """:func:`parse_request` or :func:`parse_reply`."""

    def __call__(self, obj: Any) -> M_co: ...


class FrameDecoder(Generic[M]):
    """Split a byte stream into frames and parse each with ``parse``.

    One decoder per connection, fed from one task; not thread-safe.
    """

    def __init__(self, parse: Parser[M], *, max_frame: int = m.MAX_FRAME) -> None:
        if max_frame < 2:
            raise ValueError("max_frame must leave room for one byte and the newline")
        self._parse = parse
        self._max_frame = max_frame
        self._buffer = bytearray()
        self._skipping = False  # inside an oversize frame: drop bytes up to its newline

    @property
    def buffered(self) -> int:
        """Bytes of the incomplete frame held so far (always below ``max_frame``)."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[M | MessageError]:
        """Take the next bytes of the stream; return the items of the frames they complete."""
        items: list[M | MessageError] = []
        chunk = bytes(data)
        if (
            not self._buffer
            and not self._skipping
            and len(chunk) <= self._max_frame
            and chunk.find(b"\n") == len(chunk) - 1
        ):  # the common read: exactly one whole frame
            item = self._decode(chunk[:-1])
            return [] if item is None else [item]
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            piece = chunk[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = newline < 0
            elif len(self._buffer) + len(piece) + 1 > self._max_frame:
                self._buffer.clear()
                self._skipping = newline < 0
                message = f"frame exceeds {self._max_frame} bytes; skipped"
                items.append(MessageError(ErrorCode.FRAME_TOO_LARGE, message))
            elif newline < 0:
                self._buffer += piece
            else:
                line = bytes(self._buffer) + piece
                self._buffer.clear()
                item = self._decode(line)
                if item is not None:
                    items.append(item)
        return items

    def feed_eof(self) -> list[M | MessageError]:
        """The stream ended: report an unterminated frame, if any, and reset."""
        leftover = len(self._buffer.strip())
        self._buffer.clear()
        self._skipping = False
        if not leftover:
            return []
        message = f"stream ended inside a frame ({leftover} bytes without a newline)"
        return [MessageError(ErrorCode.BAD_JSON, message)]

    def _decode(self, line: bytes) -> M | MessageError | None:
        line = line.removesuffix(b"\r")
        if not line or line.isspace():
            return None  # blank lines carry nothing; tolerated for nc/socat users
        try:
            return self._parse(load_frame(line))
        except MessageError as error:
            return error


def request_decoder(*, max_frame: int = m.MAX_FRAME) -> FrameDecoder[m.Request]:
    """The decoder a broker uses for what clients send."""
    return FrameDecoder(parse_request, max_frame=max_frame)


def reply_decoder(*, max_frame: int = m.MAX_FRAME) -> FrameDecoder[m.Reply]:
    """The decoder a client uses for what the broker sends."""
    return FrameDecoder(parse_reply, max_frame=max_frame)
