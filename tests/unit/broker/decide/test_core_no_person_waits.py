"""Decisions that need no person are never queued behind a question.

While a person is looking at one question, a remembered policy, an unknown
tool and a paused broker are answered at once, each without waiting for the
open question (or for each other).
"""

from __future__ import annotations

import asyncio

import pytest
from core_helpers import FakePrompter, Setup, run

from registry_core.broker.question import Approval, Remember
from registry_core.broker.wire import messages as m


def test_policy_unknown_and_paused_do_not_wait_for_an_open_question(setup: Setup) -> None:
    prompter = FakePrompter([Approval(True)], hold=True)
    broker = setup.broker(prompter)
    setup.remember("other", Remember.ALWAYS)

    async def go() -> None:
        asked = asyncio.create_task(broker.elevate(setup.request(rid="A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        # Many at once: all answered while the question stays open.
        remembered = [
            broker.elevate(setup.request("other", f"P{i}"), setup.requester) for i in range(50)
        ]
        replies = await asyncio.wait_for(asyncio.gather(*remembered), 30)
        assert all(r.decision is m.Decision.ALLOW and r.by is m.DecidedBy.POLICY for r in replies)
        assert [r.id for r in replies] == [f"P{i}" for i in range(50)]
        with pytest.raises(m.MessageError) as unknown:
            await asyncio.wait_for(
                broker.elevate(setup.request("no_such_tool", "U"), setup.requester), 30
            )
        assert unknown.value.code is m.ErrorCode.UNKNOWN_TOOL
        broker.set_paused(True)
        paused = await asyncio.wait_for(
            broker.elevate(setup.request("other", "Z"), setup.requester), 30
        )
        assert (paused.decision, paused.by) == (m.Decision.DENY, m.DecidedBy.PAUSED)
        assert not asked.done()  # the person has not answered yet
        broker.set_paused(False)
        prompter.release.set()
        first = await asyncio.wait_for(asked, 30)
        assert first.id == "A"

    run(go)
