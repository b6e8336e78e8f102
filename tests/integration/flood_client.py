"""A flooding client, run as its own process: many idle connections, or many requests on one.

``python flood_client.py idle N SOCKET`` opens N connections and keeps them;
``python flood_client.py requests N SOCKET`` sends N ``elevate`` frames on
one connection and reads the replies until all but the broker's cap were
refused.  Either way it prints one JSON line with what it saw, then holds
everything open until its stdin closes.  (The legitimate client must be a
different process: the broker's caps are per process.)
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import sys
from pathlib import Path

from scripted_broker import RawClient, elevate_message


def idle(count: int, path: Path) -> dict[str, object]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, count + 100), hard))
    opened = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # in the backlog: connected for the client
            sock.connect(str(path))
        opened.append(sock)
    codes: dict[str, int] = {}
    for sock in opened[-50:]:  # the last ones are beyond every cap
        sock.setblocking(True)
        sock.settimeout(5)
        try:
            line = sock.recv(4096).split(b"\n", 1)[0]
        except OSError as exc:  # a timeout: the broker never got to this one
            code = f"no answer ({type(exc).__name__})"
        else:
            code = json.loads(line).get("code", "?") if line else "closed silently"
        codes[code] = codes.get(code, 0) + 1
    globals()["_keep"] = opened
    return {"opened": len(opened), "last_50": codes}


def requests(count: int, path: Path) -> dict[str, object]:
    client = RawClient(path, timeout=5)
    frames = b"".join(
        json.dumps(elevate_message(i, "greet", ["greet"])).encode() + b"\n" for i in range(count)
    )
    client.send(frames)
    codes: dict[str, int] = {}
    seen = 0
    limit = int(sys.argv[4])
    while seen < count - limit:
        try:
            reply = client.reply()
        except OSError:  # a timeout: no more replies are coming
            codes["no answer"] = count - limit - seen
            break
        key = reply.get("code", reply["op"])
        codes[key] = codes.get(key, 0) + 1
        seen += 1
    globals()["_keep"] = client
    return {"sent": count, "replies": codes}


def main() -> int:
    mode, count, path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    result = idle(count, path) if mode == "idle" else requests(count, path)
    print(json.dumps(result), flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
