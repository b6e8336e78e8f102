"""Many clients at once: 500 concurrent connections to a live broker, each answered correctly.

A third of the clients ask for a tool a remembered policy allows, a third for
one a policy denies, a third for one the (fake) person approves, one question
at a time.  Every client checks that its own reply carries its own id and the
decision its tool should get.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from scripted_broker import FakePrompter, audit_records, elevate_message, live_server, run_argv

from registry_core.broker.question import Approval, Remember
from registry_core.broker.remember.policies import file_sha256
from registry_core.broker.serve.flood import FloodLimits
from registry_core.broker.wire.messages import Kind

CLIENTS = 500
EXPECTED = {
    "allowed": ("allow", "policy"),
    "denied": ("deny", "policy"),
    "asked": ("allow", "user"),
}


async def one_client(
    path: Path, index: int, tool: str, tools: Path
) -> tuple[int, str, dict[str, object]]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        request_id = f"client-{index}"
        message = elevate_message(request_id, tool, run_argv(tools / tool), args={"n": index})
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        while True:
            line = await reader.readline()
            assert line.endswith(b"\n"), f"client {index}: connection closed early"
            reply = json.loads(line)
            if reply["op"] != "progress":
                return index, tool, reply
    finally:
        writer.close()
        await writer.wait_closed()


def test_500_concurrent_clients_each_get_their_answer(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in EXPECTED:
        (tools / f"{name}.meta").write_text(json.dumps({"description": name}))
        exe = tools / name
        exe.write_text(f"#!/bin/sh\necho {name}\n")
        exe.chmod(0o755)
    prompter = FakePrompter(default=Approval(True, Remember.ONCE))
    path = tmp_path / "run" / "elevate.sock"
    # 500 clients of this one test process stand for 500 agents' processes: the caps
    # per process (test_broker_flood.py) are lifted so the test is about concurrency.
    many = FloodLimits(
        connections_per_uid=CLIENTS * 2,
        connections_per_process=CLIENTS,
        requests_per_process=CLIENTS,
        requests_per_uid=CLIENTS,
    )
    with live_server([tools], tmp_path, path, prompter, many, cached_registry=True) as server:
        policies = server.broker.policies
        for name, choice in (("allowed", Remember.ALWAYS), ("denied", Remember.DENY_ALWAYS)):
            exe = str(tools / name)
            policies.remember(name, Kind.SANDBOX, "testhost", choice, exe, file_sha256(exe))

        async def everyone() -> list[tuple[int, str, dict[str, object]]]:
            names = list(EXPECTED)
            async with asyncio.timeout(120):
                return await asyncio.gather(
                    *(one_client(path, i, names[i % 3], tools) for i in range(CLIENTS))
                )

        results = asyncio.run(everyone())
        assert server.call(lambda: server.broker.pending) == {}

    assert len(results) == CLIENTS
    for index, tool, reply in results:
        assert reply["op"] == "decision", reply
        assert reply["id"] == f"client-{index}"
        assert (reply["decision"], reply["by"]) == EXPECTED[tool], (index, reply)
    asked = prompter.of_type("approval")
    assert len(asked) == Counter(t for _, t, _ in results)["asked"]
    assert {e["tool"] for e in asked} == {"asked"}
    assert sorted(e["args"]["n"] for e in asked) == [i for i in range(CLIENTS) if i % 3 == 2]
    records = audit_records(tmp_path)
    assert len(records) == CLIENTS
    assert Counter((r["tool"], r["by"]) for r in records) == {
        ("allowed", "policy"): 167,
        ("denied", "policy"): 167,
        ("asked", "user"): 166,
    }
