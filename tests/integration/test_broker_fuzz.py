"""Fuzzing the live broker server: whatever bytes arrive, it answers with valid frames and lives.

One server (in its own thread) serves every example.  Each example opens a
connection, sends random chunks (garbage, valid frames, mutated frames),
ends the frame in progress and asks ``ping``: every reply before the pong
must be a valid v1 frame, and a fresh connection must still get its pong.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_broker import FakePrompter, RawClient, ServerThread, elevate_message, live_server

from registry_core.broker.question import Approval, Remember
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.codec import load_frame, parse_reply

_counter = itertools.count()


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, Path]]:
    base = tmp_path_factory.mktemp("fuzz")
    tools = base / "tools"
    tools.mkdir()
    (tools / "greet.meta").write_text(json.dumps({"description": "Say hello."}))
    exe = tools / "greet"
    exe.write_text("#!/bin/sh\necho hi\n")
    exe.chmod(0o755)
    prompter = FakePrompter(default=Approval(False, Remember.ONCE))  # answers at once
    path = base / "run" / "elevate.sock"
    with live_server([tools], base, path, prompter, prompt_timeout=5) as thread:
        yield thread, tools


def valid_frames(tools: Path) -> list[bytes]:
    messages = [
        {"v": 1, "id": 1, "op": "ping"},
        {"v": 1, "id": "s", "op": "status"},
        elevate_message("e", "greet", [str(tools / "greet")]),
        elevate_message("u", "unknown", ["/bin/true"]),
        {"v": 1, "id": 2, "op": "askpass", "grant": "G" * 40, "prompt": "p", "attempt": 1},
        {
            "v": 1,
            "id": 3,
            "op": "sudo_result",
            "grant": "G" * 40,
            "exit_code": 0,
            "auth_failed": False,
        },
        {"v": 1, "id": 4, "op": "open_browser"},
        {"v": 1, "id": 5, "op": "pong"},
    ]
    return [json.dumps(msg).encode() + b"\n" for msg in messages]


def chunks(tools: Path) -> st.SearchStrategy[list[bytes]]:
    frames = valid_frames(tools)
    valid = st.sampled_from(frames)
    mutated = st.tuples(st.sampled_from(frames), st.integers(0, 200), st.binary(max_size=8)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
    )
    noise = st.binary(max_size=512)
    separators = st.sampled_from([b"\n", b"\r\n", b"{", b"}", b'"', b"\\", b"\x00", b"\xff"])
    big = st.integers(60_000, 140_000).map(lambda n: b"x" * n)
    return st.lists(st.one_of(noise, valid, mutated, separators, big), max_size=12)


def assert_valid_frame(line: bytes) -> m.Reply:
    reply = parse_reply(load_frame(line))
    assert not isinstance(reply, m.UnknownReply), line
    if isinstance(reply, m.ErrorReply):
        assert reply.error_code not in (None, m.ErrorCode.INTERNAL), line  # typed, no bug
    return reply


def check_alive(path: Path) -> None:
    with RawClient(path, timeout=10) as client:
        client.send(b'{"v":1,"id":"alive","op":"ping"}\n')
        line = client.read_line()
        assert line == b'{"v":1,"id":"alive","op":"pong"}'


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_bytes_never_break_the_server(
    fuzz_server: tuple[ServerThread, Path], data: st.DataObject
) -> None:
    server, tools = fuzz_server
    pieces = data.draw(chunks(tools))
    marker = f"end-{next(_counter)}"
    with RawClient(server.path, timeout=20) as client:
        for piece in pieces:
            if piece:
                client.sock.sendall(piece)
        client.send(b"\n" + json.dumps({"v": 1, "id": marker, "op": "ping"}).encode() + b"\n")
        while True:
            line = client.read_line()
            assert line is not None, "the server closed the connection"
            reply = assert_valid_frame(line)
            if isinstance(reply, m.PongReply) and reply.id == marker:
                break
    check_alive(server.path)
    assert server.loop.is_running()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(min_size=1, max_size=2048))
def test_a_connection_that_ends_mid_frame_is_answered_or_dropped_cleanly(
    fuzz_server: tuple[ServerThread, Path], data: bytes
) -> None:
    server, _ = fuzz_server
    with RawClient(server.path, timeout=20) as client:
        client.sock.sendall(data)
        client.sock.shutdown(1)  # SHUT_WR: the stream ends here
        while (line := client.read_line()) is not None:
            assert_valid_frame(line)
    check_alive(server.path)
