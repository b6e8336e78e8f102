"""``ollie-tools mcp --http``: streamable HTTP on localhost with a per-start bearer token."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"
DEADLINE = 20.0
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Served:
    def __init__(self, root: Path) -> None:
        self.root = root
        tools = root / "tools"
        tools.mkdir()
        (tools / "echo").write_text("#!/bin/sh\ncat\n")
        (tools / "echo").chmod(0o755)
        (tools / "echo.meta").write_text(json.dumps({"description": "Echo.", "readOnly": True}))
        (root / "project").mkdir()
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(root / "home"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "OLLIE_TOOLS_PATH": str(tools),
            "OLLIE_ELEVATE_SOCKET": str(root / "run" / "ollie" / "elevate.sock"),
            "LANG": "C.UTF-8",
        }
        self.token_file = root / "run" / "ollie" / "mcp-http.json"
        self.proc = subprocess.Popen(
            [str(TOOLS_CLI), "mcp", "--http", "--cwd", str(root / "project")],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + DEADLINE
        while not self.token_file.exists():
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "no token file"
            time.sleep(0.05)
        info = json.loads(self.token_file.read_text())
        self.url: str = info["url"]
        self.token: str = info["token"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=DEADLINE)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def post(served: Served, headers: dict[str, str], body: Any = INIT) -> httpx.Response:
    return httpx.post(served.url, json=body, headers={**ACCEPT, **headers}, timeout=DEADLINE)


def test_the_token_file_is_private_and_the_server_is_on_localhost_only(served: Served) -> None:
    mode = stat.S_IMODE(os.stat(served.token_file).st_mode)
    assert mode == 0o600
    assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
    assert len(served.token) >= 40


def test_no_or_a_wrong_token_is_refused(served: Served) -> None:
    assert post(served, {}).status_code == 401
    assert post(served, {"Authorization": "Bearer " + "x" * 43}).status_code == 401
    assert post(served, {"Authorization": served.token}).status_code == 401  # no scheme
    ok = post(served, {"Authorization": f"Bearer {served.token}"})
    assert ok.status_code == 200, ok.text


def test_a_foreign_host_header_is_refused_even_with_the_token(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.token}", "Host": "attacker.example"}
    assert post(served, headers).status_code in (400, 403, 421)


def test_the_sdk_client_lists_and_calls_over_http(served: Served) -> None:
    async def main() -> None:
        headers = {"Authorization": f"Bearer {served.token}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=DEADLINE) as http,
            streamable_http_client(served.url, http_client=http) as (read, write, _),
        ):
            info = types.Implementation(name="http-agent", version="1")
            async with ClientSession(read, write, client_info=info) as session:
                with anyio.fail_after(DEADLINE):
                    init = await session.initialize()
                    assert init.capabilities.tools is not None
                    assert init.capabilities.tools.listChanged is True
                    listed = await session.list_tools()
                    result = await session.call_tool("echo", {"hello": "http"})
        assert [t.name for t in listed.tools] == ["echo"]
        assert result.isError is False
        assert result.structuredContent is not None
        assert json.loads(result.structuredContent["stdout"]) == {"hello": "http"}

    anyio.run(main)


def test_stopping_removes_the_token_file(served: Served) -> None:
    served.stop()
    assert served.proc.returncode == 0
    assert not served.token_file.exists()
