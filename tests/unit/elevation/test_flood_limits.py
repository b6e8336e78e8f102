"""Flood limits: connection and request caps, the log throttle, the descriptor limit."""

from __future__ import annotations

import asyncio
import logging
import resource
import subprocess
import sys
from typing import Any

import pytest

from registry_core.elevation.limits import (
    ACCEPT_ERROR,
    FloodLimits,
    PeerBook,
    QuietAcceptErrors,
    Throttle,
    raise_fd_limit,
)

SMALL = FloodLimits(
    connections_per_uid=3,
    connections_per_process=2,
    requests_per_connection=2,
    requests_per_process=3,
    requests_per_uid=4,
)


def test_connections_are_capped_per_process_then_per_uid() -> None:
    book = PeerBook(SMALL)
    assert book.admit(1000, 10) is None
    assert book.admit(1000, 10) is None
    refused = book.admit(1000, 10)
    assert refused is not None and "pid 10" in refused and "limit 2" in refused
    assert book.admit(1000, 11) is None
    refused = book.admit(1000, 12)
    assert refused is not None and "uid 1000" in refused
    assert book.connections() == 3 and book.connections(10) == 2
    book.leave(1000, 10)
    assert book.admit(1000, 12) is None  # room again once one left


def test_requests_are_capped_per_connection_process_and_uid() -> None:
    book = PeerBook(SMALL)
    assert book.start(1000, 10, conn=1) is None
    assert book.start(1000, 10, conn=1) is None
    refused = book.start(1000, 10, conn=1)
    assert refused is not None and "this connection" in refused
    assert book.start(1000, 10, conn=2) is None
    refused = book.start(1000, 10, conn=3)
    assert refused is not None and "pid 10" in refused
    assert book.start(1000, 11, conn=4) is None
    refused = book.start(1000, 12, conn=5)
    assert refused is not None and "uid 1000" in refused
    book.finish(1000, 10, conn=1)
    assert book.requests(10) == 2 and book.requests() == 3
    assert book.start(1000, 12, conn=5) is None


def test_counts_never_go_negative_or_linger() -> None:
    book = PeerBook(SMALL)
    book.leave(1000, 10)
    book.finish(1000, 10, conn=1)
    assert book.connections() == 0 and book.requests() == 0
    assert book.admit(1000, 10) is None


def test_throttle_lets_one_through_per_interval_and_counts_the_rest() -> None:
    now = [100.0]
    throttle = Throttle(1.0, clock=lambda: now[0])
    assert throttle.ready() == 0
    assert [throttle.ready() for _ in range(500)] == [None] * 500
    now[0] += 1.0
    assert throttle.ready() == 500
    assert throttle.ready() is None


def test_the_descriptor_limit_is_raised_to_the_hard_limit() -> None:
    """In a child process with a low soft limit (this one's limits stay as they are)."""
    code = (
        "import resource\n"
        "from registry_core.elevation.limits import raise_fd_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "print(raise_fd_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    assert out.strip() == f"(256, {target}) ({target}, {hard})"


def test_raising_again_is_a_no_op() -> None:
    before, after = raise_fd_limit()
    assert raise_fd_limit() == (after, after)
    assert after >= before


def test_accept_errors_are_logged_once_per_second(caplog: pytest.LogCaptureFixture) -> None:
    passed_on: list[dict[str, Any]] = []
    handler = QuietAcceptErrors(
        logging.getLogger("flood-test"),
        lambda _loop, context: passed_on.append(context),
        Throttle(3600.0),
    )
    loop = asyncio.new_event_loop()
    try:
        context = {"message": ACCEPT_ERROR, "exception": OSError(24, "Too many open files")}
        with caplog.at_level(logging.ERROR):
            for _ in range(1000):
                handler(loop, context)
        assert len(caplog.records) == 1
        assert "Too many open files" in caplog.records[0].getMessage()
        other = {"message": "Task exception was never retrieved"}
        handler(loop, other)
        assert passed_on == [other]  # everything else goes to the previous handler
    finally:
        loop.close()
