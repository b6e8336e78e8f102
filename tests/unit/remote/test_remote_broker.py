"""The broker core with requests labelled remote: host from the record, the remote's word
only a claim, policies per host, remote tool paths, the remote account in the password
question, and the audit record."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire import messages as m
from registry_core.pinned import pinned_argv
from registry_core.registry import RegistryLoader

HOST = "desk"
REMOTE_TOOLS = "/home/alice/.config/ollie/tools"


class FakePrompter:
    def __init__(self, *answers: Approval, password: str | None = None) -> None:
        self.answers = deque(answers)
        self.password = password
        self.asked: list[ApprovalRequest] = []
        self.passwords: list[PasswordRequest] = []

    @property
    def name(self) -> str:
        return "fake"

    def available(self) -> bool:
        return True

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        self.asked.append(request)
        return self.answers.popleft() if self.answers else Approval(False)

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        self.passwords.append(request)
        return PasswordAnswer(self.password)

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        pass


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    for name, meta in (
        ("probe", {"description": "Probe."}),
        ("rooty", {"description": "Root.", "sudo": True}),
        ("logs", {"variants": [{"match": {"os": "plan9"}, "cmd": "logs_a"}, {"cmd": "logs_b"}]}),
    ):
        (directory / f"{name}.meta").write_text(json.dumps(meta))
    for exe in ("probe", "rooty", "logs_a", "logs_b"):
        (directory / exe).write_text("#!/bin/sh\n")
        (directory / exe).chmod(0o755)
    return directory


def broker(tmp_path: Path, tools: Path, prompter: FakePrompter) -> Broker:
    return Broker(
        registry=RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}).load,
        prompter=prompter,
        policies=PolicyStore(tmp_path / "policies.yaml"),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        config=BrokerConfig(host=HOST),
    )


def remote(host: str) -> Requester:
    return Requester(
        pid=os.getpid(),
        uid=os.getuid(),
        gid=os.getgid(),
        host=host,
        remote=True,
        user="alice",
        tools_dir=REMOTE_TOOLS,
    )


LOCAL = Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), host=HOST)


def elevate(tool: str, argv: list[str], rid: int = 1, **kw: Any) -> m.ElevateRequest:
    fields: dict[str, Any] = {"kind": m.Kind.SANDBOX, "args": {}, "cwd": "/"}
    fields.update(kw)
    return m.ElevateRequest(id=rid, tool=tool, argv=tuple(argv), **fields)


def there(tools: Path, name: str, program: str | None = None) -> list[str]:
    """The remote dispatcher's pinned exec of ``program`` (default: the deployed ``name``),
    with the sha256 of the copy deployed from ``tools``."""
    sha = hashlib.sha256((tools / name).read_bytes()).hexdigest()
    return pinned_argv("/usr/bin/python3", sha, program or f"{REMOTE_TOOLS}/{name}")


def audit(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def test_the_record_names_the_host_and_the_request_only_claims(tmp_path: Path, tools: Path) -> None:
    prompter = FakePrompter(Approval(True))
    b = broker(tmp_path, tools, prompter)
    req = elevate("probe", there(tools, "probe"), host="laptop")  # the remote's claim
    reply = asyncio.run(b.elevate(req, remote("build-server")))
    assert reply.decision is m.Decision.ALLOW
    [asked] = prompter.asked
    assert (asked.host, asked.remote, asked.claimed_host) == ("build-server", True, "laptop")
    assert asked.mismatches == ()
    assert asked.executable == str(tools / "probe")  # the local copy that was deployed
    [record] = audit(tmp_path)
    assert (record["host"], record["remote"], record["claimed_host"]) == (
        "build-server",
        True,
        "laptop",
    )


def test_policies_do_not_leak_between_hosts(tmp_path: Path, tools: Path) -> None:
    prompter = FakePrompter(Approval(True, Remember.ALWAYS), Approval(False), Approval(False))
    b = broker(tmp_path, tools, prompter)
    argv = there(tools, "probe")

    async def scenario() -> list[m.DecisionReply]:
        return [
            await b.elevate(elevate("probe", argv, 1), remote("laptop")),
            await b.elevate(elevate("probe", argv, 2), remote("laptop")),  # remembered
            await b.elevate(elevate("probe", argv, 3), remote("build-server")),
            await b.elevate(elevate("probe", [str(tools / "probe")], 4), LOCAL),
            # A forwarded request claiming another host still counts as its own host.
            await b.elevate(elevate("probe", argv, 5, host="laptop"), remote("build-server")),
        ]

    replies = asyncio.run(scenario())
    assert [r.decision.value for r in replies] == ["allow", "allow", "deny", "deny", "deny"]
    assert replies[1].by is m.DecidedBy.POLICY
    assert [a.host for a in prompter.asked] == ["laptop", "build-server", HOST, "build-server"]


def test_remote_program_paths_are_checked_against_the_remote_tools_dir(
    tmp_path: Path, tools: Path
) -> None:
    prompter = FakePrompter()
    b = broker(tmp_path, tools, prompter)

    async def scenario() -> None:
        # Any variant's cmd is fine: the remote host resolves its own variant.
        await b.elevate(elevate("logs", there(tools, "logs_a"), 1), remote("laptop"))
        await b.elevate(elevate("logs", there(tools, "logs_b"), 2), remote("laptop"))
        elsewhere = there(tools, "probe", "/tmp/elsewhere/probe")
        await b.elevate(elevate("probe", elsewhere, 3), remote("laptop"))
        await b.elevate(elevate("probe", [*there(tools, "probe"), "-x"], 4), remote("laptop"))
        await b.elevate(elevate("probe", there(tools, "probe"), 5), LOCAL)  # not remote
        # A deployed copy by its path, not through the pinned exec; bytes not the copy's.
        await b.elevate(elevate("probe", [f"{REMOTE_TOOLS}/probe"], 6), remote("laptop"))
        wrong = pinned_argv("/usr/bin/python3", "0" * 64, f"{REMOTE_TOOLS}/logs_a")
        await b.elevate(elevate("logs", wrong, 7), remote("laptop"))

    asyncio.run(scenario())
    flagged = [bool(a.mismatches) for a in prompter.asked]
    assert flagged == [False, False, True, True, True, True, True]


def test_remote_sudo_asks_for_the_remote_accounts_password(tmp_path: Path, tools: Path) -> None:
    prompter = FakePrompter(Approval(True), password="s3cret")
    b = broker(tmp_path, tools, prompter)
    requester = remote("laptop")

    async def scenario() -> m.Reply:
        argv = ["/usr/bin/sudo", "-A", "--", *there(tools, "rooty")]
        decision = await b.elevate(elevate("rooty", argv, kind=m.Kind.SUDO), requester)
        assert decision.grant is not None and not prompter.asked[0].mismatches
        ask = m.AskpassRequest(id=2, grant=decision.grant, prompt="[sudo] password: ", attempt=1)
        return await b.askpass(ask, requester)

    reply = asyncio.run(scenario())
    assert isinstance(reply, m.PasswordReply) and reply.password == "s3cret"
    [question] = prompter.passwords
    assert question.user == "alice"
    assert (question.approval.host, question.approval.remote) == ("laptop", True)


def test_the_claim_is_shown_as_a_claim(tmp_path: Path, tools: Path) -> None:
    from registry_core.broker.ask.text import approval_text

    prompter = FakePrompter(Approval(False))
    b = broker(tmp_path, tools, prompter)
    req = elevate("probe", there(tools, "probe"), host="laptop")
    asyncio.run(b.elevate(req, remote("build-server")))
    text = approval_text(prompter.asked[0])
    [host] = [f.lines for f in text.fields if f.label == "Host"]
    assert host == ("build-server  (REMOTE)  (it calls itself laptop)",)
    assert any("REMOTE" in w and "build-server" in w for w in text.warnings)
