"""What bench/broker.py's clients send: elevate frames and a blocking line client."""

from __future__ import annotations

import json
import socket
from pathlib import Path


def elevate_frame(request_id: int | str, tool: str, exe: Path) -> bytes:
    message = {
        "v": 1,
        "id": request_id,
        "op": "elevate",
        "tool": tool,
        "kind": "sandbox",
        "argv": [str(exe)],
        "args": {"path": "/home/someone/notes.txt", "text": "hello"},
        "cwd": "/home/someone/project",
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class LineClient:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        return self.reader.readline()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()
