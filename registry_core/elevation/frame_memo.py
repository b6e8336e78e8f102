"""Frames that repeat an accepted ``elevate`` but for the id (issue 19; sans-I/O).

An agent sends the same ``elevate`` frame again and again with a new id each
time.  Parsing it (JSON, duplicate keys, every field's checks) costs more than
the socket does, and the verdict cannot differ: a frame is parsed into the
very same request when only its id changed.  :class:`FrameMemo` recognises
such a frame from its bytes alone, for frames in the compact form clients
write (``{"v":1,"id":<id>,...``):

* the id is a JSON integer or a string without escapes or control
  characters, followed directly by ``,`` or ``}`` (so it is one whole JSON
  value, and the bytes after it are the rest of the object);
* the bytes after the id are exactly those of a frame parsed before (and
  accepted as an ``elevate`` with the id read the same way), so the rest of
  the object is the same text: the same keys (no second ``id`` or ``v``: that
  frame would have been refused as a duplicate), values and nesting;
* the new id passes :func:`~registry_core.elevation.messages.is_request_id`.

Such a frame gives the remembered request with the new id.  Anything else
(another layout, an escape in the id, a frame never accepted) is parsed as
usual.  At most :data:`MAX_ENTRIES` frames of at most :data:`MAX_REMEMBERED`
bytes are remembered; the requests are shared, never changed, by every
connection.
"""

from __future__ import annotations

import re

from registry_core.elevation import messages as m

MAX_ENTRIES = 512
MAX_REMEMBERED = 4096
FRAME_REST = "_frame_rest"
"""The key under which a request made or learned here keeps its frame's bytes after
the id (in its ``__dict__``, beside the fields: not a field, so not compared): its
whole content as the client wrote it, which the broker's decision memo uses as key."""

_HEAD = b'{"v":%d,"id":' % m.PROTOCOL_VERSION
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]{0,17})")
_PLAIN_STRING = re.compile(rb'"([^"\\\x00-\x1f]*)"')


def split_id(line: bytes) -> tuple[m.RequestId, bytes] | None:
    """``line``'s id and the bytes after it, for a frame of the compact layout whose id is
    a plain integer or string followed by ``,`` or ``}``; ``None`` otherwise."""
    if not line.startswith(_HEAD):
        return None
    start = len(_HEAD)
    value: m.RequestId
    if line[start : start + 1] == b'"':
        string = _PLAIN_STRING.match(line, start)
        if string is None:
            return None
        try:
            value = string.group(1).decode("utf-8")  # pragma: no mutate (codec name case)
        except UnicodeDecodeError:
            return None
        end = string.end()
    else:
        integer = _INTEGER.match(line, start)
        if integer is None:
            return None
        value, end = int(integer.group()), integer.end()
    rest = line[end:]
    if not rest.startswith((b",", b"}")):
        return None
    return value, rest


class FrameMemo:
    """Accepted ``elevate`` frames by their bytes after the id."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._known: dict[bytes, m.ElevateRequest] = {}

    def __len__(self) -> int:
        return len(self._known)

    def get(self, line: bytes) -> m.ElevateRequest | None:
        """The request ``line`` parses into, when it repeats a remembered frame."""
        if len(line) > MAX_REMEMBERED:
            return None
        found = split_id(line)
        if found is None:
            return None
        request_id, rest = found
        known = self._known.get(rest)
        if known is None or not m.is_request_id(request_id):
            return None
        request: m.ElevateRequest = object.__new__(m.ElevateRequest)
        request.__dict__.update(known.__dict__)
        request.__dict__["id"] = request_id
        return request

    def learn(self, line: bytes, request: m.Request) -> None:
        """Remember ``line``, which the parser accepted as ``request``."""
        if type(request) is not m.ElevateRequest or len(line) > MAX_REMEMBERED:
            return
        found = split_id(line)
        if found is None:
            return
        request_id, rest = found
        if type(request_id) is not type(request.id) or request_id != request.id:
            return  # not the id the parser saw: never remembered
        if len(self._known) >= self.max_entries and rest not in self._known:
            self._known.clear()
        request.__dict__[FRAME_REST] = rest
        self._known[rest] = request
