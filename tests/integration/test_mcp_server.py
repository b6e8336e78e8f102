"""``ollie-tools mcp`` driven by the official MCP SDK's client over stdio.

Every test starts the real server as a subprocess (``ollie-tools mcp``) and
talks to it with ``mcp.ClientSession``: initialize, list, call, progress,
cancellation, ``list_changed``, and elevated tools decided by a live broker
(the real :class:`BrokerServer` with a scripted person).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from scripted_broker import FakePrompter, audit_records, live_server

from registry_core.broker.question import Approval, Remember

TOOLS_CLI = Path(sys.executable).parent / "ollie-tools"
CLIENT = "test-agent"
DEADLINE = 20.0
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
ECHO_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "What to echo."},
        "times": {"type": "integer", "minimum": 1},
    },
    "required": ["text"],
    "additionalProperties": False,
}


def _tool(directory: Path, name: str, script: str | None, meta: dict[str, Any] | str) -> None:
    if script is not None:
        path = directory / name
        path.write_text(script)
        path.chmod(0o755)
    text = meta if isinstance(meta, str) else json.dumps(meta)
    (directory / f"{name}.meta").write_text(text)


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tools = root / "tools"
        self.home = root / "home"
        self.cwd = root / "cwd"
        for directory in (self.tools, self.home, self.cwd, root / "tmpdir"):
            directory.mkdir()
        self.socket = root / "run" / "ollie" / "elevate.sock"
        t = self.tools
        _tool(t, "echo_args", "#!/bin/sh\ncat\n", {
            "description": "Echo the arguments.", "readOnly": True, "args": ECHO_SCHEMA,
        })  # fmt: skip
        _tool(t, "variant_tool", "#!/bin/sh\necho variant\n", {
            "description": "Top-level description.",
            "args": {"type": "object"},
            "variants": [
                {"match": {"os": "darwin"}, "description": "The macOS variant."},
                {"match": {"os": "linux"}, "description": "The Linux variant.", "readOnly": True},
            ],
        })  # fmt: skip
        _tool(t, "hidden_tool", "#!/bin/sh\necho hidden\n", {
            "description": "Never on this host.",
            "variants": [{"match": {"os": "darwin"}}],
        })  # fmt: skip
        _tool(t, "broken_tool", "#!/bin/sh\necho broken\n", '{"description": "broken",')
        _tool(t, "failing", "#!/bin/sh\ncat >/dev/null\necho boom >&2\nexit 3\n", {
            "description": "Always fails.", "args": {"type": "object"},
        })  # fmt: skip
        _tool(t, "picture", "#!/bin/sh\ncat >/dev/null\n"
              f"echo '{{\"content\":[{{\"type\":\"image\",\"data\":\"{PNG}\","
              "\"mimeType\":\"image/png\"},{\"type\":\"text\",\"text\":\"a picture\"}]}'\n", {
            "description": "Returns an image.",
        })  # fmt: skip
        # Starts a grandchild (found by its unique argument: the tool's pids are
        # those of its own PID namespace), says so in its cwd, then waits.
        self.token = f"300.{secrets.randbelow(10**9)}"
        _tool(t, "sleeper", f"#!/bin/sh\ncat >/dev/null\nsleep {self.token} &\n"
              'echo "$$ $!" > "$PWD/pids.tmp" && mv "$PWD/pids.tmp" "$PWD/pids"\nwait\n', {
            "description": "Sleeps for a long time.",
        })  # fmt: skip
        _tool(t, "touch_home", '#!/bin/sh\ncat >/dev/null\necho "written" > "$HOME/proof.txt"'
              " && echo wrote-home\n", {
            "description": "Write a file into $HOME.", "elevated": True,
        })  # fmt: skip
        _tool(t, "root_tool", "#!/bin/sh\nid -u\n", {"description": "As root.", "sudo": True})

    def environ(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmpdir"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_STATE_HOME": str(self.root / "state"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "OLLIE_ELEVATE_SOCKET": str(self.socket),
            "OLLIE_TOOLS_PATH": str(self.tools),
            "LANG": "C.UTF-8",
        }


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


Handler = Callable[[Any], Awaitable[None]]


@asynccontextmanager
async def session(
    env: Env, *extra: str, on_message: Handler | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=str(TOOLS_CLI),
        args=["mcp", "--cwd", str(env.cwd), *extra],
        env=env.environ(),
        cwd=str(env.cwd),
    )

    async def handler(message: Any) -> None:
        if on_message is not None:
            await on_message(message)

    with (env.root / "server-stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            info = types.Implementation(name=CLIENT, version="1.0")
            async with ClientSession(read, write, message_handler=handler, client_info=info) as s:
                with anyio.fail_after(DEADLINE):
                    await s.initialize()
                yield s


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


# --- initialize and list ------------------------------------------------------------


def test_initialize_announces_tools_with_list_changed(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            caps = s.get_server_capabilities()
            assert caps is not None and caps.tools is not None
            assert caps.tools.listChanged is True

    run(main)


def test_list_has_available_tools_only_with_exact_schemas_and_annotations(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
        assert sorted(listed) == [
            "echo_args",
            "failing",
            "picture",
            "root_tool",
            "sleeper",
            "touch_home",
            "variant_tool",
        ]  # fmt: skip  (hidden_tool and broken_tool never appear)
        echo = listed["echo_args"]
        assert echo.inputSchema == ECHO_SCHEMA
        assert echo.description == "Echo the arguments."
        assert echo.annotations is not None and echo.annotations.readOnlyHint is True
        assert echo.annotations.destructiveHint is None
        variant = listed["variant_tool"]  # the Linux variant's fields merged over the top
        assert variant.description == "The Linux variant."
        assert variant.annotations is not None and variant.annotations.readOnlyHint is True
        assert variant.inputSchema == {"type": "object"}
        for name, note in (("touch_home", "outside the sandbox"), ("root_tool", "root via sudo")):
            tool = listed[name]
            assert tool.annotations is not None
            assert tool.annotations.destructiveHint is True
            assert tool.annotations.readOnlyHint is False
            assert tool.annotations.title is not None
            assert "asks for approval" in tool.annotations.title
            assert note in tool.annotations.title
            assert tool.description is not None and "asks for approval" in tool.description

    run(main)


# --- calls ----------------------------------------------------------------------------


def test_call_runs_the_tool_sandboxed_and_returns_its_output(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            result = await s.call_tool("echo_args", {"text": "hello", "times": 2})
        assert result.isError is False
        assert json.loads(text_of(result)) == {"text": "hello", "times": 2}
        facts = result.structuredContent
        assert facts is not None
        assert facts["exit_code"] == 0
        assert json.loads(facts["stdout"]) == {"text": "hello", "times": 2}
        assert facts["stderr"] == ""
        assert facts["sandboxed"] is True and facts["elevated"] is False

    run(main)


def test_structured_output_maps_to_image_and_text_content(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            result = await s.call_tool("picture", {})
        assert result.isError is False
        image, text = result.content
        assert isinstance(image, types.ImageContent)
        assert (image.data, image.mimeType) == (PNG, "image/png")
        assert isinstance(text, types.TextContent) and text.text == "a picture"

    run(main)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "text"),
        ({"text": 5}, "text"),
        ({"text": "x", "times": 0}, "times"),
        ({"text": "x", "extra": 1}, "extra"),
    ],
)
def test_schema_violation_is_a_tool_error_naming_the_field(
    env: Env, arguments: dict[str, Any], field: str
) -> None:
    async def main() -> None:
        async with session(env) as s:
            result = await s.call_tool("echo_args", arguments)
            assert result.isError is True
            assert "invalid arguments" in text_of(result)
            assert field in text_of(result)
            assert result.structuredContent is not None
            assert field in result.structuredContent["field"] or field in text_of(result)
            # The session goes on.
            ok = await s.call_tool("echo_args", {"text": "still here"})
            assert ok.isError is False

    run(main)


def test_tool_error_keeps_exit_code_and_stderr(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            result = await s.call_tool("failing", {})
        assert result.isError is True
        assert "boom" in text_of(result)
        assert result.structuredContent is not None
        assert result.structuredContent["exit_code"] == 3
        assert result.structuredContent["stderr"].strip() == "boom"

    run(main)


def test_hidden_broken_and_unknown_tools_are_errors_not_crashes(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            for name in ("hidden_tool", "broken_tool", "no_such_tool"):
                result = await s.call_tool(name, {})
                assert result.isError is True, name
                assert name in text_of(result)

    run(main)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie of ours counts as gone (its parent reaps it).
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _tree(env: Env) -> list[int]:
    """Host pids of the running sleeper tool and its grandchild."""
    needles = (env.token.encode(), str(env.tools / "sleeper").encode())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                if any(n in cmdline for n in needles) and not _gone(int(entry)):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _wait_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not all(_gone(p) for p in pids):
        assert time.monotonic() < deadline, f"still running: {pids}"
        time.sleep(0.05)


def test_timeout_kills_the_tool_and_says_so(env: Env) -> None:
    async def main() -> None:
        async with session(env, "--timeout", "1") as s:
            with anyio.fail_after(DEADLINE):
                result = await s.call_tool("sleeper", {})
        assert result.isError is True
        assert "timed out after 1 s" in text_of(result)
        assert result.structuredContent is not None
        assert result.structuredContent["timed_out"] is True

    run(main)
    _wait_gone(_tree(env))


def test_progress_is_reported_and_cancel_kills_the_whole_tree(env: Env) -> None:
    progress: list[tuple[float, str | None]] = []
    pids: list[int] = []

    async def main() -> None:
        async with session(env, "--progress-interval", "0.2") as s:
            got_progress = anyio.Event()
            outcome: list[BaseException | types.CallToolResult] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, message))
                got_progress.set()

            request_id = s._request_id  # the id the next request will carry

            async def call() -> None:
                try:
                    outcome.append(await s.call_tool("sleeper", {}, progress_callback=on_progress))
                except McpError as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                with anyio.fail_after(DEADLINE):
                    await got_progress.wait()
                    while not (env.cwd / "pids").exists():
                        await anyio.sleep(0.05)
                pids.extend(_tree(env))
                assert not any(_gone(p) for p in pids)
                await s.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(
                                requestId=request_id, reason="the test cancels"
                            )
                        )
                    )
                )
                await anyio.to_thread.run_sync(_wait_gone, pids)
                group.cancel_scope.cancel()  # the cancelled request gets no answer
            # The server lives on after a cancel.
            assert (await s.call_tool("echo_args", {"text": "after"})).isError is False

    run(main)
    assert progress and progress[0][1] is not None and "running for" in progress[0][1]
    assert len(pids) >= 2  # the tool and its grandchild (plus bwrap, which names the tool)
    _wait_gone(pids)


# --- list_changed ---------------------------------------------------------------------


def test_editing_a_meta_sends_list_changed_and_the_new_listing(env: Env) -> None:
    async def main() -> None:
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification) and isinstance(
                message.root, types.ToolListChangedNotification
            ):
                changed.set()

        async with session(env, on_message=on_message) as s:
            before = {t.name: t for t in (await s.list_tools()).tools}
            assert before["failing"].description == "Always fails."
            meta = {"description": "Fails, edited.", "args": {"type": "object"}}
            (env.tools / "failing.meta").write_text(json.dumps(meta))
            with anyio.fail_after(DEADLINE):
                await changed.wait()
            after = {t.name: t for t in (await s.list_tools()).tools}
            assert after["failing"].description == "Fails, edited."
            # A tool that becomes broken disappears, with another notification.
            changed = anyio.Event()
            (env.tools / "echo_args.meta").write_text("{not json")
            with anyio.fail_after(DEADLINE):
                await changed.wait()
            assert "echo_args" not in {t.name for t in (await s.list_tools()).tools}

    run(main)


# --- elevation through a live broker --------------------------------------------------


def test_elevated_tool_approved_through_the_broker_with_the_client_named(env: Env) -> None:
    prompter = FakePrompter([Approval(True, Remember.ONCE)])
    with live_server([env.tools], env.root, env.socket, prompter):

        async def main() -> None:
            async with session(env) as s:
                result = await s.call_tool("touch_home", {})
            assert result.isError is False, text_of(result)
            assert text_of(result) == "wrote-home\n"
            assert result.structuredContent is not None
            assert result.structuredContent["elevated"] is True

        run(main)
    assert (env.home / "proof.txt").read_text() == "written\n"
    [asked] = prompter.requests
    assert asked.tool == "touch_home"
    assert asked.client == CLIENT
    [record] = audit_records(env.root)
    assert (record["tool"], record["decision"], record["client"]) == ("touch_home", "allow", CLIENT)


def test_elevated_tool_denied_is_an_error_result_with_the_reason(env: Env) -> None:
    prompter = FakePrompter([Approval(False, Remember.ONCE, "not today")])
    with live_server([env.tools], env.root, env.socket, prompter):

        async def main() -> None:
            async with session(env) as s:
                with anyio.fail_after(DEADLINE):
                    result = await s.call_tool("touch_home", {})
            assert result.isError is True
            assert "denied" in text_of(result) and "not today" in text_of(result)
            assert result.structuredContent is not None
            assert result.structuredContent["denied"] is True

        run(main)
    assert not (env.home / "proof.txt").exists()
    [record] = audit_records(env.root)
    assert (record["decision"], record["client"]) == ("deny", CLIENT)


def test_without_a_broker_an_elevated_call_is_refused_never_asked_on_stdio(env: Env) -> None:
    async def main() -> None:
        async with session(env) as s:
            with anyio.fail_after(DEADLINE):
                result = await s.call_tool("touch_home", {})
            assert result.isError is True
            assert "no elevation broker" in text_of(result)

    run(main)
    assert not (env.home / "proof.txt").exists()


def test_elevated_tools_decided_by_a_headless_broker_and_its_policies(env: Env) -> None:
    """``ollie-broker --front-end none``: nobody to ask, so remembered policies decide."""
    import subprocess

    from registry_core.broker.wire.client import broker_alive

    environ = env.environ()
    for verb, tool in (("allow", "touch_home"), ("deny", "root_tool")):
        done = subprocess.run(
            [str(TOOLS_CLI), "policy", verb, tool],
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    broker = subprocess.Popen(
        [str(Path(sys.executable).parent / "ollie-broker"), "--front-end", "none"],
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while not broker_alive(env.socket, timeout=1.0):
            assert broker.poll() is None, broker.stderr.read() if broker.stderr else ""
            assert time.monotonic() < deadline, "the broker did not come up"
            time.sleep(0.05)

        async def main() -> None:
            async with session(env) as s:
                with anyio.fail_after(DEADLINE):
                    allowed = await s.call_tool("touch_home", {})
                    denied = await s.call_tool("root_tool", {})
            assert allowed.isError is False, text_of(allowed)
            assert denied.isError is True
            assert "denied" in text_of(denied) and "remembered" in text_of(denied)

        run(main)
    finally:
        broker.terminate()
        broker.wait(timeout=DEADLINE)
        if broker.stderr is not None:
            broker.stderr.close()
    assert (env.home / "proof.txt").read_text() == "written\n"
    records = audit_records(env.root)
    assert [(r["tool"], r["decision"], r["by"], r["client"]) for r in records] == [
        ("touch_home", "allow", "policy", CLIENT),
        ("root_tool", "deny", "policy", CLIENT),
    ]


def _cancel(request_id: int) -> types.ClientNotification:
    return types.ClientNotification(
        types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason="test")
        )
    )


def test_cancel_while_the_person_decides_withdraws_the_dialog(env: Env) -> None:
    prompter = FakePrompter([Approval(True)], hold_approvals=True)
    with live_server([env.tools], env.root, env.socket, prompter):

        async def main() -> None:
            async with session(env, "--progress-interval", "0.2") as s:
                request_id = s._request_id  # the id the next request will carry
                waiting = anyio.Event()
                texts: list[str] = []

                async def on_progress(value: float, total: float | None, text: str | None) -> None:
                    if text and "approval" in text:
                        texts.append(text)
                        waiting.set()

                async with anyio.create_task_group() as group:

                    async def call() -> None:
                        with pytest.raises(McpError):
                            await s.call_tool("touch_home", {}, progress_callback=on_progress)

                    group.start_soon(call)
                    await anyio.to_thread.run_sync(
                        lambda: prompter.wait_for(lambda e: e["type"] == "approval")
                    )
                    with anyio.fail_after(DEADLINE):
                        await waiting.wait()  # progress says what the call waits for
                    # ... and who answers: here no tray, a broker on the test's socket.
                    assert str(env.socket) in texts[0] and "tray" not in texts[0].lower()
                    await s.send_notification(_cancel(request_id))
                    await anyio.to_thread.run_sync(
                        lambda: prompter.wait_for(lambda e: e["type"] == "cancelled")
                    )
                    group.cancel_scope.cancel()
                # The server is still there.
                assert (await s.call_tool("echo_args", {"text": "x"})).isError is False

        run(main)
        prompter.release()  # a late "yes" has nobody to go to
    assert not (env.home / "proof.txt").exists()
    [record] = audit_records(env.root)
    assert (record["decision"], record["by"], record["client"]) == ("deny", "client_gone", CLIENT)


# --- a client that filters the environment -------------------------------------------


@pytest.fixture
def logind_runtime() -> Any:
    """``/run/user/<uid>`` as systemd-logind makes it (0700, ours), for the test only."""
    runtime = Path("/run/user") / str(os.getuid())
    if runtime.exists():
        if (runtime / "ollie" / "elevate.sock").exists():
            pytest.skip(f"a broker of this user already listens in {runtime}")
        yield runtime
        return
    if not os.access("/run", os.W_OK):
        pytest.skip("cannot create /run/user/<uid> here")
    runtime.parent.mkdir(mode=0o755, exist_ok=True)
    runtime.mkdir(mode=0o700)
    try:
        yield runtime
    finally:
        import shutil

        shutil.rmtree(runtime, ignore_errors=True)


def test_a_client_passing_only_home_path_shell_and_term_reaches_the_desktop_broker(
    env: Env, logind_runtime: Path
) -> None:
    # Codex and the MCP SDKs start servers with a short default environment: no
    # XDG_RUNTIME_DIR, no OLLIE_* variables. The broker is found in /run/user/<uid>.
    tools = env.home / ".config" / "ollie" / "tools"
    tools.parent.mkdir(parents=True)
    env.tools.rename(tools)
    prompter = FakePrompter([Approval(True, Remember.ONCE)])
    socket = logind_runtime / "ollie" / "elevate.sock"
    minimal = {"HOME": str(env.home), "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "TERM": "dumb"}
    with live_server([tools], env.root, socket, prompter):

        async def main() -> None:
            params = StdioServerParameters(
                command=str(TOOLS_CLI), args=["mcp", "--cwd", str(env.cwd)], env=minimal
            )
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as s,
            ):
                with anyio.fail_after(DEADLINE):
                    await s.initialize()
                    result = await s.call_tool("touch_home", {})
            assert result.isError is False, text_of(result)

        run(main)
    assert (env.home / "proof.txt").read_text() == "written\n"
    assert [r.tool for r in prompter.requests] == ["touch_home"]
