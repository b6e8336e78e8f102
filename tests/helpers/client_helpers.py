"""Shared pieces of the broker client's unit tests: a scripted broker on a real socket.

Used by ``test_client_exact.py``, ``test_client_replies_exact.py`` and
``test_client_calls_exact.py``.  Imported as a plain module: pytest puts this test
directory on ``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Script = Callable[[dict[str, Any]], list[bytes] | None]
"""The raw frames answering one request; ``None``: close the connection."""


def frame(**fields: Any) -> bytes:
    return json.dumps({"v": 1, **fields}).encode() + b"\n"


@contextlib.contextmanager
def scripted(path: Path, script: Script) -> Iterator[list[dict[str, Any]]]:
    """A broker on ``path`` answering each request line with ``script(request)``."""
    seen: list[dict[str, Any]] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = server.accept()
                with conn, conn.makefile("rwb") as stream:
                    for line in stream:
                        request = json.loads(line)
                        seen.append(request)
                        frames = script(request)
                        if frames is None:
                            break
                        stream.write(b"".join(frames))
                        stream.flush()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield seen
    finally:
        stop.set()
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        worker.join(10)


def replying(**fields: Any) -> Script:
    return lambda request: [frame(id=request["id"], **fields)]
