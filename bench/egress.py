"""Egress proxy: connect latency and throughput through forwarder + proxy vs direct.

Three processes besides this one, as in a sandboxed call: a local upstream
server on 127.0.0.1 (stands for the remote host), the egress proxy
(:class:`registry_core.egress.proxy.EgressProxy` on a Unix socket, the
destination allowed by a rule: a "remembered" one, nobody asked) and the
forwarder (``python3 -I -S forwarder.py``, 127.0.0.1:PORT -> the socket).
The client (this process) measures, interleaved, in the same run:

* connect: from ``connect()`` until one byte went to the upstream server and
  its answer came back -- direct, through HTTP CONNECT and through SOCKS5;
  p50 over ``--connects`` each.  Target: proxy p50 <= direct p50 + 2 ms.
* throughput: a ``--megabytes`` (200) download from the upstream server,
  direct vs through CONNECT, ``--rounds`` alternated rounds, medians.
  Target: >= 0.7x direct.  For information, the same download from the
  proxy's Unix socket itself (no forwarder, no second TCP leg).

Prints PASS/MISS per target and exits 0.  ``--json`` prints every number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CHUNK = 1 << 20


def serve_upstream(ready_fd: int, megabytes: int) -> None:
    """'p': answer one byte (connect probe); 'd': send the payload and close."""
    import threading

    payload = memoryview(os.urandom(CHUNK))
    total = megabytes * CHUNK
    server = socket.create_server(("127.0.0.1", 0), backlog=512)
    os.write(ready_fd, f"{server.getsockname()[1]}\n".encode())
    os.close(ready_fd)

    def handle(conn: socket.socket) -> None:
        with conn:
            command = conn.recv(1)
            if command == b"p":
                conn.sendall(b"p")
                conn.recv(1)  # until the client closes
            elif command == b"d":
                sent = 0
                while sent < total:
                    conn.sendall(payload[: min(CHUNK, total - sent)])
                    sent += min(CHUNK, total - sent)

    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def serve_proxy(ready_fd: int, socket_path: str, upstream_port: int) -> None:
    from registry_core.egress.proxy import EgressProxy
    from registry_core.egress.rules import EgressRules

    async def main() -> None:
        rules = EgressRules.from_text([f"127.0.0.1:{upstream_port}"])
        proxy = EgressProxy(socket_path, rules, tool="bench", record=lambda record: None)
        await proxy.start()
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
        await asyncio.Event().wait()

    asyncio.run(main())


def spawn(args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [arg.replace("{fd}", str(write_end)) for arg in args], pass_fds=(write_end,)
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        line = ready.readline().strip()
    if not line:
        process.kill()
        raise SystemExit(f"{args[1]}: did not start")
    return process, line


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_direct(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed early")
        data += chunk
    return data


def open_connect(proxy_port: int, port: int) -> socket.socket:
    sock = open_direct(proxy_port)
    sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    reply = b""
    while not reply.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise OSError("proxy closed")
        reply += chunk
    if not reply.startswith(b"HTTP/1.1 200"):
        raise OSError(reply.decode(errors="replace"))
    return sock


def open_unix_connect(path: str, port: int) -> socket.socket:
    """CONNECT on the proxy's Unix socket itself: the path without the forwarder."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    reply = b""
    while not reply.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise OSError("proxy closed")
        reply += chunk
    if not reply.startswith(b"HTTP/1.1 200"):
        raise OSError(reply.decode(errors="replace"))
    return sock


def open_socks(proxy_port: int, port: int) -> socket.socket:
    sock = open_direct(proxy_port)
    sock.sendall(b"\x05\x01\x00")
    request = b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + port.to_bytes(2, "big")
    recv_exactly(sock, 2)
    sock.sendall(request)
    if recv_exactly(sock, 10)[1] != 0:
        raise OSError("SOCKS refused")
    return sock


def probe(opener: object, *args: int) -> float:
    started = time.perf_counter()
    sock = opener(*args)  # type: ignore[operator]
    with sock:
        sock.sendall(b"p")
        recv_exactly(sock, 1)
        return time.perf_counter() - started


def download(sock: socket.socket, total: int) -> float:
    buf = bytearray(CHUNK)
    got = 0
    started = time.perf_counter()
    with sock:
        sock.sendall(b"d")
        while got < total:
            n = sock.recv_into(buf)
            if not n:
                raise OSError(f"closed after {got} bytes")
            got += n
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connects", type=int, default=300)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve-upstream", nargs=2, metavar=("FD", "MB"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-proxy", nargs=3, metavar=("FD", "SOCK", "PORT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(int(args.serve_upstream[0]), int(args.serve_upstream[1]))
        return 0
    if args.serve_proxy:
        fd, path, port = args.serve_proxy
        serve_proxy(int(fd), path, int(port))
        return 0

    from registry_core.egress import forwarder

    me = [sys.executable, str(Path(__file__).resolve())]
    processes: list[subprocess.Popen[bytes]] = []
    directory = tempfile.mkdtemp(prefix="egb", dir="/tmp")  # short: AF_UNIX path limit
    socket_path = os.path.join(directory, "egress.sock")
    try:
        upstream, line = spawn([*me, "--serve-upstream", "{fd}", str(args.megabytes)])
        processes.append(upstream)
        port = int(line)
        proxy, _ = spawn([*me, "--serve-proxy", "{fd}", socket_path, str(port)])
        processes.append(proxy)
        fwd, line = spawn(
            [
                sys.executable,
                "-I",
                "-S",
                forwarder.__file__ or "",
                "--ready-fd",
                "{fd}",
                "0",
                socket_path,
            ]
        )
        processes.append(fwd)
        proxy_port = int(line)

        for _ in range(20):  # warm-up
            probe(open_direct, port)
            probe(open_connect, proxy_port, port)
            probe(open_socks, proxy_port, port)
        direct_c: list[float] = []
        connect_c: list[float] = []
        socks_c: list[float] = []
        for _ in range(args.connects):
            direct_c.append(probe(open_direct, port))
            connect_c.append(probe(open_connect, proxy_port, port))
            socks_c.append(probe(open_socks, proxy_port, port))
        total = args.megabytes * CHUNK
        direct_t: list[float] = []
        proxy_t: list[float] = []
        unix_t: list[float] = []
        relay_cpu = {"proxy": 0.0, "forwarder": 0.0, "client": 0.0}
        for index in range(args.rounds):
            for kind in "dpu" if index % 2 == 0 else "upd":
                if kind == "d":
                    direct_t.append(download(open_direct(port), total))
                    continue
                if kind == "u":
                    unix_t.append(download(open_unix_connect(socket_path, port), total))
                    continue
                sock = open_connect(proxy_port, port)
                before = cpu_seconds(proxy.pid), cpu_seconds(fwd.pid), time.process_time()
                proxy_t.append(download(sock, total))
                relay_cpu["proxy"] += cpu_seconds(proxy.pid) - before[0]
                relay_cpu["forwarder"] += cpu_seconds(fwd.pid) - before[1]
                relay_cpu["client"] += time.process_time() - before[2]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)

    ms = 1000.0
    p50_direct = statistics.median(direct_c) * ms
    p50_connect = statistics.median(connect_c) * ms
    p50_socks = statistics.median(socks_c) * ms
    mbps_direct = args.megabytes / statistics.median(direct_t)
    mbps_proxy = args.megabytes / statistics.median(proxy_t)
    ratio = mbps_proxy / mbps_direct
    mbps_unix = args.megabytes / statistics.median(unix_t)
    pass_connect = p50_connect - p50_direct <= 2.0
    pass_socks = p50_socks - p50_direct <= 2.0
    pass_tput = ratio >= 0.7
    mib = args.megabytes * args.rounds
    cpu_ms = {name: seconds * 1000 / mib for name, seconds in relay_cpu.items()}
    if args.json:
        print(
            json.dumps(
                {
                    "connect_p50_ms": {
                        "direct": p50_direct,
                        "http_connect": p50_connect,
                        "socks5": p50_socks,
                    },
                    "connect_p99_ms": {
                        "direct": sorted(direct_c)[int(len(direct_c) * 0.99) - 1] * ms,
                        "http_connect": sorted(connect_c)[int(len(connect_c) * 0.99) - 1] * ms,
                        "socks5": sorted(socks_c)[int(len(socks_c) * 0.99) - 1] * ms,
                    },
                    "throughput_mib_s": {
                        "direct": mbps_direct,
                        "proxy": mbps_proxy,
                        "proxy_without_forwarder": mbps_unix,
                    },
                    "throughput_ratio": ratio,
                    "cpu_ms_per_mib_proxied": cpu_ms,
                    "cpus": os.cpu_count(),
                    "pass": {"connect": pass_connect, "socks": pass_socks, "throughput": pass_tput},
                },
                indent=2,
            )
        )
        return 0
    verdict = {True: "PASS", False: "MISS"}
    print(f"{'measurement':44} {'value':>12}  {'vs direct':>12}  {'target':>10}  result")
    print(f"{'connect p50, direct':44} {p50_direct:9.3f} ms")
    print(
        f"{'connect p50, forwarder + proxy (CONNECT)':44} {p50_connect:9.3f} ms"
        f"  {p50_connect - p50_direct:+9.3f} ms  {'<= +2 ms':>10}  {verdict[pass_connect]}"
    )
    print(
        f"{'connect p50, forwarder + proxy (SOCKS5)':44} {p50_socks:9.3f} ms"
        f"  {p50_socks - p50_direct:+9.3f} ms  {'<= +2 ms':>10}  {verdict[pass_socks]}"
    )
    print(f"{f'{args.megabytes} MiB download, direct':44} {mbps_direct:8.0f} MiB/s")
    print(
        f"{f'{args.megabytes} MiB download, forwarder + proxy':44} {mbps_proxy:8.0f} MiB/s"
        f"  {ratio:11.2f}x  {'>= 0.7x':>10}  {verdict[pass_tput]}"
    )
    print(
        f"{'(info) same, proxy alone (on its Unix socket)':44} {mbps_unix:8.0f} MiB/s"
        f"  {mbps_unix / mbps_direct:11.2f}x"
    )
    print(
        f"(info) CPU per MiB proxied: proxy {cpu_ms['proxy']:.2f} ms, forwarder"
        f" {cpu_ms['forwarder']:.2f} ms, client {cpu_ms['client']:.2f} ms; {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
