"""The blocking broker client's conveniences: what they send, how long they wait
.

``elevate``, ``action``, ``askpass``, ``sudo_result``, ``status`` and
``open_browser`` against a scripted broker on a real socket (``client_helpers``).
Written against the mutants of ``client.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from client_helpers import Script, frame, replying, scripted

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import APPROVAL_WAIT, MARGIN, BrokerClient
from registry_core.errors import BrokerUnavailableError

# --- the conveniences: what they send, how long they wait ----------------------


def test_elevate_sends_every_field_and_waits_for_a_person(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    waits: list[float | None] = []
    reason = "approved"
    with (
        scripted(path, replying(op="decision", decision="allow", reason=reason, by="user")) as seen,
        BrokerClient(path) as client,
    ):
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        reply = client.elevate(
            "greet", m.Kind.SUDO, ["/t/greet", "x"], {"a": 1}, "/w",
            code="echo", host="h1", client="agent",
        )  # fmt: skip
        assert reply == m.DecisionReply(
            id=f"{os.getpid()}-1", decision=m.Decision.ALLOW, reason=reason,
            by=m.DecidedBy.USER,
        )  # fmt: skip
        client.elevate("greet", m.Kind.SANDBOX, ["/t/greet"], {}, "/", timeout=12.5)
    assert seen[0] == {
        "v": 1, "id": f"{os.getpid()}-1", "op": "elevate", "tool": "greet", "kind": "sudo",
        "argv": ["/t/greet", "x"], "args": {"a": 1}, "cwd": "/w", "host": "h1",
        "code": "echo", "timeout": APPROVAL_WAIT, "client": "agent",
    }  # fmt: skip
    assert (seen[1]["timeout"], seen[1]["host"], seen[1]["code"], seen[1]["client"]) == (
        12.5,
        None,
        None,
        None,
    )
    assert waits == [APPROVAL_WAIT + MARGIN, 12.5 + MARGIN]


def test_elevate_hands_the_progress_of_its_request_to_the_caller(base: Path) -> None:
    path = base / "b.sock"
    heard: list[m.ProgressState] = []

    def script(request: dict[str, Any]) -> list[bytes]:
        own = request["id"]
        return [
            frame(id=own, op="progress", state="waiting_for_user"),
            frame(id=own, op="decision", decision="deny", reason="no", by="user"),
        ]

    with scripted(path, script), BrokerClient(path) as client:
        reply = client.elevate("t", m.Kind.SANDBOX, ["/t"], {}, "/", on_progress=heard.append)
    assert reply == m.DecisionReply(
        id=f"{os.getpid()}-1", decision=m.Decision.DENY, reason="no", by=m.DecidedBy.USER
    )
    assert heard == [m.ProgressState.WAITING_FOR_USER]


def test_an_unexpected_reply_to_elevate_or_action_in_words(base: Path) -> None:
    path = base / "b.sock"
    action = m.ActionRequest(
        id="ignored", agent="claude", tool="Bash", summary="ls", input={}, cwd="/",
        pattern_kind=m.PatternKind.PROGRAM, pattern="ls",
    )  # fmt: skip
    with scripted(path, replying(op="pong")), BrokerClient(path) as client:
        with pytest.raises(BrokerUnavailableError) as info:
            client.elevate("t", m.Kind.SANDBOX, ["/t"], {}, "/")
        assert str(info.value) == "unexpected pong reply to elevate"
        with pytest.raises(BrokerUnavailableError) as info:
            client.action(action)
        assert str(info.value) == "unexpected pong reply to action"


def test_action_gets_a_fresh_id_and_the_default_wait(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    action = m.ActionRequest(
        id="ignored", agent="claude", tool="Bash", summary="ls", input={"c": "ls"}, cwd="/",
        pattern_kind=m.PatternKind.PROGRAM, pattern="ls",
    )  # fmt: skip
    waits: list[float | None] = []
    error: Script = lambda r: [frame(id=r["id"], op="error", code="paused", message="p")]  # noqa: E731
    with scripted(path, error) as seen, BrokerClient(path) as client:
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        reply = client.action(action)
        assert reply == m.ErrorReply(id=f"{os.getpid()}-1", code="paused", message="p")
        client.action(m.ActionRequest(**{**action.__dict__, "timeout": 3.0}))
    assert [(r["id"], r["timeout"]) for r in seen] == [
        (f"{os.getpid()}-1", APPROVAL_WAIT),
        (f"{os.getpid()}-2", 3.0),
    ]
    assert waits == [APPROVAL_WAIT + MARGIN, 3.0 + MARGIN]


GRANT = "g" * 43


def test_askpass_sudo_result_status_and_open_browser_send_their_fields(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base / "b.sock"
    waits: list[float | None] = []
    with scripted(path, replying(op="ack")) as seen, BrokerClient(path) as client:
        real = client.request

        def recording(*args: Any, **kwargs: Any) -> m.Reply:
            waits.append(kwargs.get("wait"))
            return real(*args, **kwargs)

        monkeypatch.setattr(client, "request", recording)
        assert client.askpass(GRANT, "Password: ") == m.AckReply(id=f"{os.getpid()}-1")
        client.askpass(GRANT, "Again: ", 3, wait=20.0)
        client.sudo_result(GRANT, 1, True)
        client.status()
        client.open_browser()
    pid = os.getpid()
    assert seen == [
        {"v": 1, "id": f"{pid}-1", "op": "askpass", "grant": GRANT, "prompt": "Password: ",
         "attempt": 1},
        {"v": 1, "id": f"{pid}-2", "op": "askpass", "grant": GRANT, "prompt": "Again: ",
         "attempt": 3},
        {"v": 1, "id": f"{pid}-3", "op": "sudo_result", "grant": GRANT, "exit_code": 1,
         "auth_failed": True},
        {"v": 1, "id": f"{pid}-4", "op": "status"},
        {"v": 1, "id": f"{pid}-5", "op": "open_browser"},
    ]  # fmt: skip
    assert waits == [APPROVAL_WAIT + MARGIN, 20.0 + MARGIN, None, None, None]
