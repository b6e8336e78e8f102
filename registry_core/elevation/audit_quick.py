"""The audit line of a common decision, written straight from its fields (issue 19).

:meth:`AuditRecord.to_line <registry_core.elevation.audit.AuditRecord.to_line>`
encodes a record as one JSON object.  For the common record (no agent action,
a time after 1970, nothing cut) :func:`quick_parts` and :func:`assemble` give the same bytes
without building the record or a dict of it: each field's JSON is made by
the same encoder's pieces (the C string escaper, the shared encoder for the
request id and ``args``) and joined in the record's key order, the
requester's JSON is the one encoded once per connection, and the date is
formatted once per second.  ``tests/unit/elevation/test_audit_quick.py``
holds it byte for byte to the general path; anything unusual (a field of an
unexpected type, ``args`` that cannot be encoded, a line over
:data:`MAX_LINE`) returns ``None`` and the general path decides.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from registry_core.elevation.audit_file import MAX_LINE

# The audit log's one encoder (stateless: shared); ``repr`` for what JSON lacks.
ENCODER = json.JSONEncoder(separators=(",", ":"), default=repr)
# What ENCODER makes of a string (ensure_ascii): the same C escaper it calls.
_string = json.encoder.encode_basestring_ascii


@functools.lru_cache(maxsize=4)
def _second_text(second: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` (UTC) of a whole second after the epoch."""
    return dt.datetime.fromtimestamp(second, dt.UTC).isoformat().replace("+00:00", "")


def iso_fast(ts: float) -> str:
    """The record's time text for a time at or after the epoch, the date and
    time of day formatted once per second: the same text as ``datetime``'s
    (which rounds to the microsecond, half to even, cut to milliseconds)."""
    fraction, whole = math.modf(ts)
    micro = round(fraction * 1e6)
    second = int(whole)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    return f"{_second_text(second)}.{micro // 1000:03d}Z"


def _value(value: Any) -> str:
    if type(value) is str:
        return _string(value)
    if value is None:
        return "null"
    return ENCODER.encode(value)


def _member(value: Enum) -> str:
    """A string enum member's JSON is its value's (the escaper reads the string
    itself; ``.value`` is a slower descriptor); any other member's, its value's."""
    return _string(value) if isinstance(value, str) else _value(value.value)


LineParts = tuple[str, str]
"""A quick line's text around the requester's JSON: from ``"tool"`` up to
``"requester":``, and from ``"executable"`` to the end of the line."""


def quick_parts(
    *,
    tool: str,
    kind: Enum,
    host: str,
    remote: bool,
    executable: str | None,
    sha256: str | None,
    argv: Sequence[str],
    args: Mapping[str, Any] | None,
    code: str | None,
    decision: Enum,
    by: Enum,
    remember: Enum | None,
    reason: str,
    claimed_host: str | None,
    client: str | None,
) -> LineParts | None:
    """What the quick line holds between the request id and the requester, and
    after the requester (the same for every repeat of one decision: the broker's
    remembered decisions keep it, ``decision_memo.py``); ``None``: the general path."""
    try:
        flag = "true" if remote is True else "false" if remote is False else ENCODER.encode(remote)
        middle = "".join(
            (
                ',"tool":',
                _string(tool),
                ',"kind":',
                _member(kind),
                ',"host":',
                _string(host),
                ',"remote":',
                flag,
                ',"requester":',
            )
        )
        tail = [
            ',"executable":',
            _value(executable),
            ',"sha256":',
            _value(sha256),
            ',"argv":[',
            ",".join(map(_string, argv)),
            '],"args":',
            "null" if args is None else ENCODER.encode(dict(args)),
            ',"code":',
            _value(code),
            ',"decision":',
            _member(decision),
            ',"by":',
            _member(by),
            ',"remember":',
            "null" if remember is None else _member(remember),
            ',"reason":',
            _string(reason),
        ]
        if claimed_host:
            tail += (',"claimed_host":', _value(claimed_host))
        if client:
            tail += (',"client":', _value(client))
    except (TypeError, ValueError, RecursionError, AttributeError):
        return None  # an unexpected type, or args the encoder refuses: the general path
    tail.append("}\n")
    return middle, "".join(tail)


def assemble(time: float, request_id: Any, parts: LineParts, requester_json: str) -> bytes | None:
    """The whole line from its :func:`quick_parts`; ``None`` (the general path) for a
    time before the epoch, an id of an unexpected type or a line over :data:`MAX_LINE`."""
    if not time >= 0:
        return None
    try:
        head = _value(request_id)
    except (TypeError, ValueError, RecursionError):
        return None
    text = "".join(('{"time":"', iso_fast(time), '","request_id":', head, parts[0]))
    line = (text + requester_json + parts[1]).encode()
    return line if len(line) <= MAX_LINE else None
