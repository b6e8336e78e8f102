"""Shared pieces of the Qt prompter's unit tests: run a coroutine on a qasync loop, poll.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import qasync
from PySide6.QtWidgets import QApplication


def run(qapp: QApplication, coro: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """The result of ``coro()`` run to completion on a qasync loop over ``qapp``."""
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    qapp.setQuitOnLastWindowClosed(False)
    try:
        with loop:
            return loop.run_until_complete(coro())
    finally:
        asyncio.set_event_loop(None)


async def until(predicate: Callable[[], Any]) -> Any:
    """The first true value of ``predicate()``, polled every 10 ms for up to 10 s."""
    for _ in range(1000):
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("not reached")
