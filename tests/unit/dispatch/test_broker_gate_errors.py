"""An ``error`` reply from the broker is a denial, and nothing runs.

A real Unix socket served by a thread that answers every request with an
``error`` message of one code; the real :class:`BrokerGate` and dispatcher.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dispatch_helpers import MARKER, Stack

from registry_core.broker.wire.messages import ErrorCode
from registry_core.dispatch.broker_gate import BrokerGate
from registry_core.errors import ElevationDeniedError


@contextlib.contextmanager
def erring_broker(path: Path, code: str) -> Iterator[list[dict[str, object]]]:
    """Answer every request on ``path`` with ``error`` ``code``; yields the requests seen."""
    seen: list[dict[str, object]] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn, conn.makefile("rwb") as stream:
                    for line in stream:
                        request = json.loads(line)
                        seen.append(request)
                        reply = {"v": 1, "id": request["id"], "op": "error", "code": code}
                        reply["message"] = f"scripted {code}"
                        stream.write(json.dumps(reply).encode() + b"\n")
                        stream.flush()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield seen
    finally:
        server.close()
        worker.join(10)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.UNKNOWN_TOOL,
        ErrorCode.TOOL_UNAVAILABLE,
        ErrorCode.SHUTTING_DOWN,
        ErrorCode.INTERNAL,
        ErrorCode.BAD_REQUEST,
        "a_code_from_the_future",
    ],
)
def test_an_error_reply_is_a_denial_and_nothing_runs(stack: Stack, code: str) -> None:
    stack.tool("escape", MARKER, elevated=True)
    path = stack.root / "runtime" / "broker.sock"
    with erring_broker(path, code) as seen:
        dispatcher = stack.dispatcher(gate=BrokerGate(path, timeout=5))
        with pytest.raises(ElevationDeniedError, match=code):
            dispatcher.call("escape", {}, stack.options())
    assert [r["op"] for r in seen] == ["elevate"]
    assert not (stack.cwd / "ran").exists()
