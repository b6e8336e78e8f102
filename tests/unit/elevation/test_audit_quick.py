"""The audit line's quick path (issue 19) writes exactly the general path's bytes.

``AuditRecord.to_line`` builds the common line from the requester's JSON,
encoded once per connection, and a date formatted once per second; the text
must stay byte for byte what encoding the whole record gives.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from registry_core.elevation.audit import (
    MAX_LINE,
    AuditRecord,
    AuditRequester,
    _iso,
    _iso_fast,
)
from registry_core.elevation.identity import Requester
from registry_core.elevation.messages import DecidedBy, Decision, Kind
from registry_core.elevation.prompter import Remember

SETTINGS = settings(max_examples=300, deadline=None)
text = st.text(max_size=12)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=12,
)

times = st.one_of(
    st.floats(0, 4e9),
    st.integers(0, 4 * 10**9).map(lambda s: s + 0.9995),
    st.integers(0, 4 * 10**9).map(lambda s: s + 0.0005),
    st.integers(0, 4 * 10**9).map(lambda s: s + 0.9999995),
    st.integers(0, 4 * 10**9).map(float),
)


@SETTINGS
@given(times)
@example(1_750_000_000.0)
@example(1_750_000_000.9999996)
@example(0.0)
def test_the_quick_time_is_the_datetime_text(ts: float) -> None:
    assert _iso_fast(ts) == _iso(ts)


@st.composite
def records(draw: st.DrawFn) -> AuditRecord:
    requester = AuditRequester(
        pid=draw(st.integers(1, 2**22)),
        exe=draw(text),
        cmdline=tuple(draw(st.lists(text, max_size=3))),
        cwd=draw(text),
        sandboxed=draw(st.booleans()),
    )
    big = draw(st.sampled_from([0, 100, MAX_LINE]))
    return AuditRecord(
        time=draw(st.one_of(times, st.just(-1.5))),
        request_id=draw(st.one_of(st.none(), st.integers(), text)),
        tool=draw(text),
        kind=draw(st.sampled_from(list(Kind))),
        host=draw(text),
        requester=requester,
        decision=draw(st.sampled_from(list(Decision))),
        by=draw(st.sampled_from(list(DecidedBy))),
        reason=draw(text) + "r" * big,
        remember=draw(st.one_of(st.none(), st.sampled_from(list(Remember)))),
        remote=draw(st.booleans()),
        executable=draw(st.one_of(st.none(), text)),
        sha256=draw(st.one_of(st.none(), st.just("ab" * 32))),
        argv=tuple(draw(st.lists(text, max_size=3))),
        args=draw(st.one_of(st.none(), st.dictionaries(text, json_values, max_size=4))),
        code=draw(st.one_of(st.none(), text)),
        claimed_host=draw(st.one_of(st.none(), text)),
        client=draw(st.one_of(st.none(), text)),
        action=draw(st.one_of(st.none(), st.just({"agent": "a", "tool": "Bash"}))),
    )


@SETTINGS
@given(records())
def test_the_quick_line_is_the_general_line(record: AuditRecord) -> None:
    quick = record._quick_line()
    if quick is not None:
        assert quick == record._general_line()
    assert record.to_line() == record._general_line()


def test_the_common_record_takes_the_quick_path() -> None:
    requester = AuditRequester(4242, "/usr/bin/python3", ("python3", "agent.py"), "/w", True)
    record = AuditRecord(
        time=1_750_000_000.25,
        request_id="r1",
        tool="greet",
        kind=Kind.SANDBOX,
        host="laptop",
        requester=requester,
        decision=Decision.ALLOW,
        by=DecidedBy.POLICY,
        reason="remembered: allow greet",
        argv=("/opt/greet",),
        args={"name": "Ada", "n": [1, 2.5, None]},
    )
    line = record._quick_line()
    assert line is not None and line == record._general_line()
    assert json.loads(line)["requester"]["origin"] == "from inside the sandbox"


def test_the_requester_is_encoded_once_per_connection() -> None:
    requester = Requester(pid=7, uid=1000, gid=1000, exe="/bin/sh", cmdline=("sh",), cwd="/tmp")
    first = AuditRequester.from_requester(requester)
    assert AuditRequester.from_requester(requester) is first
    assert first.json_text is first.json_text
    other: Any = Requester(pid=8, uid=1000, gid=1000)
    assert AuditRequester.from_requester(other).pid == 8


def test_a_field_holding_the_requesters_slot_text_is_still_written_right() -> None:
    # The quick path marks the requester's place with a string; a record that
    # carries that very string elsewhere must not get the requester twice.
    slot = "\x00requester\x00"
    requester = AuditRequester(1, "/bin/sh", ("sh",), "/")
    for field in ("reason", "code", "tool"):
        fields: dict[str, Any] = {"tool": "greet", field: slot}
        record = AuditRecord(
            time=1_750_000_000.5,
            kind=Kind.SANDBOX,
            host="laptop",
            requester=requester,
            decision=Decision.DENY,
            by=DecidedBy.USER,
            **fields,
        )
        assert record.to_line() == record._general_line()
        assert json.loads(record.to_line())[field] == slot
