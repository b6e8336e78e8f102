"""Helpers shared by the protocol codec's example tests and property tests.

Imported as a plain module (``from protocol_helpers import ...``): pytest puts
this test directory on ``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

import json
from typing import Any

from registry_core.broker.wire.framing import FrameDecoder, reply_decoder, request_decoder
from registry_core.broker.wire.messages import Direction, MessageError


def frame(obj: Any) -> bytes:
    """``obj`` as one wire frame (JSON and a newline), whatever it holds."""
    return json.dumps(obj).encode() + b"\n"


def decoder_for(direction: Direction) -> FrameDecoder[Any]:
    """The decoder a reader of frames travelling in ``direction`` uses."""
    return request_decoder() if direction is Direction.TO_BROKER else reply_decoder()


def outcome(items: list[Any]) -> list[Any]:
    """Comparable form of decoder output (MessageError has identity equality)."""
    return [
        (item.code, item.message, item.request_id) if isinstance(item, MessageError) else item
        for item in items
    ]
