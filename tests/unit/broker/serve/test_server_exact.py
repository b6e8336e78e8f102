"""The broker server on a real Unix socket: requests and connections.

Each test runs a real :class:`BrokerServer` in the test's event loop, bound to a
real socket, and talks to it as a client does: frames in, frames out.  What is
pinned here: the flood caps as the server applies them (each cap in its own words,
a finished request no longer counted, refused connections closed after their
error), a peer of another uid refused (a real child process running as
``nobody``), and a question withdrawn when its requester leaves.  The Tool
Browser, errors, shutdown and every op's answer are in ``test_server_ops_exact.py``;
start and close in ``test_server_lifecycle_exact.py``.

Written against the mutants of ``server.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import socket
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from core_helpers import WAIT, FakePrompter, Setup, run
from server_helpers import close_all, connect, elevate, error, serving

from registry_core.broker.question import Approval
from registry_core.broker.serve.flood import FloodLimits, Throttle
from registry_core.broker.serve.server import BrokerServer

NOBODY = 65534
ME = os.getuid()


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "registry_core.broker.serve.server" and r.getMessage().startswith("refused")
    ]


# --- requests in flight ----------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "second_on_another_connection", "words"),
    [
        (
            FloodLimits(requests_per_connection=1),
            False,
            "too many requests pending on this connection (limit 1)",
        ),
        (
            FloodLimits(requests_per_process=1),
            True,
            "too many requests pending from pid {pid} (limit 1)",
        ),
        (
            FloodLimits(requests_per_uid=1),
            True,
            f"too many requests pending for uid {ME} (limit 1)",
        ),
    ],
    ids=["connection", "process", "uid"],
)
def test_a_request_beyond_a_cap_is_refused_in_words_until_one_is_answered(
    setup: Setup,
    base: Path,
    caplog: pytest.LogCaptureFixture,
    caps: FloodLimits,
    second_on_another_connection: bool,
    words: str,
) -> None:
    words = words.format(pid=os.getpid())  # this process's: tests may run in a fork
    prompter = FakePrompter([Approval(False), Approval(False)], hold=True)

    async def go() -> None:
        async with serving(setup, base, prompter, limits=caps):
            first = await connect(base / "run" / "elevate.sock")
            second = await connect(base / "run" / "elevate.sock")
            other = second if second_on_another_connection else first
            await first.send(**elevate(setup, "a"))
            await prompter.until(lambda: len(prompter.asked) == 1)
            await other.send(**elevate(setup, "b"))
            assert await other.reply() == error("b", "too_many_requests", words)
            # Checked against the cap although answered at once (docs/decisions.md).
            await other.send(id="p", op="ping")
            assert await other.reply() == error("p", "too_many_requests", words)
            prompter.release.set()  # "a" is answered: it no longer counts
            reply = await first.reply()
            assert (reply["id"], reply["op"], reply["by"]) == ("a", "decision", "user")
            await other.send(**elevate(setup, "c"))
            await prompter.until(lambda: len(prompter.asked) == 2)  # admitted, asked
            prompter.release.set()
            reply = await other.reply()
            assert (reply["id"], reply["op"], reply["by"]) == ("c", "decision", "user")
            first.close()
            second.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.broker.serve.server"):
        run(go)
    assert [r.id for r in prompter.asked] == ["r1", "r2"]
    assert refusals(caplog) == [f"refused: {words}"]


def test_a_connection_forgets_each_request_once_it_is_answered(setup: Setup, base: Path) -> None:
    prompter = FakePrompter([Approval(False)] * 3)

    async def go() -> list[int]:
        held = []
        async with serving(setup, base, prompter) as server:
            peer = await connect(base / "run" / "elevate.sock")
            for n in range(3):
                await peer.send(**elevate(setup, n))
                assert (await peer.reply())["id"] == n
                [conn] = server.connections
                await asyncio.sleep(0)  # the finished task's callbacks run
                held.append(len(conn.tasks))
            peer.close()
        return held

    assert run(go) == [0, 0, 0]


def test_a_requester_that_leaves_withdraws_its_question(setup: Setup, base: Path) -> None:
    prompter = FakePrompter(hold=True)

    async def go() -> None:
        async with serving(setup, base, prompter):
            peer = await connect(base / "run" / "elevate.sock")
            await peer.send(**elevate(setup, "gone"))
            await prompter.until(lambda: len(prompter.asked) == 1)
            peer.close()
            await prompter.until(lambda: prompter.cancelled == [prompter.asked[0].id])

    run(go)
    [record] = setup.audit()
    assert (record["decision"], record["by"]) == ("deny", "client_gone")


# --- connections -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "words"),
    [
        (
            FloodLimits(connections_per_process=1),
            "too many connections from pid {pid} (limit 1)",
        ),
        (FloodLimits(connections_per_uid=1), f"too many connections for uid {ME} (limit 1)"),
    ],
    ids=["process", "uid"],
)
def test_a_connection_beyond_a_cap_gets_its_error_and_is_closed(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture, caps: FloodLimits, words: str
) -> None:
    words = words.format(pid=os.getpid())  # this process's: tests may run in a fork

    async def go() -> None:
        async with serving(setup, base, FakePrompter(), limits=caps) as server:
            path = base / "run" / "elevate.sock"
            first = await connect(path)
            await first.send(id=1, op="ping")
            assert await first.reply() == {"v": 1, "id": 1, "op": "pong"}
            refused = await connect(path)
            assert await refused.reply() == error(None, "too_many_connections", words)
            assert await refused.at_eof()
            first.close()
            while server.connection_count:  # the first one's place is given back
                await asyncio.sleep(0.01)
            again = await connect(path)
            await again.send(id=2, op="ping")
            assert await again.reply() == {"v": 1, "id": 2, "op": "pong"}
            again.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.broker.serve.server"):
        run(go)
    # The refusal, and nothing else: the refused connection's close is no failure.
    assert [
        r.getMessage() for r in caplog.records if r.name == "registry_core.broker.serve.server"
    ] == [f"refused: {words}"]


def test_refusals_are_logged_once_per_second_with_the_count_held_back(
    setup: Setup, base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    words = f"too many connections from pid {os.getpid()} (limit 1)"

    async def go() -> None:
        caps = FloodLimits(connections_per_process=1)
        async with serving(setup, base, FakePrompter(), limits=caps) as server:
            server._refusals = Throttle(clock=lambda: now[0])
            path = base / "run" / "elevate.sock"
            keep = await connect(path)
            await keep.send(id=1, op="ping")
            await keep.reply()
            for at in (100.0, 100.5, 100.9, 101.0, 101.5, 102.5):
                now[0] = at
                refused = await connect(path)
                assert (await refused.reply())["code"] == "too_many_connections"
                assert await refused.at_eof()
            keep.close()

    with caplog.at_level(logging.WARNING, logger="registry_core.broker.serve.server"):
        run(go)
    assert refusals(caplog) == [
        f"refused: {words}",
        f"refused: {words} (and 2 more refusals in the last second)",
        f"refused: {words} (and 1 more refusals in the last second)",
    ]


PEER = textwrap.dedent(
    """
    import json, os, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    data = b""
    try:
        s.sendall(b'{"v":1,"id":1,"op":"ping"}\\n')
    except BrokenPipeError:  # already closed after the error
        pass
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with the ping unread
        pass
    print(json.dumps({"uid": os.getuid(), "received": data.decode()}))
    """
)


def test_a_peer_of_another_uid_is_refused_in_words_and_closed(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    if ME != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run as root to run a client as another user")
        pytest.skip("needs root to run a client as another user")
    # Reachable by file modes on purpose (bound here, not by bind_socket): this is
    # about SO_PEERCRED.
    open_dir = Path(tempfile.mkdtemp(prefix="sx-peer-"))
    open_dir.chmod(0o711)
    path = open_dir / "elevate.sock"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(path))
    path.chmod(0o666)
    listening.listen(8)
    prompter = FakePrompter()

    async def go() -> tuple[int, dict[str, Any]]:
        server = BrokerServer(setup.broker(prompter), path)
        await server.start(listening)
        try:
            child = await asyncio.create_subprocess_exec(
                "/usr/bin/python3", "-c", PEER, str(path),
                user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(WAIT):
                out, _ = await child.communicate()
            assert child.returncode == 0
            mine = await connect(path)  # this uid is still served
            await mine.send(id=2, op="ping")
            assert await mine.reply() == {"v": 1, "id": 2, "op": "pong"}
            mine.close()
            return child.pid, json.loads(out)
        finally:
            await server.close()
            await close_all()

    try:
        with caplog.at_level(logging.WARNING, logger="registry_core.broker.serve.server"):
            pid, out = run(go)
    finally:
        listening.close()
        shutil.rmtree(open_dir)
    assert out["uid"] == NOBODY
    # One error, then the close: the ping is never answered.
    assert out["received"].splitlines() == [
        json.dumps(
            error(None, "peer_uid", f"uid {NOBODY} may not use this broker"), separators=(",", ":")
        )
    ]
    assert refusals(caplog) == [f"refused a connection from pid {pid} uid {NOBODY}"]
    assert prompter.asked == []


# --- the sandbox budget (containment II, finding 8) --------------------------------


def sandboxes(keys: list[str]) -> Any:
    """An identify hook: the n-th connection is in sandbox ``keys[n]`` ("": outside any)."""
    from registry_core.broker.peer.identity import Requester

    order = iter(keys)

    def identify(pid: int, uid: int, gid: int, host: str) -> Requester:
        key = next(order)
        return Requester(pid=pid, uid=uid, gid=gid, host=host, sandboxed=bool(key), sandbox=key)

    return identify


BUDGET = FloodLimits(
    connections_per_sandbox=2,
    sandboxed_connections_per_uid=3,
    requests_per_sandbox=1,
    sandboxed_requests_per_uid=2,
)


def test_sandboxed_connections_are_capped_per_sandbox_and_together_never_the_agents(
    setup: Setup, base: Path
) -> None:
    keys = ["session 1", "session 1", "session 1", "session 2", "session 3", "", "session 3"]

    async def go() -> None:
        identify = sandboxes(keys)
        async with serving(setup, base, FakePrompter(), limits=BUDGET, identify=identify) as srv:
            path = base / "run" / "elevate.sock"
            held = []
            for _ in range(2):
                held.append(await connect(path))
                await held[-1].send(id=1, op="ping")
                assert await held[-1].reply() == {"v": 1, "id": 1, "op": "pong"}
            refused = await connect(path)
            words = "too many connections from one sandbox (session 1) (limit 2)"
            assert await refused.reply() == error(None, "too_many_connections", words)
            assert await refused.at_eof()
            held.append(await connect(path))  # session 2: the third sandboxed one
            await held[-1].send(id=2, op="ping")
            assert (await held[-1].reply())["op"] == "pong"
            refused = await connect(path)  # session 3: beyond all sandboxed together
            words = f"too many connections from sandboxed processes of uid {ME} (limit 3)"
            assert await refused.reply() == error(None, "too_many_connections", words)
            agent = await connect(path)  # outside any sandbox: admitted
            await agent.send(id=3, op="ping")
            assert await agent.reply() == {"v": 1, "id": 3, "op": "pong"}
            assert srv.peers.sandboxed(ME) == (3, 0)
            held.pop(0).close()
            while srv.peers.sandboxed(ME)[0] == 3:  # its place is given back
                await asyncio.sleep(0.01)
            again = await connect(path)  # session 3 now fits
            await again.send(id=4, op="ping")
            assert (await again.reply())["op"] == "pong"
            assert srv.peers.sandboxed(ME, "session 3") == (1, 0)

    run(go)


def test_sandboxed_requests_are_capped_per_sandbox_and_together_never_the_agents(
    setup: Setup, base: Path
) -> None:
    prompter = FakePrompter([Approval(False)] * 4, hold=True)
    keys = ["session 1", "session 1", "session 2", "session 3", ""]

    async def go() -> None:
        identify = sandboxes(keys)
        caps = dataclasses.replace(BUDGET, sandboxed_connections_per_uid=8)
        async with serving(setup, base, prompter, limits=caps, identify=identify) as srv:
            path = base / "run" / "elevate.sock"
            one, also_one, two, three, agent = [await connect(path) for _ in keys]
            await one.send(**elevate(setup, "a"))
            await prompter.until(lambda: len(prompter.asked) == 1)
            await also_one.send(**elevate(setup, "b"))
            words = "too many requests pending from one sandbox (session 1) (limit 1)"
            assert await also_one.reply() == error("b", "too_many_requests", words)
            await two.send(**elevate(setup, "c"))  # queued behind "a": one question at a time
            while srv.peers.sandboxed(ME)[1] < 2:
                await asyncio.sleep(0.01)
            await three.send(**elevate(setup, "d"))
            words = f"too many requests pending from sandboxed processes of uid {ME} (limit 2)"
            assert await three.reply() == error("d", "too_many_requests", words)
            await agent.send(**elevate(setup, "e"))  # outside any sandbox: admitted
            while srv.peers.requests() < 3:
                await asyncio.sleep(0.01)
            assert srv.peers.sandboxed(ME) == (4, 2)
            one.close()  # the sandboxes leave: their questions are withdrawn
            two.close()
            await prompter.until(lambda: len(prompter.asked) == 2)  # the agent's, asked
            prompter.release.set()
            reply = await agent.reply()
            assert (reply["id"], reply["op"], reply["by"]) == ("e", "decision", "user")

    run(go)
