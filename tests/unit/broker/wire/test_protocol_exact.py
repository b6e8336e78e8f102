"""The codec's refusals word for word and its accepted fields one by one.

Written against the mutants of ``protocol.py``: every field of every op is
refused with the exact sentence a peer reads (op, field, expectation, the
value or "(value not shown)" for a secret), the limits are held at their
boundaries, and an ``action``'s fields are all checked and all kept.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire import codec as protocol
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import parse_reply, parse_request

GRANT = "G-_" + "g" * 13  # 16 characters: the shortest grant accepted


def refusal(obj: dict[str, Any], direction: m.Direction = m.Direction.TO_BROKER) -> str:
    """The exact message of ``obj``'s refusal (always ``bad_request``, id echoed)."""
    with pytest.raises(m.MessageError) as info:
        protocol.parse_message(obj, direction)
    assert info.value.error_code is m.ErrorCode.BAD_REQUEST
    assert info.value.request_id == obj.get("id")
    return info.value.message


# --- action -------------------------------------------------------------------------

ACTION: dict[str, Any] = {
    "v": 1,
    "id": "a1",
    "op": "action",
    "agent": "claude",
    "tool": "Bash",
    "summary": "rm -rf build",
    "input": {"command": "rm -rf build"},
    "cwd": "/home/ada",
    "pattern_kind": "program",
    "pattern": "rm",
    "detail": "rm -rf build/",
    "display": "command",
    "command": "rm -rf build/ ",
    "path": "/home/ada/build",
    "session": "s-1",
    "timeout": 30,
}


def test_an_action_keeps_every_field() -> None:
    request = parse_request(ACTION)
    assert request == m.ActionRequest(
        id="a1",
        agent="claude",
        tool="Bash",
        summary="rm -rf build",
        input={"command": "rm -rf build"},
        cwd="/home/ada",
        pattern_kind=m.PatternKind.PROGRAM,
        pattern="rm",
        detail="rm -rf build/",
        display=m.ActionDisplay.COMMAND,
        command="rm -rf build/ ",
        path="/home/ada/build",
        session="s-1",
        timeout=30.0,
    )
    assert isinstance(request, m.ActionRequest)
    assert type(request.timeout) is float


def test_an_action_without_its_optional_fields() -> None:
    optional = ("detail", "display", "command", "path", "session", "timeout")
    bare = {key: value for key, value in ACTION.items() if key not in optional}
    nulls = bare | dict.fromkeys(optional)
    expected = m.ActionRequest(
        id="a1",
        agent="claude",
        tool="Bash",
        summary="rm -rf build",
        input={"command": "rm -rf build"},
        cwd="/home/ada",
        pattern_kind=m.PatternKind.PROGRAM,
        pattern="rm",
    )
    assert parse_request(bare) == expected
    assert parse_request(nulls) == expected


CLIENT = "a client name (1-128 printable characters)"
ACTION_TOOL = "an agent tool name (1-128 printable characters)"
NO_NUL = "a string without NUL"
ABSOLUTE = "an absolute path without NUL"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("agent", "\x1b[31m", f'must be {CLIENT}, got "\\u001b[31m"'),
        ("agent", "", f'must be {CLIENT}, got ""'),
        ("agent", "x" * 129, f'must be {CLIENT}, got "{"x" * 56}...'),
        ("tool", "bidi\u202e", f'must be {ACTION_TOOL}, got "bidi\\u202e"'),
        ("tool", 3, f"must be {ACTION_TOOL}, got 3"),
        ("summary", "a\x00", f'must be {NO_NUL}, got "a\\u0000"'),
        ("input", [1], "must be a JSON object, got [1]"),
        ("cwd", "home/ada", f'must be {ABSOLUTE}, got "home/ada"'),
        ("pattern_kind", "glob", 'must be one of "program", "path", "exact", got "glob"'),
        ("pattern", "p\x00", f'must be {NO_NUL}, got "p\\u0000"'),
        ("detail", "d\x00", f'must be {NO_NUL}, got "d\\u0000"'),
        ("display", "html", 'must be one of "command", "diff", "text", got "html"'),
        ("command", "c\x00", f'must be {NO_NUL}, got "c\\u0000"'),
        ("path", "build/x", f'must be {ABSOLUTE}, got "build/x"'),
        ("path", 5, f"must be {ABSOLUTE}, got 5"),
        ("session", "two\nlines", f'must be {CLIENT}, got "two\\nlines"'),
        ("timeout", 0, "must be a number of seconds above 0 and at most 86400, got 0"),
    ],
)
def test_every_action_field_is_refused_word_for_word(name: str, value: Any, message: str) -> None:
    assert refusal(ACTION | {name: value}) == f"action: field {name!r} {message}"


# --- elevate ------------------------------------------------------------------------

ELEVATE: dict[str, Any] = {
    "v": 1,
    "id": 7,
    "op": "elevate",
    "tool": "greet",
    "kind": "sandbox",
    "argv": ["/opt/tools/greet"],
    "args": {"name": "Ada"},
    "cwd": "/home/ada",
}
CODE = "echo 'hi'\nls"
WITH_OPTIONS = ELEVATE | {"host": "laptop", "code": CODE, "client": "claude code"}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("tool", ".x", "must be a tool name ([A-Za-z0-9_.-], no leading '.'), got \".x\""),
        ("kind", "root", 'must be one of "sandbox", "sudo", got "root"'),
        ("argv", [], "must be a non-empty array of strings, got []"),
        ("argv", "greet", 'must be a non-empty array of strings, got "greet"'),
        ("args", [], "must be a JSON object, got []"),
        ("cwd", "r", f'must be {ABSOLUTE}, got "r"'),
        ("host", "-h", 'must be a host name, got "-h"'),
        ("host", "", 'must be a host name, got ""'),
        ("code", "a\x00", f'must be {NO_NUL}, got "a\\u0000"'),
        ("code", 1, f"must be {NO_NUL}, got 1"),
        ("client", "\x07", f'must be {CLIENT}, got "\\u0007"'),
        ("timeout", 86400.5, "must be a number of seconds above 0 and at most 86400, got 86400.5"),
        ("timeout", "30", 'must be a number of seconds above 0 and at most 86400, got "30"'),
    ],
)
def test_every_elevate_field_is_refused_word_for_word(name: str, value: Any, message: str) -> None:
    for base in (ELEVATE, ELEVATE | {"timeout": 60}):
        if name != "timeout" or "timeout" not in base:
            assert refusal(base | {name: value}) == f"elevate: field {name!r} {message}"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"host": "-h", "code": None}, "field 'host' must be a host name, got \"-h\""),
        ({"host": "-h", "code": "ls"}, "field 'host' must be a host name, got \"-h\""),
        ({"code": "ls\x00"}, f"field 'code' must be {NO_NUL}, got \"ls\\u0000\""),
        ({"argv": ["a", 1]}, "field 'argv[1]' must be a string without NUL, got 1"),
    ],
)
def test_a_bad_field_among_good_optional_ones_is_refused(
    changes: dict[str, Any], message: str
) -> None:
    assert refusal(WITH_OPTIONS | changes) == f"elevate: {message}"


def test_the_longest_timeout_is_one_day() -> None:
    request = parse_request(ELEVATE | {"timeout": 86400})
    assert isinstance(request, m.ElevateRequest)
    assert request.timeout == 86400.0
    assert type(request.timeout) is float


@pytest.mark.parametrize("obj", [ELEVATE, WITH_OPTIONS], ids=["plain", "host-code-client"])
def test_a_common_elevate_is_parsed_whole(obj: dict[str, Any]) -> None:
    assert parse_request(obj) == m.ElevateRequest(
        id=7,
        tool="greet",
        kind=m.Kind.SANDBOX,
        argv=("/opt/tools/greet",),
        args={"name": "Ada"},
        cwd="/home/ada",
        host=obj.get("host"),
        code=obj.get("code"),
        client=obj.get("client"),
    )


# --- askpass, sudo_result -----------------------------------------------------------


def askpass(**changes: Any) -> dict[str, Any]:
    return {"v": 1, "id": 3, "op": "askpass", "grant": GRANT, "prompt": "p", "attempt": 1} | changes


def sudo_result(**changes: Any) -> dict[str, Any]:
    fields = {"grant": GRANT, "exit_code": 0, "auth_failed": False}
    return {"v": 1, "id": 3, "op": "sudo_result"} | fields | changes


MOST = m.MAX_SAFE_INT  # 9007199254740991


def test_integers_are_held_at_both_limits() -> None:
    assert parse_request(askpass(attempt=MOST)) == m.AskpassRequest(
        id=3, grant=GRANT, prompt="p", attempt=MOST
    )
    assert refusal(askpass(attempt=MOST + 1)) == (
        f"askpass: field 'attempt' must be an integer from 1 to {MOST}, got {MOST + 1}"
    )
    assert refusal(askpass(attempt=0)) == (
        f"askpass: field 'attempt' must be an integer from 1 to {MOST}, got 0"
    )
    for code in (-MOST, MOST):
        assert parse_request(sudo_result(exit_code=code)) == m.SudoResultRequest(
            id=3, grant=GRANT, exit_code=code, auth_failed=False
        )
    assert refusal(sudo_result(exit_code=-MOST - 1)) == (
        f"sudo_result: field 'exit_code' must be an integer from -{MOST} to {MOST}, got -{MOST + 1}"
    )


def test_booleans_are_refused_word_for_word() -> None:
    assert refusal(sudo_result(auth_failed=0)) == (
        "sudo_result: field 'auth_failed' must be true or false, got 0"
    )


@pytest.mark.parametrize("grant", ["g" * 15, "g" * 129, "g" * 15 + "/", 42])
def test_a_bad_grant_is_refused_without_its_value(grant: Any) -> None:
    expected = "a grant token (16-128 characters of A-Z a-z 0-9 _ -), (value not shown)"
    assert refusal(askpass(grant=grant)) == f"askpass: field 'grant' must be {expected}"
    assert refusal(sudo_result(grant=grant)) == f"sudo_result: field 'grant' must be {expected}"


def test_grants_of_16_and_128_characters_are_accepted() -> None:
    for grant in (GRANT, "Z9" * 64):
        request = parse_request(askpass(grant=grant))
        assert isinstance(request, m.AskpassRequest)
        assert request.grant == grant


# --- replies ------------------------------------------------------------------------


def reply(op: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": 3, "op": op} | fields


def test_a_denial_carrying_a_grant_is_refused_without_showing_it() -> None:
    obj = reply("decision", decision="deny", reason="r", by="user", grant=GRANT)
    assert refusal(obj, m.Direction.TO_CLIENT) == (
        "decision: field 'grant' must be null when the decision is 'deny', (value not shown)"
    )


def test_an_allow_carries_its_grant() -> None:
    obj = reply("decision", decision="allow", reason="ok", by="policy", grant=GRANT)
    assert parse_reply(obj) == m.DecisionReply(
        id=3, decision=m.Decision.ALLOW, reason="ok", by=m.DecidedBy.POLICY, grant=GRANT
    )


def test_error_codes_are_refused_word_for_word_and_known_ones_typed() -> None:
    obj = reply("error", code="Bad", message="m")
    assert refusal(obj, m.Direction.TO_CLIENT) == (
        "error: field 'code' must be an error code ([a-z][a-z0-9_]*), got \"Bad\""
    )
    known = parse_reply(reply("error", code="no_grant", message="expired"))
    assert known == m.ErrorReply(id=3, code=m.ErrorCode.NO_GRANT, message="expired")
    assert isinstance(known, m.ErrorReply)
    assert type(known.code) is m.ErrorCode
    newer = parse_reply(reply("error", code="rate_limited", message="later"))
    assert isinstance(newer, m.ErrorReply)
    assert type(newer.code) is str


def test_reply_fields_are_refused_word_for_word() -> None:
    status = reply("status", pending=0, paused="no", version="1")
    assert refusal(status, m.Direction.TO_CLIENT) == (
        "status: field 'paused' must be true or false, got \"no\""
    )
    assert refusal(reply("pong") | {"id": None}, m.Direction.TO_CLIENT) == (
        "pong: field 'id' must be a string or integer for op 'pong', got null"
    )


def test_a_reply_tree_is_walked() -> None:
    obj = reply("ack", extra=[1.5, float("nan")])
    with pytest.raises(m.MessageError) as info:
        parse_reply(obj)
    assert (info.value.error_code, info.value.message, info.value.request_id) == (
        m.ErrorCode.BAD_REQUEST,
        "field 'extra[1]' must be a finite number, got nan",
        3,
    )


# --- the envelope -------------------------------------------------------------------


def test_an_id_is_refused_before_the_op_is_known() -> None:
    obj = {"v": 1, "id": True, "op": "ping"}
    with pytest.raises(m.MessageError) as info:
        parse_request(obj)
    assert (info.value.error_code, info.value.request_id) == (m.ErrorCode.BAD_REQUEST, None)
    assert info.value.message == (
        "field 'id' must be a string of at most 256 characters or a safe integer, got true"
    )
