"""The one way a synchronous test runs a coroutine: a fresh event loop and a deadline,
so a test that hangs fails with ``TimeoutError`` instead of stopping the suite."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

DEADLINE = 20.0


def run(coro_fn: Callable[[], Awaitable[Any]], deadline: float = DEADLINE) -> Any:
    """Run ``coro_fn()`` to its end (at most ``deadline`` seconds) and return its result."""

    async def main() -> Any:
        return await asyncio.wait_for(coro_fn(), deadline)

    return asyncio.run(main())
