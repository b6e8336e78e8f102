"""The egress proxy with real sockets: forwarder -> Unix socket -> proxy -> local servers."""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
from egress_helpers import Harness, connect, read_all

from registry_core.egress import forwarder, proxy_environment
from registry_core.egress import proxy as proxy_module
from registry_core.egress.proxy import Decision, ProxyLimits
from registry_core.egress.rules import EgressRules, IPAddress

CURL = shutil.which("curl")
needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed")


def rules(*allow: str, deny: tuple[str, ...] = (), ask: bool = False) -> EgressRules:
    return EgressRules.from_text(allow, deny, ask=ask)


def curl(h: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    assert CURL is not None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **proxy_environment(h.port)}
    return subprocess.run(
        [CURL, "-sS", "--max-time", "20", "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def socks_connect(port: int, host: bytes | None, dport: int, *, command: int = 1) -> socket.socket:
    sock = connect(port)
    sock.sendall(b"\x05\x01\x00")
    assert sock.recv(2) == b"\x05\x00"
    if host is None:
        address = b"\x01" + socket.inet_aton("127.0.0.1")
    else:
        address = b"\x03" + bytes((len(host),)) + host
    sock.sendall(bytes((5, command, 0)) + address + struct.pack("!H", dport))
    return sock


def test_http_forwarding_with_urllib_and_the_proxy_environment(
    harness: Harness, web: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(EgressRules.from_text([f"web.test:{web}"]))
    for name, value in proxy_environment(harness.port).items():
        monkeypatch.setenv(name, value)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler())
    with opener.open(f"http://web.test:{web}/path?q=1", timeout=10) as reply:
        assert reply.read() == f"hello /path?q=1 host=web.test:{web}\n".encode()
    decision, close = harness.wait_records(2)
    assert (decision.event, decision.decision, decision.protocol) == (
        "decision",
        "allowed",
        "http-forward",
    )
    assert decision.by == "network.allow_hosts" and decision.addresses == ("127.0.0.1",)
    assert close.event == "close" and close.bytes_in > 0 and close.bytes_out > 0
    assert close.tool == "test-tool"


def test_proxy_environment_has_both_cases() -> None:
    env = proxy_environment(3128)
    assert env["HTTP_PROXY"] == env["https_proxy"] == "http://127.0.0.1:3128"
    assert env["ALL_PROXY"] == env["all_proxy"] == "socks5h://127.0.0.1:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == ""


@needs_curl
def test_curl_reaches_an_allowed_host_by_forwarding_connect_and_socks(
    harness: Harness, web: int
) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"))
    url = f"http://web.test:{web}/x"
    want = f"hello /x host=web.test:{web}\n\n200"
    assert curl(harness, url).stdout == want
    assert curl(harness, "--proxytunnel", url).stdout == want
    socks = curl(harness, "-x", f"socks5h://127.0.0.1:{harness.port}", url)
    assert socks.stdout == want, socks.stderr
    protocols = [r.protocol for r in harness.records if r.event == "decision"]
    assert protocols == ["http-forward", "http-connect", "socks5"]
    assert harness.resolved == ["web.test"] * 3


@needs_curl
def test_a_denied_host_gets_403_naming_it_and_why(harness: Harness, web: int) -> None:
    harness.names["blocked.test"] = ["127.0.0.1"]
    harness.start(rules("*.other.test", deny=("blocked.test",), ask=True))
    result = curl(harness, f"http://blocked.test:{web}/")
    assert result.stdout.endswith("\n403")
    assert f"blocked.test:{web}" in result.stdout and "denied by 'blocked.test'" in result.stdout
    assert harness.resolved == [] and harness.asked == []  # denied by name: never resolved, asked
    tunnel = curl(harness, "--proxytunnel", f"http://blocked.test:{web}/")
    assert tunnel.returncode != 0 and "403" in tunnel.stderr
    decision = harness.wait_records(2)[0]
    assert decision.decision == "refused" and "denied" in decision.reason


def test_socks_refusal_code_for_a_denied_host(harness: Harness, web: int) -> None:
    harness.start(rules(deny=("blocked.test",)))
    with socks_connect(harness.port, b"blocked.test", web) as sock:
        reply = sock.recv(10)
    assert reply[:2] == b"\x05\x02"
    assert harness.records[0].protocol == "socks5" and harness.records[0].decision == "refused"


def test_private_address_refused_unless_named(harness: Harness, web: int) -> None:
    harness.start(rules("*.example.test", "0.0.0.0/0"))
    with socks_connect(harness.port, None, web) as sock:
        assert sock.recv(10)[:2] == b"\x05\x02"
    assert "private address (127.0.0.1)" in harness.records[-1].reason
    harness.start(rules(f"127.0.0.1:{web}"))
    with socks_connect(harness.port, None, web) as sock:
        assert sock.recv(10)[:2] == b"\x05\x00"
        sock.sendall(b"GET /named HTTP/1.0\r\n\r\n")
        assert b"hello /named" in read_all(sock)


def test_rebinding_name_to_a_private_address_is_refused(harness: Harness, web: int) -> None:
    harness.names["evil.example.test"] = ["127.0.0.1"]
    harness.start(rules("*.example.test", ask=True))
    with connect(harness.port) as sock:
        sock.sendall(f"GET http://evil.example.test:{web}/ HTTP/1.1\r\n\r\n".encode())
        reply = read_all(sock).decode()
    assert reply.startswith("HTTP/1.1 403 ")
    assert f"evil.example.test:{web}" in reply and "private address" in reply
    assert harness.asked == []  # a private destination is never asked


def test_unknown_destination_is_asked_and_the_answer_kept(harness: Harness, web: int) -> None:
    # A public-looking address that the resolver maps to: the connection then goes to
    # exactly the checked address (here unreachable: TEST-NET-3, 1 s timeout).
    harness.names["new.test"] = ["203.0.113.7"]
    harness.start(rules(ask=True), ProxyLimits(connect_timeout=1.0))
    harness.answer = Decision(False, "person", "refused on the desktop")
    with connect(harness.port) as sock:
        sock.sendall(b"CONNECT new.test:443 HTTP/1.1\r\n\r\n")
        reply = read_all(sock).decode()
    assert reply.startswith("HTTP/1.1 403 ") and "refused on the desktop" in reply
    assert harness.asked[0].host == "new.test" and harness.asked[0].addresses == ("203.0.113.7",)
    assert harness.records[-1].by == "person" and harness.records[-1].decision == "refused"


def test_an_allowed_answer_connects_to_the_checked_address_only(
    harness: Harness, web: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.names["new.test"] = ["203.0.113.7", "198.51.100.9"]
    harness.start(rules(ask=True))
    harness.answer = Decision(True, "person")
    assert harness.proxy is not None
    tried: list[tuple[tuple[str, ...], int]] = []
    real_connect = harness.proxy._connect

    async def local_connect(addresses: Sequence[IPAddress], port: int) -> socket.socket:
        tried.append((tuple(str(a) for a in addresses), port))  # no outside address: go local
        return await real_connect([ipaddress.ip_address("127.0.0.1")], web)

    monkeypatch.setattr(harness.proxy, "_connect", local_connect)
    with connect(harness.port) as sock:
        sock.sendall(b"GET http://new.test/asked HTTP/1.1\r\n\r\n")
        assert b"hello /asked" in read_all(sock)
    assert tried == [(("203.0.113.7", "198.51.100.9"), 80)]
    assert harness.resolved == ["new.test"]  # resolved once: no second lookup to connect
    decision, close = harness.wait_records(2)
    assert (decision.decision, decision.by) == ("allowed", "person")
    assert close.bytes_in > 0


def test_unknown_destination_without_ask_is_refused(harness: Harness, web: int) -> None:
    harness.names["new.test"] = ["203.0.113.7"]
    harness.start(rules())
    with connect(harness.port) as sock:
        sock.sendall(b"CONNECT new.test:443 HTTP/1.1\r\n\r\n")
        assert "not in allow_hosts" in read_all(sock).decode()
    assert harness.asked == []


def test_allowed_but_unreachable_and_unresolvable(harness: Harness) -> None:
    harness.names["down.test"] = ["127.0.0.1"]
    harness.start(rules("down.test:1", "nowhere.test"))
    with connect(harness.port) as sock:
        sock.sendall(b"CONNECT down.test:1 HTTP/1.1\r\n\r\n")
        assert read_all(sock).startswith(b"HTTP/1.1 502 ")
    assert harness.records[-1].event == "close" and "refused" in harness.records[-1].reason
    with socks_connect(harness.port, b"nowhere.test", 443) as sock:
        assert sock.recv(10)[:2] == b"\x05\x04"  # host unreachable


MALFORMED = [
    (b"\x00\x01garbage\r\n\r\n", b"HTTP/1.1 400 "),
    (b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),  # not absolute-form
    (b"GET https://a.test/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
    (b"GET http://a.test/ HTTP/2\r\n\r\n", b"HTTP/1.1 400 "),
    (b"CONNECT a.test HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
    (b"CONNECT a.test:99999 HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
    (b"CONNECT a.test:443 HTTP/1.1\r\nbad header\r\n\r\n", b"HTTP/1.1 400 "),
    (b"GET http://user:pw@a.test/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
    (b"GET http://" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", b"HTTP/1.1 431 "),
    (b"\x05\x01\x02", b"\x05\xff"),  # no "no authentication" offered: that reply only
    (b"\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", b"\x05\x00\x05\x07"),  # BIND
    (b"\x05\x01\x00\x05\x03\x00\x01\x7f\x00\x00\x01\x00\x50", b"\x05\x00\x05\x07"),  # UDP
    (b"\x05\x01\x00\x05\x01\x00\x09", b"\x05\x00\x05\x08"),  # unknown address type
    (b"\x05\x01\x00\x05\x01\x00\x03\x00\x00\x50", b"\x05\x00\x05\x01"),  # empty name
    (b"\x05\x01\x00\x04\x01\x00\x01", b"\x05\x00\x05\x01"),  # wrong version
    (b"\x05\x01\x00\x05\x01\x00\x03\x07b\xc3\xbccher\x01\xbb", b"\x05\x00\x05\x02"),
    (b"CONNECT 127.1:80 HTTP/1.1\r\n\r\n", b"HTTP/1.1 403 "),  # never resolved as a name
]


@pytest.mark.parametrize(("data", "reply"), MALFORMED)
def test_malformed_requests_get_errors_and_the_server_keeps_serving(
    harness: Harness, web: int, data: bytes, reply: bytes
) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"))
    with connect(harness.port) as sock:
        sock.sendall(data)
        got = read_all(sock)
    assert got.startswith(reply), got[:200]
    if reply == b"\x05\xff":
        assert got == reply
    with connect(harness.port) as sock:
        sock.sendall(f"GET http://web.test:{web}/still HTTP/1.1\r\n\r\n".encode())
        assert b"hello /still" in read_all(sock)


def test_truncated_and_silent_clients_time_out(harness: Harness) -> None:
    harness.start(rules(), ProxyLimits(handshake_timeout=0.3))
    with connect(harness.port) as sock:
        sock.sendall(b"GET http://a.test/ HTTP/1.1\r\n")
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")
    with connect(harness.port) as sock:
        sock.sendall(b"\x05\x01")
        assert read_all(sock) == b"\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00"
    with connect(harness.port) as sock:
        sock.sendall(b"GET http://a.test/")
        sock.shutdown(socket.SHUT_WR)  # closed mid-request: answered, not crashed
        assert read_all(sock).startswith(b"HTTP/1.1 400 ")


def test_a_flood_from_one_client_does_not_starve_another(harness: Harness, web: int) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"), ProxyLimits(max_handshakes=32, max_connections=400))
    flood: list[socket.socket] = []
    try:
        for index in range(300):  # stalled handshakes: nothing, or half a request
            sock = connect(harness.port)
            if index % 2:
                sock.sendall(b"GET http://web.test/ HTTP/1.1\r\nX: ")
            flood.append(sock)
        deadline = time.monotonic() + 2.0
        while harness.proxy is not None and harness.proxy.connections > 40:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        with connect(harness.port) as sock:
            sock.sendall(f"GET http://web.test:{web}/ok HTTP/1.1\r\n\r\n".encode())
            assert b"hello /ok" in read_all(sock)
        assert time.monotonic() - started < 2.0
    finally:
        for sock in flood:
            sock.close()


@pytest.mark.parametrize("splice", [True, False], ids=["splice", "copy"])
def test_concurrent_relays_and_large_transfers(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, splice: bool
) -> None:
    monkeypatch.setattr(proxy_module, "_SPLICE", splice and proxy_module._SPLICE)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    payload = os.urandom(1 << 20)

    def serve() -> None:
        for _ in range(8):
            conn, _ = server.accept()
            with conn:
                data = b""
                while len(data) < len(payload):
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(data[::-1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    harness.start(rules(f"127.0.0.1:{port}"))
    results: list[bytes] = []

    def client() -> None:
        with socks_connect(harness.port, None, port) as sock:
            assert sock.recv(10)[:2] == b"\x05\x00"
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            results.append(read_all(sock))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    thread.join(30)
    server.close()
    assert results == [payload[::-1]] * 8
    closes = [r for r in harness.wait_records(16) if r.event == "close"]
    assert len(closes) == 8 and all(r.bytes_in == r.bytes_out == len(payload) for r in closes)


def test_the_forwarder_runs_standalone_with_python_isolated(
    tmp_path: Path, harness: Harness
) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules("web.test"))
    source = Path(sys.modules["registry_core.egress.forwarder"].__file__ or "")
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(source),
            "--ready-fd",
            str(write_end),
            "0",
            harness.socket_path,
        ],
        pass_fds=(write_end,),
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end) as ready:
            port = int(ready.readline())
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "http://web.test:1/")  # allowed name, nothing listens on port 1
        assert conn.getresponse().status == 403  # port 1 is not among 80, 443
        conn.close()
    finally:
        process.terminate()
        assert process.wait(10) == 0


def test_the_forwarder_listens_on_ipv6_loopback_too(harness: Harness, web: int) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"))
    if len(harness._listeners) < 2:
        pytest.skip("no IPv6 loopback here")
    with socket.create_connection(("::1", harness.port), timeout=10) as sock:
        sock.sendall(f"GET http://web.test:{web}/v6 HTTP/1.1\r\n\r\n".encode())
        assert b"hello /v6" in read_all(sock)


def test_a_stopped_forwarder_stops_listening(tmp_path: Path) -> None:
    port, listeners = forwarder.start(0, str(tmp_path / "none.sock"))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        assert read_all(sock) == b""  # the proxy socket is missing: closed at once
    forwarder.stop(listeners)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_failing_asker_refuses(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    harness.names["new.test"] = ["203.0.113.7"]
    harness.start(rules(ask=True))

    async def broken(request: object) -> Decision:
        raise RuntimeError("broker gone")

    assert harness.proxy is not None
    monkeypatch.setattr(harness.proxy, "ask", broken)
    with connect(harness.port) as sock:
        sock.sendall(b"CONNECT new.test:443 HTTP/1.1\r\n\r\n")
        reply = read_all(sock).decode()
    assert reply.startswith("HTTP/1.1 403 ") and "asking failed: broker gone" in reply
    assert harness.records[-1].by == "ask"


def test_a_failing_record_sink_does_not_hide_the_decision(
    harness: Harness, web: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"))

    def broken(record: object) -> None:
        raise RuntimeError("disk full")

    assert harness.proxy is not None
    monkeypatch.setattr(harness.proxy, "record", broken)
    with connect(harness.port) as sock:
        sock.sendall(f"GET http://web.test:{web}/r HTTP/1.1\r\n\r\n".encode())
        assert b"hello /r" in read_all(sock)


def test_connections_over_the_bound_are_closed_at_once(harness: Harness, web: int) -> None:
    harness.names["web.test"] = ["127.0.0.1"]
    harness.start(rules(f"web.test:{web}"), ProxyLimits(max_connections=4, max_handshakes=4))
    held = [connect(harness.port) for _ in range(4)]
    try:
        deadline = time.monotonic() + 5
        while harness.proxy is not None and harness.proxy.connections < 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with connect(harness.port) as sock:
            sock.sendall(f"GET http://web.test:{web}/ HTTP/1.1\r\n\r\n".encode())
            with contextlib.suppress(ConnectionResetError):
                assert read_all(sock) == b""
    finally:
        for sock in held:
            sock.close()
