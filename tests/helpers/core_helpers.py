"""Shared pieces of the broker core's unit tests: a scripted prompter, a test setup.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.decide.denials import DenialLog
from registry_core.broker.decide.facts import REQUEST_CODE_TOOL
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.wire import messages as m
from registry_core.pinned import pinned_argv
from registry_core.registry import Registry, RegistryLoader
from registry_core.trusted import find_trusted

T = TypeVar("T")
HOST = "testhost"
WAIT = 10.0


def pinned_exec(exe: str) -> tuple[str, ...]:
    """The pinned exec argv (registry_core.pinned) of the file ``exe`` with its sha256 now."""
    python = find_trusted("python3") or "/usr/bin/python3"
    return tuple(pinned_argv(python, file_sha256(exe) or "<unreadable>", exe))


class FakePrompter:
    """A scripted person: answers in order, records every question, can hold one open."""

    def __init__(
        self,
        approvals: Iterable[Approval | BaseException] = (),
        passwords: Iterable[str | BaseException | None] = (),
        *,
        available: bool = True,
        hold: bool = False,
    ) -> None:
        self.approvals = collections.deque(approvals)
        self.passwords = collections.deque(passwords)
        self.is_available = available
        self.hold = hold
        self.asked: list[ApprovalRequest] = []
        self.password_asks: list[PasswordRequest] = []
        self.cancelled: list[str] = []
        self.decided: list[tuple[str, bool, str]] = []
        self.release = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def name(self) -> str:
        return "fake"

    def available(self) -> bool:
        return self.is_available

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        self.asked.append(request)
        self._poke()
        answer = await self._answer(request.id, self.approvals, Approval(False))
        assert isinstance(answer, Approval | BaseException)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        self.password_asks.append(request)
        self._poke()
        answer = await self._answer(request.id, self.passwords, None)
        if isinstance(answer, BaseException):
            raise answer
        assert answer is None or isinstance(answer, str)
        return PasswordAnswer(answer)

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        self.decided.append((request_id, approved, by))
        self._poke()

    async def _answer(self, request_id: str, script: collections.deque[Any], default: Any) -> Any:
        try:
            if self.hold:
                await self.release.wait()
                self.release.clear()  # one release answers one question
        except asyncio.CancelledError:
            self.cancelled.append(request_id)
            self._poke()
            raise
        return script.popleft() if script else default

    def _poke(self) -> None:
        self._changed.set()

    async def until(self, check: Callable[[], bool]) -> None:
        """Wait (with a deadline) until ``check()`` holds after some prompter activity."""
        async with asyncio.timeout(WAIT):
            while not check():
                self._changed.clear()
                await self._changed.wait()


def write_tool(directory: Path, name: str, meta: dict[str, Any], body: str = "echo hi\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.meta").write_text(json.dumps(meta))
    exe = directory / name
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return exe


class Setup:
    def __init__(self, tmp_path: Path, tools: Path) -> None:
        self.tools = tools
        self.policy_path = tmp_path / "config" / "policies.yaml"
        self.audit_path = tmp_path / "state" / "audit.jsonl"
        self.policies = PolicyStore(self.policy_path)
        self.loader = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"})
        self.requester = Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), host=HOST)
        self.denials = DenialLog()

    def broker(self, prompter: FakePrompter, **config: Any) -> Broker:
        return Broker(
            registry=self.loader.load,
            prompter=prompter,
            policies=self.policies,
            audit=AuditLog(self.audit_path),
            config=BrokerConfig(host=HOST, **config),
            denials=self.denials,
        )

    def exe(self, name: str) -> str:
        return str(self.tools / name)

    def pinned(self, name: str) -> tuple[str, ...]:
        """The argv of ``name``'s pinned exec, as the dispatcher sends it now."""
        return pinned_exec(self.exe(name))

    def request(self, tool: str = "greet", rid: m.RequestId = 1, **kw: Any) -> m.ElevateRequest:
        fields: dict[str, Any] = {
            "id": rid,
            "tool": tool,
            "kind": m.Kind.SANDBOX,
            "argv": self.pinned(tool) if os.path.exists(self.exe(tool)) else (self.exe(tool),),
            "args": {},
            "cwd": "/",
        }
        fields.update(kw)
        return m.ElevateRequest(**fields)

    def code_request(self, code: str = "id -u", rid: m.RequestId = 1) -> m.ElevateRequest:
        return self.request(REQUEST_CODE_TOOL, rid, argv=("/bin/bash", "-c", code), code=code)

    def audit(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]

    def remember(self, tool: str, choice: Remember, kind: m.Kind = m.Kind.SANDBOX) -> None:
        exe = self.exe(tool)
        self.policies.remember(tool, kind, HOST, choice, exe, file_sha256(exe))


class Snapshots:
    """A registry that hands out the same snapshot until :meth:`reload`."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.current = setup.loader.load()

    def __call__(self) -> Registry:
        return self.current

    def reload(self) -> None:
        self.current = self.setup.loader.load()


def live_broker(
    setup: Setup, prompter: FakePrompter, policies: PolicyStore | None = None
) -> tuple[Broker, Snapshots]:
    snapshots = Snapshots(setup)
    broker = Broker(
        registry=snapshots,
        prompter=prompter,
        policies=policies or setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
        denials=setup.denials,
    )
    return broker, snapshots


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(WAIT * 2):
            return await coro_fn()

    return asyncio.run(main())


def decide(broker: Broker, setup: Setup, *reqs: m.ElevateRequest) -> list[m.DecisionReply]:
    async def go() -> list[m.DecisionReply]:
        return [await broker.elevate(r, setup.requester) for r in reqs]

    return run(go)


def sudo_request(setup: Setup, rid: m.RequestId = 1, **kw: Any) -> m.ElevateRequest:
    argv = (find_trusted("sudo") or "/usr/bin/sudo", "-A", "--", *setup.pinned("rooty"))
    return setup.request("rooty", rid, kind=m.Kind.SUDO, argv=argv, **kw)


def askpass(rid: m.RequestId, grant: str, attempt: int = 1) -> m.AskpassRequest:
    return m.AskpassRequest(id=rid, grant=grant, prompt="[sudo] password: ", attempt=attempt)
