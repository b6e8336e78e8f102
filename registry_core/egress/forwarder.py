"""The in-sandbox relay: ``127.0.0.1:PORT`` (and ``[::1]:PORT``) to the proxy's Unix socket.

Runs inside the sandbox as ``python3 -I -S forwarder.py PORT SOCKET`` (standard
library only, importable by source like :mod:`registry_core.sandbox.execstep`).
Each accepted TCP connection is relayed, both ways, to a new connection on
``SOCKET``; a thread per direction, ``splice(2)`` through a pipe where the
kernel offers it (no copy into Python), else ``recv_into``/``sendall``.

``--ready-fd N`` writes the bound port and a newline to descriptor N once
listening (PORT 0 picks a free port).  Exits on SIGTERM / SIGINT.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
import threading
import time

_CHUNK = 1024 * 1024
_SPLICE = hasattr(os, "splice")


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        if _SPLICE:
            _splice(src, dst)
        else:
            buf = bytearray(_CHUNK)
            view = memoryview(buf)
            while True:
                n = src.recv_into(buf)
                if not n:
                    break
                dst.sendall(view[:n])
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _splice(src: socket.socket, dst: socket.socket) -> None:
    read_end, write_end = os.pipe()
    try:
        try:
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _CHUNK)
        except (ImportError, AttributeError, OSError):
            pass
        s, d = src.fileno(), dst.fileno()
        while True:
            n = os.splice(s, write_end, _CHUNK)
            if not n:
                return
            while n:
                n -= os.splice(read_end, d, n)
    finally:
        os.close(read_end)
        os.close(write_end)


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        client.close()
        return
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    upstream.close()
    client.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EBADF) or listener.fileno() < 0:
                return  # stopped
            time.sleep(0.05)  # EMFILE and the like: wait, do not spin
            continue
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def listen(port: int) -> list[socket.socket]:
    """Listeners on 127.0.0.1:port and, when the host has IPv6, [::1] on the same port."""
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    v4.bind(("127.0.0.1", port))
    v4.listen(512)
    listeners = [v4]
    try:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return listeners
    try:
        v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        v6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        v6.bind(("::1", v4.getsockname()[1]))
        v6.listen(512)
        listeners.append(v6)
    except OSError:
        v6.close()
    return listeners


def start(port: int, path: str) -> tuple[int, list[socket.socket]]:
    """Listen and serve in background threads; the bound port and the listeners (to close)."""
    listeners = listen(port)
    for listener in listeners:
        threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    return listeners[0].getsockname()[1], listeners


def stop(listeners: list[socket.socket]) -> None:
    """Stop listening (wakes the accepting threads; open relays go on)."""
    for listener in listeners:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()


def main(argv: list[str]) -> int:
    args = list(argv)
    ready_fd = None
    if len(args) >= 2 and args[0] == "--ready-fd":
        ready_fd = int(args[1])
        del args[:2]
    if len(args) != 2 or not args[0].isdigit():
        sys.stderr.write("usage: forwarder.py [--ready-fd N] PORT SOCKET\n")
        return 2
    import signal

    port, listeners = start(int(args[0]), args[1])
    if ready_fd is not None:
        os.write(ready_fd, f"{port}\n".encode())
        os.close(ready_fd)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    stop(listeners)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
