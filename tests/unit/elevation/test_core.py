"""Unit tests of the broker core: policies, the question queue, fail-closed paths, audit.

The broker runs on a real registry (a temporary tools directory), a real
policy store and audit log; the person is a :class:`FakePrompter` whose
answers are scripted and which can "think" (wait on an asyncio.Event) so the
tests can look at the queue while a question is open.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from registry_core.elevation import messages as m
from registry_core.elevation.audit import AuditLog
from registry_core.elevation.core import Broker, BrokerConfig
from registry_core.elevation.facts import REQUEST_CODE_TOOL
from registry_core.elevation.identity import Requester
from registry_core.elevation.policies import PolicyStore, file_sha256
from registry_core.elevation.prompter import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)
from registry_core.registry import RegistryLoader

T = TypeVar("T")
HOST = "testhost"
WAIT = 10.0


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


# --- fixtures ----------------------------------------------------------------------


def write_tool(directory: Path, name: str, meta: dict[str, Any], body: str = "echo hi\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.meta").write_text(json.dumps(meta))
    exe = directory / name
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return exe


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    write_tool(directory, "greet", {"description": "Say hello."})
    write_tool(directory, "other", {"description": "Another tool."})
    write_tool(directory, "rooty", {"description": "Needs root.", "sudo": True})
    write_tool(
        directory,
        "hidden",
        {"description": "Never here.", "variants": [{"match": {"env": "OLLIE_NOT_SET_EVER"}}]},
    )
    return directory


class Setup:
    def __init__(self, tmp_path: Path, tools: Path) -> None:
        self.tools = tools
        self.policy_path = tmp_path / "config" / "policies.yaml"
        self.audit_path = tmp_path / "state" / "audit.jsonl"
        self.policies = PolicyStore(self.policy_path)
        self.loader = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"})
        self.requester = Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), host=HOST)

    def broker(self, prompter: FakePrompter, **config: Any) -> Broker:
        return Broker(
            registry=self.loader.load,
            prompter=prompter,
            policies=self.policies,
            audit=AuditLog(self.audit_path),
            config=BrokerConfig(host=HOST, **config),
        )

    def exe(self, name: str) -> str:
        return str(self.tools / name)

    def request(self, tool: str = "greet", rid: m.RequestId = 1, **kw: Any) -> m.ElevateRequest:
        fields: dict[str, Any] = {
            "id": rid,
            "tool": tool,
            "kind": m.Kind.SANDBOX,
            "argv": (self.exe(tool),),
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


@pytest.fixture
def setup(tmp_path: Path, tools: Path) -> Setup:
    return Setup(tmp_path, tools)


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(WAIT * 2):
            return await coro_fn()

    return asyncio.run(main())


def decide(broker: Broker, setup: Setup, *reqs: m.ElevateRequest) -> list[m.DecisionReply]:
    async def go() -> list[m.DecisionReply]:
        return [await broker.elevate(r, setup.requester) for r in reqs]

    return run(go)


# --- remembered policies -------------------------------------------------------------


def test_remembered_allow_decides_without_asking(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter()
    [reply] = decide(setup.broker(prompter), setup, setup.request(rid="a"))
    assert (reply.id, reply.decision, reply.by) == ("a", m.Decision.ALLOW, m.DecidedBy.POLICY)
    assert reply.remember == "always"
    assert reply.grant is None  # only sudo allows carry a grant
    assert prompter.asked == []
    assert [(r["decision"], r["by"]) for r in setup.audit()] == [("allow", "policy")]


def test_remembered_deny_decides_without_asking(setup: Setup) -> None:
    setup.remember("greet", Remember.DENY_ALWAYS)
    prompter = FakePrompter([Approval(True)])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by, reply.remember) == (
        m.Decision.DENY,
        m.DecidedBy.POLICY,
        "deny_always",
    )
    assert prompter.asked == []


def test_policy_is_per_kind_and_host(setup: Setup) -> None:
    setup.remember("rooty", Remember.ALWAYS, kind=m.Kind.SANDBOX)
    prompter = FakePrompter([Approval(False), Approval(False)])
    broker = setup.broker(prompter)
    sudo_req = setup.request(
        "rooty", kind=m.Kind.SUDO, argv=("sudo", "-A", "--", setup.exe("rooty"))
    )
    remote = setup.request("rooty", 2, host="elsewhere")
    replies = decide(broker, setup, sudo_req, remote)
    assert [r.by for r in replies] == [m.DecidedBy.USER, m.DecidedBy.USER]
    assert [a.tool for a in prompter.asked] == ["rooty", "rooty"]
    # A local connection's host claim is shown, never trusted.
    assert not prompter.asked[1].remote
    assert prompter.asked[1].host == HOST
    assert prompter.asked[1].claimed_host == "elsewhere"


def test_a_local_claim_of_another_host_cannot_use_its_allows(setup: Setup) -> None:
    exe = setup.exe("greet")
    setup.policies.remember(
        "greet", m.Kind.SANDBOX, "build-server", Remember.ALWAYS, exe, file_sha256(exe)
    )
    prompter = FakePrompter([Approval(False)])
    broker = setup.broker(prompter)
    [reply] = decide(broker, setup, setup.request("greet", host="build-server"))
    assert reply.by is m.DecidedBy.USER
    assert prompter.asked[0].host == HOST


@pytest.mark.parametrize(
    "choice", [Remember.SESSION, Remember.MINUTES_15, Remember.HOUR, Remember.ALWAYS]
)
def test_remember_choice_reaches_the_policy_store(setup: Setup, choice: Remember) -> None:
    prompter = FakePrompter([Approval(True, choice)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert (first.decision, first.by, first.remember) == (
        m.Decision.ALLOW,
        m.DecidedBy.USER,
        choice.value,
    )
    policy = setup.policies.lookup(
        "greet", m.Kind.SANDBOX, HOST, setup.exe("greet"), file_sha256(setup.exe("greet"))
    )
    assert policy is not None
    assert policy.remember is choice
    assert policy.executable == setup.exe("greet")
    assert (second.decision, second.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)
    assert len(prompter.asked) == 1
    stored = PolicyStore(setup.policy_path).lookup(
        "greet", m.Kind.SANDBOX, HOST, setup.exe("greet"), file_sha256(setup.exe("greet"))
    )
    # session choices live in the broker's memory only; the rest are in the file
    assert (stored is None) == (choice is Remember.SESSION)


def test_once_is_not_remembered(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ONCE), Approval(True, Remember.ONCE)])
    replies = decide(setup.broker(prompter), setup, setup.request(rid=1), setup.request(rid=2))
    assert [r.by for r in replies] == [m.DecidedBy.USER, m.DecidedBy.USER]
    assert [r.remember for r in replies] == ["once", "once"]
    assert len(prompter.asked) == 2
    assert setup.policies.list() == []


def test_remembered_allow_is_bound_to_the_executable_hash(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(False)])
    broker = setup.broker(prompter)
    [first] = decide(broker, setup, setup.request(rid=1))
    assert first.by is m.DecidedBy.USER
    [again] = decide(broker, setup, setup.request(rid=2))
    assert again.by is m.DecidedBy.POLICY
    exe = Path(setup.exe("greet"))
    exe.write_text("#!/bin/sh\necho something else entirely\n")  # same path, new content
    [changed] = decide(broker, setup, setup.request(rid=3))
    assert (changed.decision, changed.by) == (m.Decision.DENY, m.DecidedBy.USER)
    assert len(prompter.asked) == 2
    assert prompter.asked[1].sha256 == file_sha256(exe)


def test_code_requests_are_never_remembered_as_allow(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(True, Remember.HOUR)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.code_request(rid=1), setup.code_request(rid=2))
    assert (first.decision, first.remember) == (m.Decision.ALLOW, "once")
    assert (second.decision, second.by, second.remember) == (
        m.Decision.ALLOW,
        m.DecidedBy.USER,
        "once",
    )
    assert len(prompter.asked) == 2
    assert prompter.asked[0].code == "id -u"
    assert prompter.asked[0].tool == REQUEST_CODE_TOOL
    assert setup.policies.list() == []
    assert [r["remember"] for r in setup.audit()] == ["once", "once"]


def test_an_allow_policy_never_covers_code(setup: Setup) -> None:
    bash = os.path.realpath("/bin/bash")
    setup.policies.remember(
        REQUEST_CODE_TOOL, m.Kind.SANDBOX, HOST, Remember.ALWAYS, bash, file_sha256(bash)
    )
    prompter = FakePrompter([Approval(False)])
    [reply] = decide(setup.broker(prompter), setup, setup.code_request())
    assert reply.by is m.DecidedBy.USER
    assert len(prompter.asked) == 1


def test_mismatching_argv_is_never_remembered_as_allow(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.ALWAYS), Approval(False)])
    broker = setup.broker(prompter)
    odd = setup.request(argv=("/bin/sh", "-c", "rm -rf ~"))
    first, second = decide(broker, setup, odd, setup.request(rid=2))
    assert (first.decision, first.remember) == (m.Decision.ALLOW, "once")
    assert prompter.asked[0].mismatches  # shown loudly in the dialog
    assert setup.policies.list() == []
    assert second.by is m.DecidedBy.USER  # the correct request is asked again


def test_an_allow_policy_never_covers_a_mismatch(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    prompter = FakePrompter([Approval(False)])
    odd = setup.request(argv=("/bin/sh", "-c", "rm -rf ~"))
    [reply] = decide(setup.broker(prompter), setup, odd)
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.USER)


def test_deny_always_is_stored_and_decides_next_time(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.request(rid=1), setup.request(rid=2))
    assert (first.decision, first.by, first.remember) == (
        m.Decision.DENY,
        m.DecidedBy.USER,
        "deny_always",
    )
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.POLICY)
    [policy] = PolicyStore(setup.policy_path).list()
    assert (policy.tool, policy.decision) == ("greet", m.Decision.DENY)


def test_deny_always_for_code_is_kept(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.DENY_ALWAYS)])
    broker = setup.broker(prompter)
    first, second = decide(broker, setup, setup.code_request(rid=1), setup.code_request("ls", 2))
    assert first.remember == "deny_always"
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.POLICY)


def test_a_plain_deny_is_once(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False, Remember.ALWAYS)])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.remember) == (m.Decision.DENY, "once")
    assert setup.policies.list() == []


# --- fail closed ---------------------------------------------------------------------


def test_paused_denies_without_asking(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)])
    broker = setup.broker(prompter)
    broker.set_paused(True)
    [reply] = decide(broker, setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    assert prompter.asked == []
    assert setup.audit()[-1]["by"] == "paused"


def test_unavailable_front_end_denies(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], available=False)
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert "fake" in reply.reason
    assert prompter.asked == []


def test_policies_still_decide_without_a_front_end(setup: Setup) -> None:
    setup.remember("greet", Remember.ALWAYS)
    [reply] = decide(setup.broker(FakePrompter(available=False)), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.ALLOW, m.DecidedBy.POLICY)


def test_prompt_timeout_denies(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter, prompt_timeout=0.05)

    async def go() -> m.DecisionReply:
        reply = await broker.elevate(setup.request(), setup.requester)
        # the dialog was taken away by the time the denial is sent
        assert prompter.cancelled == [prompter.asked[0].id]
        return reply

    reply = run(go)
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)
    assert prompter.decided == [(prompter.asked[0].id, False, "timeout")]
    assert setup.audit()[-1]["by"] == "timeout"


def test_the_requesters_timeout_is_used_when_shorter(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter, prompt_timeout=3600)
    [reply] = decide(broker, setup, setup.request(timeout=0.05))
    assert reply.by is m.DecidedBy.TIMEOUT
    assert prompter.asked[0].timeout == pytest.approx(0.05)


def test_front_end_exception_denies(setup: Setup) -> None:
    prompter = FakePrompter([RuntimeError("kdialog crashed")])
    [reply] = decide(setup.broker(prompter), setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert "kdialog crashed" in reply.reason
    assert setup.policies.list() == []


def test_unknown_and_unavailable_tools_are_typed_errors(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())
    with pytest.raises(m.MessageError) as unknown:
        decide(broker, setup, setup.request("nope", argv=("/bin/true",)))
    assert (unknown.value.error_code, unknown.value.request_id) == (m.ErrorCode.UNKNOWN_TOOL, 1)
    with pytest.raises(m.MessageError) as hidden:
        decide(broker, setup, setup.request("hidden"))
    assert hidden.value.error_code is m.ErrorCode.TOOL_UNAVAILABLE
    assert setup.audit() == []


# --- the queue -----------------------------------------------------------------------


def test_questions_are_asked_one_at_a_time_in_order(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(False)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid="A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request("other", "B"), setup.requester))
        while len(broker.pending) < 2:  # the second is queued behind the first
            await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert [a.tool for a in prompter.asked] == ["greet"]
        assert [p.showing for p in broker.pending.values()] == [True, False]
        assert second.done() is False
        prompter.release.set()
        await prompter.until(lambda: len(prompter.asked) == 2)
        assert first.done()
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert [a.tool for a in prompter.asked] == ["greet", "other"]
    assert (first.id, first.decision) == ("A", m.Decision.ALLOW)
    assert (second.id, second.decision) == ("B", m.Decision.DENY)


def test_a_policy_set_by_the_first_answer_decides_the_queued_second(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True, Remember.MINUTES_15)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request(rid=2), setup.requester))
        while len(broker.pending) < 2:
            await asyncio.sleep(0)
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert (first.by, second.by) == (m.DecidedBy.USER, m.DecidedBy.POLICY)
    assert second.decision is m.Decision.ALLOW
    assert second.remember == "15m"
    assert len(prompter.asked) == 1
    assert broker.pending == {}


def test_pausing_while_queued_denies_the_queued_request(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> list[m.DecisionReply]:
        first = asyncio.create_task(broker.elevate(setup.request(rid=1), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = asyncio.create_task(broker.elevate(setup.request("other", 2), setup.requester))
        while len(broker.pending) < 2:
            await asyncio.sleep(0)
        broker.set_paused(True)
        prompter.release.set()
        return [await first, await second]

    first, second = run(go)
    assert first.decision is m.Decision.ALLOW
    assert (second.decision, second.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
    assert len(prompter.asked) == 1


def test_requester_gone_withdraws_the_question(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter)

    async def go() -> None:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go)
    rid = prompter.asked[0].id
    assert prompter.cancelled == [rid]
    assert prompter.decided == [(rid, False, "client_gone")]
    assert [(r["decision"], r["by"]) for r in setup.audit()] == [("deny", "client_gone")]
    assert broker.pending == {}


def test_shutdown_denies_what_is_pending_and_what_comes(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)

    async def go() -> m.DecisionReply:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        broker.begin_shutdown()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await broker.elevate(setup.request(rid=2), setup.requester)

    late = run(go)
    assert (late.decision, late.by) == (m.Decision.DENY, m.DecidedBy.SHUTDOWN)
    assert prompter.decided[0][1:] == (False, "shutdown")
    assert [r["by"] for r in setup.audit()] == ["shutdown", "shutdown"]
    assert len(prompter.asked) == 1


def test_every_decision_writes_one_audit_line(setup: Setup) -> None:
    setup.remember("other", Remember.ALWAYS)
    prompter = FakePrompter([Approval(True), Approval(False)])
    broker = setup.broker(prompter)
    decide(
        broker,
        setup,
        setup.request(rid=1),
        setup.request("other", 2),
        setup.request(rid=3, args={"path": "/x"}, cwd="/tmp"),
    )
    broker.set_paused(True)
    decide(broker, setup, setup.request(rid=4))
    records = setup.audit()
    assert [(r["tool"], r["decision"], r["by"]) for r in records] == [
        ("greet", "allow", "user"),
        ("other", "allow", "policy"),
        ("greet", "deny", "user"),
        ("greet", "deny", "paused"),
    ]
    third = records[2]
    assert third["args"] == {"path": "/x"}
    assert third["kind"] == "sandbox"
    assert third["requester"]["pid"] == os.getpid()
    assert third["sha256"] == file_sha256(setup.exe("greet"))
    assert third["host"] == HOST


def test_status_counts_pending_requests(setup: Setup) -> None:
    prompter = FakePrompter(hold=True)
    broker = setup.broker(prompter)

    async def go() -> tuple[m.StatusReply, m.StatusReply]:
        task = asyncio.create_task(broker.elevate(setup.request(), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        busy = broker.status(m.StatusRequest(id=9))
        prompter.release.set()
        await task
        return busy, broker.status(m.StatusRequest(id=10))

    busy, idle = run(go)
    assert (busy.id, busy.pending, busy.paused) == (9, 1, False)
    assert idle.pending == 0


# --- the credential gate -------------------------------------------------------------


def sudo_request(setup: Setup, rid: m.RequestId = 1, **kw: Any) -> m.ElevateRequest:
    argv = ("sudo", "-A", "--", setup.exe("rooty"))
    return setup.request("rooty", rid, kind=m.Kind.SUDO, argv=argv, **kw)


def askpass(rid: m.RequestId, grant: str, attempt: int = 1) -> m.AskpassRequest:
    return m.AskpassRequest(id=rid, grant=grant, prompt="[sudo] password: ", attempt=attempt)


def test_sudo_allow_issues_a_grant_and_askpass_gets_the_password(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["wrong", "right"])
    broker = setup.broker(prompter)

    async def go() -> list[Any]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        assert len(decision.grant) >= 22
        first = await broker.askpass(askpass(2, decision.grant), setup.requester)
        second = await broker.askpass(askpass(3, decision.grant, 2), setup.requester)
        ack = broker.sudo_result(
            m.SudoResultRequest(id=4, grant=decision.grant, exit_code=0, auth_failed=False)
        )
        with pytest.raises(m.MessageError) as replay:
            await broker.askpass(askpass(5, decision.grant), setup.requester)
        return [first, second, ack, replay.value]

    first, second, ack, replay = run(go)
    assert isinstance(first, m.PasswordReply)
    assert first.password == "wrong"
    assert isinstance(second, m.PasswordReply)
    assert second.password == "right"
    assert isinstance(ack, m.AckReply)
    assert replay.error_code is m.ErrorCode.NO_GRANT
    assert replay.request_id == 5
    assert [(p.attempt, p.retry) for p in prompter.password_asks] == [(1, False), (2, True)]
    assert prompter.password_asks[1].retry_text == "Wrong password, try again (2/3)"
    assert prompter.password_asks[0].approval.tool == "rooty"
    assert "wrong" not in setup.audit_path.read_text()


def test_sandbox_allows_and_denies_carry_no_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(False)])
    [denied] = decide(setup.broker(prompter), setup, sudo_request(setup))
    assert denied.grant is None


def test_cancelled_password_finishes_the_grant(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], [None])
    broker = setup.broker(prompter)

    async def go() -> tuple[Any, m.MessageError]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        cancel = await broker.askpass(askpass(2, decision.grant), setup.requester)
        with pytest.raises(m.MessageError) as again:
            await broker.askpass(askpass(3, decision.grant, 2), setup.requester)
        return cancel, again.value

    cancel, again = run(go)
    assert isinstance(cancel, m.DecisionReply)
    assert (cancel.decision, cancel.by) == (m.Decision.DENY, m.DecidedBy.USER)
    assert again.error_code is m.ErrorCode.NO_GRANT


def test_password_timeout_and_front_end_failure_deny(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True), Approval(True)], [RuntimeError("boom")])
    broker = setup.broker(prompter, prompt_timeout=5)

    async def go() -> list[Any]:
        d1 = await broker.elevate(sudo_request(setup, 1), setup.requester)
        assert d1.grant is not None
        failed = await broker.askpass(askpass(2, d1.grant), setup.requester)
        d2 = await broker.elevate(sudo_request(setup, 3, timeout=0.05), setup.requester)
        assert d2.grant is not None
        prompter.hold = True
        timed_out = await broker.askpass(askpass(4, d2.grant), setup.requester)
        return [failed, timed_out]

    failed, timed_out = run(go)
    assert (failed.decision, failed.by) == (m.Decision.DENY, m.DecidedBy.NO_FRONT_END)
    assert (timed_out.decision, timed_out.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)


def test_askpass_from_an_unrelated_process_is_refused(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["secret"])
    broker = setup.broker(prompter)
    stranger = Requester(pid=1, uid=os.getuid(), gid=os.getgid())
    other_uid = Requester(pid=os.getpid(), uid=os.getuid() + 1, gid=os.getgid())

    async def go() -> list[m.MessageError]:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        errors = []
        for who in (stranger, other_uid):
            with pytest.raises(m.MessageError) as refused:
                await broker.askpass(askpass(2, decision.grant), who)
            errors.append(refused.value)
        # the refusals did not burn the grant: its real descendant still gets an answer
        assert isinstance(
            await broker.askpass(askpass(3, decision.grant), setup.requester), m.PasswordReply
        )
        return errors

    stranger_error, uid_error = run(go)
    assert stranger_error.error_code is m.ErrorCode.NO_GRANT
    assert "descend" in stranger_error.message
    assert "another user" in uid_error.message
    assert prompter.password_asks
    assert len(prompter.password_asks) == 1


def test_shutdown_withdraws_grants(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], ["pw"])
    broker = setup.broker(prompter)

    async def go() -> m.MessageError:
        decision = await broker.elevate(sudo_request(setup), setup.requester)
        assert decision.grant is not None
        broker.begin_shutdown()
        with pytest.raises(m.MessageError) as refused:
            await broker.askpass(askpass(2, decision.grant), setup.requester)
        return refused.value

    assert run(go).error_code is m.ErrorCode.NO_GRANT
    assert prompter.password_asks == []
