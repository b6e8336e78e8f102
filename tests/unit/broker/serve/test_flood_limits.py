"""Flood limits: connection and request caps, the log throttle, the descriptor limit."""

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


# --- the sandbox budget (containment II, finding 8) ----------------------------------

BOXES = FloodLimits(
    connections_per_uid=10,
    connections_per_process=4,
    requests_per_connection=4,
    requests_per_process=4,
    requests_per_uid=10,
    connections_per_sandbox=2,
    requests_per_sandbox=2,
    sandboxed_connections_per_uid=3,
    sandboxed_requests_per_uid=3,
)


def test_a_sandbox_holds_up_to_its_own_cap_of_connections() -> None:
    book = PeerBook(BOXES)
    assert book.admit(1000, 10, "session 7") is None
    assert book.admit(1000, 11, "session 7") is None  # another process, the same sandbox
    refused = book.admit(1000, 12, "session 7")
    assert refused == "too many connections from one sandbox (session 7) (limit 2)"
    assert book.sandboxed(1000, "session 7") == (2, 0)
    assert book.connections() == 2  # the refused one is not counted anywhere
    book.leave(1000, 10, "session 7")
    assert book.admit(1000, 12, "session 7") is None


def test_all_sandboxed_peers_of_a_uid_hold_up_to_their_cap_together() -> None:
    book = PeerBook(BOXES)
    assert [book.admit(1000, pid, f"session {pid}") for pid in (1, 2, 3)] == [None] * 3
    refused = book.admit(1000, 4, "session 4")
    assert refused == "too many connections from sandboxed processes of uid 1000 (limit 3)"
    assert book.sandboxed(1000) == (3, 0)
    assert book.admit(1001, 4, "session 4") is None  # another uid's sandboxes: their own


def test_the_agent_is_admitted_while_the_sandboxes_are_at_their_cap() -> None:
    book = PeerBook(BOXES)
    for pid in (1, 2, 3):
        book.admit(1000, pid, f"session {pid}")
    assert book.admit(1000, 5, "session 5") is not None
    # Outside any sandbox: the uid's remaining budget, 10 - 3, is all there for it.
    assert [book.admit(1000, 100 + n // 4) for n in range(7)] == [None] * 7
    assert book.admit(1000, 200) == "too many connections for uid 1000 (limit 10)"
    # A sandboxed peer counts against the uid's cap too: no place is made up.
    assert book.connection_refusal(1000, 201, "session 9") is not None


def test_the_precheck_without_a_sandbox_asks_only_the_caps_every_peer_has() -> None:
    book = PeerBook(BOXES)
    for pid in (1, 2, 3):
        book.admit(1000, pid, f"session {pid}")
    assert book.connection_refusal(1000, 4) is None
    assert book.connection_refusal(1000, 4, "session 4") is not None
    assert book.connections() == 3  # asking counts nothing


def test_sandboxed_requests_are_capped_per_sandbox_and_together() -> None:
    book = PeerBook(BOXES)
    assert book.start(1000, 10, conn=1, sandbox="session 7") is None
    assert book.start(1000, 11, conn=2, sandbox="session 7") is None
    refused = book.start(1000, 12, conn=3, sandbox="session 7")
    assert refused == "too many requests pending from one sandbox (session 7) (limit 2)"
    assert book.start(1000, 13, conn=4, sandbox="session 8") is None
    refused = book.start(1000, 14, conn=5, sandbox="session 9")
    assert refused == "too many requests pending from sandboxed processes of uid 1000 (limit 3)"
    # The agent's requests are still taken: the uid's cap is 10.
    assert [book.start(1000, 20 + n // 4, conn=20 + n) for n in range(7)] == [None] * 7
    assert book.sandboxed(1000) == (0, 3) and book.requests() == 10
    book.finish(1000, 10, conn=1, sandbox="session 7")
    assert book.sandboxed(1000, "session 7") == (0, 1)
    assert book.start(1000, 12, conn=3, sandbox="session 7") is None  # room again
    assert book.sandboxed(1000) == (0, 3) and book.requests() == 10


def test_sandboxed_counts_never_go_negative_or_linger() -> None:
    book = PeerBook(BOXES)
    book.leave(1000, 10, "session 7")
    book.finish(1000, 10, conn=1, sandbox="session 7")
    assert book.sandboxed(1000) == (0, 0) and book.sandboxed(1000, "session 7") == (0, 0)
    assert book.admit(1000, 10, "session 7") is None


def test_the_default_sandbox_budget_leaves_the_agent_almost_all_of_the_uids() -> None:
    caps = FloodLimits()
    assert (caps.connections_per_sandbox, caps.requests_per_sandbox) == (16, 16)
    assert (caps.sandboxed_connections_per_uid, caps.sandboxed_requests_per_uid) == (256, 256)
    assert caps.connections_per_uid - caps.sandboxed_connections_per_uid == 7936
    assert caps.requests_per_uid - caps.sandboxed_requests_per_uid == 7936


def test_the_sandbox_budget_is_fitted_to_the_descriptor_limit() -> None:
    caps = FloodLimits()
    assert caps.fitted(1 << 20) is caps
    assert caps.fitted(1024) is caps  # 256 is a quarter of a desktop's 1,024
    small = caps.fitted(256)
    assert (small.sandboxed_connections_per_uid, small.connections_per_sandbox) == (64, 16)
    tiny = caps.fitted(40)
    assert (tiny.sandboxed_connections_per_uid, tiny.connections_per_sandbox) == (10, 10)
    assert caps.fitted(2).sandboxed_connections_per_uid == 1
    assert small.connections_per_uid == caps.connections_per_uid  # the rest as it was


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
        "from registry_core.broker.serve.flood import raise_fd_limit\n"
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
