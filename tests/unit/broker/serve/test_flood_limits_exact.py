"""The flood limits pinned exactly: each cap at its own boundary and in its
own words, counts that drop one at a time, the throttle's interval edge, the
accept-error handler's lines, and the descriptor limit's early returns.

Written against the mutants of ``limits.py``; the caps differ from each other so a
check reading the wrong one is seen.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import subprocess
import sys
from typing import Any

import pytest

from registry_core.broker.serve.flood import (
    ACCEPT_ERROR,
    FloodLimits,
    PeerBook,
    QuietAcceptErrors,
    Throttle,
    raise_fd_limit,
)

CAPS = FloodLimits(
    connections_per_uid=5,
    connections_per_process=3,
    requests_per_connection=2,
    requests_per_process=4,
    requests_per_uid=7,
)


def test_the_default_caps() -> None:
    assert FloodLimits() == FloodLimits(8192, 64, 32, 64, 8192, 16, 16, 256, 256)
    assert PeerBook().limits == FloodLimits()


def test_a_process_holds_up_to_its_cap_of_connections_in_words() -> None:
    book = PeerBook(CAPS)
    assert [book.admit(1000, 10) for _ in range(3)] == [None] * 3
    assert book.admit(1000, 10) == "too many connections from pid 10 (limit 3)"
    assert (book.connections(), book.connections(10), book.connections(11)) == (3, 3, 0)


def test_a_uid_holds_up_to_its_cap_of_connections_in_words() -> None:
    book = PeerBook(CAPS)
    assert [book.admit(1000, pid) for pid in range(1, 6)] == [None] * 5
    assert book.admit(1000, 6) == "too many connections for uid 1000 (limit 5)"
    assert book.admit(1001, 6) is None  # another uid has its own count
    assert book.connections() == 6


def test_a_refused_connection_is_not_counted_and_leave_drops_one() -> None:
    book = PeerBook(CAPS)
    for _ in range(3):
        book.admit(1000, 10)
    book.admit(1000, 10)  # refused
    book.leave(1000, 10)
    assert (book.connections(), book.connections(10)) == (2, 2)
    assert book.admit(1000, 10) is None
    assert book.admit(1000, 10) == "too many connections from pid 10 (limit 3)"


def test_requests_on_one_connection_up_to_its_cap_in_words() -> None:
    book = PeerBook(CAPS)
    assert [book.start(1000, 10, conn=1) for _ in range(2)] == [None] * 2
    refused = "too many requests pending on this connection (limit 2)"
    assert book.refusal(1000, 10, conn=1) == refused
    assert book.start(1000, 10, conn=1) == refused
    assert book.requests() == 2 and book.requests(10) == 2


def test_requests_of_one_process_up_to_its_cap_in_words() -> None:
    book = PeerBook(CAPS)
    assert [book.start(1000, 10, conn=c) for c in range(4)] == [None] * 4
    assert book.start(1000, 10, conn=9) == "too many requests pending from pid 10 (limit 4)"
    assert book.start(1000, 11, conn=9) is None


def test_requests_of_one_uid_up_to_its_cap_in_words() -> None:
    book = PeerBook(CAPS)
    assert [book.start(1000, pid, conn=pid) for pid in range(7)] == [None] * 7
    assert book.start(1000, 8, conn=8) == "too many requests pending for uid 1000 (limit 7)"
    assert book.start(1001, 8, conn=8) is None
    assert book.requests() == 8


def test_refusal_counts_nothing_and_finish_drops_one_of_each() -> None:
    book = PeerBook(CAPS)
    assert book.refusal(1000, 10, conn=1) is None
    assert book.requests() == 0
    book.start(1000, 10, conn=1)
    book.start(1000, 10, conn=1)
    book.finish(1000, 10, conn=1)
    assert (book.requests(), book.requests(10)) == (1, 1)
    assert book.start(1000, 10, conn=1) is None  # the connection has room again
    book.finish(1000, 10, conn=1)
    book.finish(1000, 10, conn=1)
    assert (book.requests(), book.requests(10)) == (0, 0)


def test_counts_that_reach_zero_leave_no_key_behind() -> None:
    book = PeerBook(CAPS)
    book.admit(1000, 10)
    book.start(1000, 10, conn=1)
    book.leave(1000, 10)
    book.finish(1000, 10, conn=1)
    book.leave(1000, 10)  # one more than admitted: no negative count
    assert (book._conn_uid, book._conn_pid) == ({}, {})
    assert (book._req_uid, book._req_pid, book._req_conn) == ({}, {}, {})


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_the_throttle_opens_again_exactly_one_interval_later() -> None:
    clock = FakeClock()
    throttle = Throttle(2.0, clock=clock)
    assert throttle.ready() == 0
    clock.now = 51.999
    assert throttle.ready() is None
    clock.now = 52.0
    assert throttle.ready() == 1
    assert throttle.ready() is None
    assert Throttle().interval == 1.0


def test_the_first_message_passes_whatever_the_clock_says() -> None:
    clock = FakeClock()
    clock.now = 0.0
    assert Throttle(5.0, clock=clock).ready() == 0


def accept_context(errno_text: str = "Too many open files") -> dict[str, Any]:
    return {"message": ACCEPT_ERROR + " on <socket>", "exception": OSError(24, errno_text)}


def test_accept_errors_are_logged_with_the_count_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    handler = QuietAcceptErrors(logging.getLogger("flood-exact"), None, Throttle(1.0, clock))
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="flood-exact"):
            for _ in range(4):
                handler(loop, accept_context())
            clock.now += 1.0
            handler(loop, accept_context("No buffer space"))
        assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
            (logging.ERROR, "cannot accept connections: [Errno 24] Too many open files"),
            (
                logging.ERROR,
                "cannot accept connections: [Errno 24] No buffer space (3 more in the last second)",
            ),
        ]
    finally:
        loop.close()


def test_the_default_throttle_holds_back_within_a_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = QuietAcceptErrors(logging.getLogger("flood-exact"), None)
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="flood-exact"):
            handler(loop, accept_context())
            handler(loop, accept_context())
        assert len(caplog.records) == 1
    finally:
        loop.close()


def test_other_loop_errors_go_to_asyncios_handler_without_a_previous_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = QuietAcceptErrors(logging.getLogger("flood-exact"), None)
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR):
            handler(loop, {"message": "Task exception was never retrieved"})
            handler(loop, {"exception": OSError(24, "no message key")})
        assert [(r.name, r.getMessage()) for r in caplog.records] == [
            ("asyncio", "Task exception was never retrieved"),
            ("asyncio", "Unhandled exception in event loop"),
        ]
    finally:
        loop.close()


def raise_in_child(soft: str, hard: str) -> str:
    """``raise_fd_limit()`` in a child whose limits are set first (root may raise hard)."""
    code = (
        "import resource\n"
        "from registry_core.broker.serve.flood import raise_fd_limit\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))\n"
        "print(raise_fd_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_soft_limit_already_at_the_hard_one_stays() -> None:
    assert raise_in_child("300", "300") == "(300, 300) (300, 300)"


class FakeRlimits:
    """Stands in for ``resource``'s two calls: no process here may raise its hard
    limit to infinity, so that case cannot be set up for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> None:
        self.limits = (soft, hard)
        self.refuse: type[Exception] | None = None
        self.set_to: list[tuple[int, int]] = []
        monkeypatch.setattr(resource, "getrlimit", self.get)
        monkeypatch.setattr(resource, "setrlimit", self.set)

    def get(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.limits

    def set(self, which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        self.set_to.append(limits)
        if self.refuse is not None:
            raise self.refuse("refused")
        self.limits = limits


INFINITY = resource.RLIM_INFINITY


def test_an_unlimited_hard_limit_raises_to_nr_opens_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRlimits(monkeypatch, 256, INFINITY)
    assert raise_fd_limit() == (256, 1 << 20)
    assert fake.set_to == [(1 << 20, INFINITY)]


def test_an_unlimited_or_high_enough_soft_limit_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRlimits(monkeypatch, INFINITY, INFINITY)
    assert raise_fd_limit() == (INFINITY, INFINITY)
    fake = FakeRlimits(monkeypatch, 1 << 20, INFINITY)
    assert raise_fd_limit() == (1 << 20, 1 << 20)
    assert fake.set_to == []


@pytest.mark.parametrize("error", [ValueError, OSError])
def test_a_refused_raise_keeps_the_soft_limit(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    fake = FakeRlimits(monkeypatch, 256, 4096)
    fake.refuse = error
    assert raise_fd_limit() == (256, 256)
    assert fake.set_to == [(4096, 4096)]


def test_caps_of_one_admit_exactly_one() -> None:
    """A peer never seen before holds nothing (its count starts at 0, not 1)."""
    book = PeerBook(FloodLimits(1, 1, 1, 1, 1))
    assert book.admit(1000, 10) is None
    assert book.admit(1000, 10) == "too many connections for uid 1000 (limit 1)"
    assert book.admit(1001, 11) is None
    assert book.admit(1002, 11) == "too many connections from pid 11 (limit 1)"
    assert book.start(1000, 10, conn=1) is None
    assert book.start(1000, 10, conn=1) == (
        "too many requests pending on this connection (limit 1)"
    )
    assert book.start(1000, 10, conn=2) == "too many requests pending from pid 10 (limit 1)"
    assert book.start(1000, 12, conn=3) == "too many requests pending for uid 1000 (limit 1)"
    assert book.start(1001, 11, conn=4) is None


def test_other_loop_errors_go_to_the_previous_handler_with_their_loop() -> None:
    heard: list[tuple[asyncio.AbstractEventLoop, dict[str, Any]]] = []
    handler = QuietAcceptErrors(
        logging.getLogger("flood-exact"), lambda loop, context: heard.append((loop, context))
    )
    loop = asyncio.new_event_loop()
    try:
        other = {"message": "Task exception was never retrieved"}
        handler(loop, other)
        handler(loop, accept_context())
        assert heard == [(loop, other)]
    finally:
        loop.close()
