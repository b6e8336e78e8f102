"""Denials nobody made by hand are recorded for the desktop; notifications are batched."""

from __future__ import annotations

import pytest
from core_helpers import FakePrompter, Setup, decide, run

from registry_core.broker.decide.denials import (
    Denial,
    DenialBatcher,
    DenialLog,
    DeniedBy,
    summary_text,
)
from registry_core.broker.question import Approval, Remember
from registry_core.broker.wire import messages as m


def whys(setup: Setup) -> list[tuple[str, DeniedBy]]:
    return [(d.tool, d.why) for d in reversed(setup.denials.recent(20))]


def test_remembered_deny_paused_and_timeout_are_recorded(setup: Setup) -> None:
    setup.remember("other", Remember.DENY_ALWAYS)
    broker = setup.broker(FakePrompter(hold=True), prompt_timeout=0.05)
    decide(broker, setup, setup.request("other"))
    broker.set_paused(True)
    decide(broker, setup, setup.request(rid=2))
    broker.set_paused(False)
    decide(broker, setup, setup.request(rid=3))  # nobody answers: the countdown denies
    assert whys(setup) == [
        ("other", DeniedBy.POLICY),
        ("greet", DeniedBy.PAUSED),
        ("greet", DeniedBy.TIMEOUT),
    ]
    newest = setup.denials.recent(1)[0]
    assert newest.line().startswith("greet — no answer in time: no answer within")


def test_the_dialogs_own_countdown_is_a_timeout_too(setup: Setup) -> None:
    # The front-end's countdown may end a moment before the broker's: still nobody
    # answered, so it is recorded, audited and shown as a timeout, not as a "no".
    ran_out = Approval(False, Remember.ONCE, "no answer within 3 s", timed_out=True)
    broker = setup.broker(FakePrompter([ran_out]))
    [reply] = decide(broker, setup, setup.request())
    assert (reply.decision, reply.by) == (m.Decision.DENY, m.DecidedBy.TIMEOUT)
    assert whys(setup) == [("greet", DeniedBy.TIMEOUT)]
    assert setup.audit()[-1]["by"] == "timeout"


def test_denials_by_the_person_are_not_recorded(setup: Setup) -> None:
    broker = setup.broker(FakePrompter([Approval(False), Approval(True)]))
    decide(broker, setup, setup.request(), setup.request(rid=2))
    assert setup.denials.recent() == []


def test_an_unknown_tool_is_recorded(setup: Setup) -> None:
    broker = setup.broker(FakePrompter())

    async def go() -> None:
        with pytest.raises(m.MessageError):
            await broker.elevate(setup.request("ghost", argv=("/x",)), setup.requester)

    run(go)
    [denial] = setup.denials.recent()
    assert (denial.tool, denial.why) == ("ghost", DeniedBy.UNKNOWN_TOOL)
    assert "no tool named 'ghost'" in denial.reason


def denial(tool: str, why: DeniedBy = DeniedBy.PAUSED) -> Denial:
    return Denial(0.0, tool, "laptop", why, "requests are paused")


def test_batcher_sends_the_first_at_once_and_groups_a_burst() -> None:
    batcher = DenialBatcher(interval=30)
    assert batcher.add(denial("a"), now=100) == 0
    assert [d.tool for d in batcher.flush(100)] == ["a"]
    assert batcher.add(denial("b"), now=105) == 25  # wait out the interval
    assert batcher.add(denial("c"), now=110) is None  # already scheduled
    assert batcher.add(denial("d"), now=120) is None
    assert [d.tool for d in batcher.flush(130)] == ["b", "c", "d"]
    assert batcher.add(denial("e"), now=200) == 0
    assert batcher.flush(200) == [denial("e")]


def test_summary_groups_and_counts() -> None:
    assert summary_text([denial("a")]) == ("Ollie denied a", "a — paused: requests are paused")
    summary, body = summary_text([denial(t) for t in "abcdef"])
    assert summary == "Ollie denied 6 requests"
    assert body.splitlines()[0] == "… and 2 earlier"
    assert body.splitlines()[-1].startswith("f — paused")


def test_log_keeps_the_last_few_newest_first_and_tells_listeners() -> None:
    log = DenialLog(keep=3)
    heard: list[str] = []
    log.subscribe(lambda d: heard.append(d.tool))
    for tool in "abcd":
        log.add(denial(tool))
    assert [d.tool for d in log.recent(5)] == ["d", "c", "b"]
    assert heard == ["a", "b", "c", "d"]
