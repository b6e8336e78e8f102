"""Many sandboxed peers at once, run as its own program: the attack of finding 8.

``python sandbox_flooder.py SOCKET SANDBOXES PER_SANDBOX`` forks ``SANDBOXES``
children; each becomes a sandbox of its own as the broker sees one under the
Landlock sandbox (a new session, ``no_new_privs`` set: what the dispatcher does
before ``landlock_restrict_self``, and what the broker recognises a sandboxed
peer by), then opens ``PER_SANDBOX`` connections and keeps them.  It waits a
moment for what the broker says on each (a refusal arrives at once; an
admitted connection hears nothing), prints one JSON line::

    {"opened": N, "held": N, "codes": {"too_many_connections": N, ...},
     "messages": [...], "probe": "<what the project's own client says>"}

where ``probe`` comes from one more sandboxed child that asks with
``registry_core``'s :class:`BrokerClient` (a ping) while the others hold
their connections; then holds everything until its stdin closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
SETTLE = 3.0


def become_sandboxed() -> None:
    """A new session with ``no_new_privs``: a sandbox of its own, to the broker."""
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def connect(path: str, wait: float = 20.0) -> socket.socket | None:
    """A connection, waiting while the listen queue is full (EAGAIN), as real clients do."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect(path)
        except BlockingIOError:
            sock.close()
            time.sleep(0.01)
            continue
        except OSError:
            sock.close()
            return None
        return sock
    return None


def hold(path: str, count: int, out: int) -> None:
    """One sandbox: ``count`` connections, a report on ``out``, then wait to be killed."""
    become_sandboxed()
    opened: list[socket.socket] = []
    failed = 0
    for _ in range(count):
        sock = connect(path)
        if sock is None:
            failed += 1
        else:
            opened.append(sock)
    codes: dict[str, int] = {}
    messages: list[str] = []
    waiting = {sock.fileno(): sock for sock in opened}
    deadline = time.monotonic() + SETTLE
    while waiting and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(list(waiting), [], [], left)
        for fd in ready:
            sock = waiting.pop(fd)
            try:
                line = sock.recv(4096).split(b"\n", 1)[0]
            except OSError:
                line = b""
            if not line:
                codes["closed silently"] = codes.get("closed silently", 0) + 1
                continue
            reply = json.loads(line)
            code = str(reply.get("code", reply.get("op")))
            codes[code] = codes.get(code, 0) + 1
            if len(messages) < 3:
                messages.append(str(reply.get("message", "")))
    report = {"opened": len(opened), "failed": failed, "held": len(waiting)}
    os.write(out, (json.dumps({**report, "codes": codes, "messages": messages}) + "\n").encode())
    os.close(out)
    signal.pause()


def probe(path: str, out: int) -> None:
    """One more sandbox asks with the project's client: what does it say?"""
    become_sandboxed()
    from pathlib import Path

    from registry_core.broker.wire.client import BrokerClient

    try:
        with BrokerClient(Path(path), timeout=5.0, connect_timeout=5.0) as client:
            said = "pong" if client.ping() else "no pong"
    except Exception as exc:  # what it says is the point
        said = f"{type(exc).__name__}: {exc}"
    os.write(out, (json.dumps({"probe": said}) + "\n").encode())
    os._exit(0)


def fork(run: object, *args: object) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        # Gone with the flooder, however it ends: no sandbox outlives the test.
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        try:
            run(*args, write_end)  # type: ignore[operator]
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def read_all(fd: int) -> dict[str, object]:
    with os.fdopen(fd, "rb") as pipe:
        line = pipe.readline()
    return json.loads(line) if line else {"died": True}


def main() -> int:
    path, sandboxes, per_sandbox = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    children = [fork(hold, path, per_sandbox) for _ in range(sandboxes)]
    total: dict[str, object] = {"opened": 0, "failed": 0, "held": 0, "died": 0}
    codes: dict[str, int] = {}
    messages: list[str] = []
    for _pid, fd in children:
        report = read_all(fd)
        if report.get("died"):
            total["died"] = int(total["died"]) + 1  # type: ignore[call-overload]
            continue
        for key in ("opened", "failed", "held"):
            total[key] = int(total[key]) + int(report[key])  # type: ignore[call-overload]
        for code, n in report["codes"].items():  # type: ignore[attr-defined]
            codes[code] = codes.get(code, 0) + n
        for message in report["messages"]:  # type: ignore[attr-defined]
            if message not in messages:
                messages.append(message)
    prober, fd = fork(probe, path)
    total["probe"] = read_all(fd)["probe"]
    os.waitpid(prober, 0)
    print(json.dumps({**total, "codes": codes, "messages": messages}), flush=True)
    with contextlib.suppress(Exception):
        sys.stdin.read()
    for pid, _fd in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid, _fd in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
