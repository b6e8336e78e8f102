"""The broker core's deadlines in words and in effect: the countdown a reason names,
the requester's deadline through the queue, the broker's own queue limit.

Real registry, policy store and audit log in ``tmp_path``; the person is the
scripted :class:`FakePrompter` of ``core_helpers``.
"""

from __future__ import annotations

import asyncio

from core_helpers import FakePrompter, Setup, decide, run

from registry_core.broker.question import Approval, Remember
from registry_core.broker.wire import messages as m


def test_a_countdown_is_named_to_the_hundredth(setup: Setup) -> None:
    # 0.254 s is said as "0.25": to the hundredth, neither whole seconds nor thousandths.
    prompter = FakePrompter([Approval(False)], hold=True)
    broker = setup.broker(prompter, prompt_timeout=3600)

    async def go() -> m.DecisionReply:
        first = asyncio.create_task(broker.elevate(setup.request(rid="A"), setup.requester))
        await prompter.until(lambda: len(prompter.asked) == 1)
        second = await broker.elevate(setup.request(rid="B", timeout=0.254), setup.requester)
        prompter.release.set()
        await first
        return second

    second = run(go)
    assert (second.by, second.reason) == (
        m.DecidedBy.TIMEOUT,
        "no answer within 0.25 s (other questions were still open)",
    )


def test_the_dialogs_own_words_for_its_countdown_are_kept(setup: Setup) -> None:
    # The front-end's countdown said what ran out (its own 3 s); the broker's longer
    # countdown does not replace those words.
    ran_out = Approval(False, Remember.ONCE, "no answer within 3 s", timed_out=True)
    [reply] = decide(
        setup.broker(FakePrompter([ran_out]), prompt_timeout=60), setup, setup.request()
    )
    assert (reply.decision, reply.by, reply.reason, reply.remember) == (
        m.Decision.DENY,
        m.DecidedBy.TIMEOUT,
        "no answer within 3 s",
        None,
    )
    assert setup.policies.list() == []
