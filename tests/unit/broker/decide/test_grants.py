"""Unit tests of grants: single use, short life, bound to the requester's uid and ancestry."""

from __future__ import annotations

import os

import pytest

from registry_core.broker.decide.grants import GRANT_LIFETIME, MAX_ATTEMPTS, GrantBook, GrantRefused
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind

PID, UID = 4242, 1000
ANCESTRY = (5555, 5554, PID, 1)  # askpass -> sudo -> requester -> init


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def approval() -> ApprovalRequest:
    return ApprovalRequest(
        id="r1",
        tool="rooty",
        kind=Kind.SUDO,
        description="",
        variant=None,
        executable="/opt/rooty",
        sha256="a" * 64,
        argv=("sudo", "-A", "--", "/opt/rooty"),
        args={},
        cwd="/",
        requester=Requester(pid=PID, uid=UID, gid=UID),
        host="h",
        timeout=60,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def book(clock: FakeClock) -> GrantBook:
    return GrantBook(clock)


def refusal(
    book: GrantBook, token: str, uid: int = UID, ancestry: tuple[int, ...] = ANCESTRY
) -> str:
    with pytest.raises(GrantRefused) as refused:
        book.check(token, uid, ancestry)
    return refused.value.reason


def test_tokens_are_long_random_and_url_safe(book: GrantBook) -> None:
    tokens = {book.issue(approval(), PID, UID).token for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        assert len(token) >= 22  # >= 128 bits of base64
        assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_a_descendant_of_the_requester_may_use_a_grant(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    assert book.check(grant.token, UID, ANCESTRY) is grant
    assert grant.attempts == 1
    assert book.check(grant.token, UID, (PID,)).attempts == 2  # the requester itself


def test_unknown_token(book: GrantBook) -> None:
    book.issue(approval(), PID, UID)
    assert refusal(book, "x" * 43) == "unknown grant"


def test_finished_grant_cannot_be_replayed(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    book.check(grant.token, UID, ANCESTRY)
    assert book.finish(grant.token) is grant
    assert refusal(book, grant.token) == "grant already used"
    assert book.finish("no-such-token") is None


def test_grant_expires(book: GrantBook, clock: FakeClock) -> None:
    grant = book.issue(approval(), PID, UID)
    clock.now += GRANT_LIFETIME - 1
    book.check(grant.token, UID, ANCESTRY)
    clock.now += 2
    assert refusal(book, grant.token) == "grant expired"
    clock.now -= 100  # even if the clock were to go back: an expired grant stays dead
    assert refusal(book, grant.token) == "grant already used"


def test_long_dead_grants_are_pruned(book: GrantBook, clock: FakeClock) -> None:
    old = book.issue(approval(), PID, UID)
    clock.now += 3 * GRANT_LIFETIME
    book.issue(approval(), PID, UID)
    assert refusal(book, old.token) == "unknown grant"


def test_another_uid_is_refused_without_burning_the_grant(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    assert refusal(book, grant.token, uid=UID + 1) == "grant belongs to another user"
    assert grant.attempts == 0
    assert not grant.finished


def test_a_process_outside_the_requesters_tree_is_refused(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    reason = refusal(book, grant.token, ancestry=(7777, 7776, 1))
    assert reason == "askpass does not descend from the approved requester"
    assert grant.attempts == 0
    assert not grant.finished


def test_attempts_are_limited_to_sudos_three(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert book.check(grant.token, UID, ANCESTRY).attempts == attempt
    assert refusal(book, grant.token) == "no attempts left"
    assert grant.finished


def test_withdraw_all(book: GrantBook) -> None:
    grants = [book.issue(approval(), PID, UID) for _ in range(3)]
    book.withdraw_all()
    assert {refusal(book, g.token) for g in grants} == {"grant already used"}


def test_the_token_is_never_in_a_repr(book: GrantBook) -> None:
    grant = book.issue(approval(), PID, UID)
    assert grant.token not in repr(grant)
    assert grant.token not in repr(book)


def test_grants_use_the_real_clock_by_default() -> None:
    book = GrantBook()
    grant = book.issue(approval(), os.getpid(), os.getuid())
    assert book.check(grant.token, os.getuid(), (os.getpid(),)) is grant


def test_a_new_grant_leaves_the_other_live_grants_alone(book: GrantBook, clock: FakeClock) -> None:
    first = book.issue(approval(), PID, UID)
    clock.now += GRANT_LIFETIME / 2
    second = book.issue(approval(), PID + 1, UID)  # another sudo tool, at the same time
    assert book.check(first.token, UID, ANCESTRY) is first
    assert book.check(second.token, UID, (PID + 1,)) is second


def test_a_grant_is_valid_up_to_its_expiry_instant(book: GrantBook, clock: FakeClock) -> None:
    grant = book.issue(approval(), PID, UID)
    clock.now = grant.expires
    assert book.check(grant.token, UID, ANCESTRY) is grant
    clock.now += 0.001
    assert refusal(book, grant.token) == "grant expired"


def test_an_expired_grant_is_forgotten_only_a_lifetime_after_it_expired(
    book: GrantBook, clock: FakeClock
) -> None:
    old = book.issue(approval(), PID, UID)
    clock.now = old.expires + GRANT_LIFETIME
    book.issue(approval(), PID, UID)
    assert refusal(book, old.token) == "grant expired"  # still known: said as it is
