"""The optional ``client`` label of ``elevate``: printable text only, shown and audited."""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire.codec import parse_request
from registry_core.broker.wire.messages import ElevateRequest, ErrorCode, Kind, MessageError


def frame(**extra: Any) -> dict[str, Any]:
    return {
        "v": 1, "id": 1, "op": "elevate", "tool": "t", "kind": "sandbox", "argv": ["/bin/t"],
        "args": {}, "cwd": "/w", **extra,
    }  # fmt: skip


def test_client_is_optional_and_kept() -> None:
    assert isinstance(parse_request(frame()), ElevateRequest)
    request = parse_request(frame(client="claude-code 2.1"))
    assert isinstance(request, ElevateRequest) and request.client == "claude-code 2.1"
    assert parse_request(frame(client=None)) == parse_request(frame())


@pytest.mark.parametrize(
    "bad",
    ["", "a\nb", "esc\x1b[31m", "x" * 129, "evil\u202eexe.txt", "line\u2028sep", 5, ["x"]],
)
def test_a_client_label_that_could_mislead_a_dialog_is_refused(bad: Any) -> None:
    with pytest.raises(MessageError) as caught:
        parse_request(frame(client=bad))
    assert caught.value.error_code is ErrorCode.BAD_REQUEST
    assert "'client'" in str(caught.value)


def test_encode_round_trips_the_client() -> None:
    message = ElevateRequest(
        id=1, tool="t", kind=Kind.SANDBOX, argv=("/bin/t",), args={}, cwd="/w", client="zed"
    )
    assert message.to_json()["client"] == "zed"
    assert parse_request(message.to_json()) == message
