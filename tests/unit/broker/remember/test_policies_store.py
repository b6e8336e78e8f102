"""Unit tests of remembered elevation policies: remembering, binding, revoking."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
import yaml
from policy_helpers import (
    EXE,
    HOST,
    OTHER_SHA,
    SHA,
    T0,
    FakeClock,
    entry,
    lookup,
    remember,
    write_doc,
)

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, PolicyStore, file_sha256
from registry_core.broker.remember.policy_file import iso_time, parse_time
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError

# --- remember choices ------------------------------------------------------------


def test_once_is_never_stored(store: PolicyStore, path: Path) -> None:
    assert remember(store, Remember.ONCE) is None
    assert lookup(store) is None
    assert store.list() == []
    assert not path.exists()


def test_session_lives_in_this_store_only(store: PolicyStore, path: Path, clock: FakeClock) -> None:
    policy = remember(store, Remember.SESSION)
    assert policy is not None
    assert policy.remember is Remember.SESSION
    assert policy.expires is None
    clock.now += 10 * 365 * 86400
    assert lookup(store) == policy
    assert not path.exists()
    assert lookup(PolicyStore(path, clock=clock)) is None


@pytest.mark.parametrize(
    ("choice", "seconds"), [(Remember.MINUTES_15, 15 * 60), (Remember.HOUR, 3600)]
)
def test_timed_allow_expires_at_the_boundary(
    store: PolicyStore, clock: FakeClock, choice: Remember, seconds: int
) -> None:
    policy = remember(store, choice)
    assert policy is not None
    assert policy.expires == T0 + seconds
    clock.now = T0 + seconds - 1
    assert lookup(store) == policy
    clock.now = T0 + seconds
    assert lookup(store) is None
    assert store.list() == []
    assert store.list(include_expired=True) == [policy]


def test_times_are_whole_seconds(store: PolicyStore, clock: FakeClock) -> None:
    clock.now = T0 + 0.75
    policy = remember(store, Remember.MINUTES_15)
    assert policy is not None
    assert (policy.created, policy.expires) == (T0, T0 + 900)
    assert iso_time(T0) in store.path.read_text()
    assert PolicyStore(store.path, clock=clock).list() == [policy]


def test_timed_allow_survives_a_restart_until_it_expires(path: Path, clock: FakeClock) -> None:
    remember(PolicyStore(path, clock=clock), Remember.HOUR)
    clock.now = T0 + 3599
    assert lookup(PolicyStore(path, clock=clock)) is not None
    clock.now = T0 + 3600
    assert lookup(PolicyStore(path, clock=clock)) is None


def test_always_allow_never_expires_and_persists(path: Path, clock: FakeClock) -> None:
    policy = remember(PolicyStore(path, clock=clock), Remember.ALWAYS)
    clock.now += 20 * 365 * 86400
    assert lookup(PolicyStore(path, clock=clock)) == policy


def test_deny_always_applies_to_any_executable(path: Path, clock: FakeClock) -> None:
    policy = remember(PolicyStore(path, clock=clock), Remember.DENY_ALWAYS)
    assert policy is not None
    assert policy.decision is Decision.DENY
    fresh = PolicyStore(path, clock=clock)
    assert lookup(fresh) == policy
    assert lookup(fresh, sha256=OTHER_SHA) == policy
    assert lookup(fresh, executable="/elsewhere/greet", sha256=None) == policy
    assert lookup(fresh, executable=None, sha256=None) == policy


# --- binding and isolation -------------------------------------------------------------


def test_allow_is_bound_to_path_and_sha(store: PolicyStore) -> None:
    remember(store, Remember.ALWAYS)
    assert lookup(store) is not None
    assert lookup(store, sha256=SHA.upper()) is not None
    assert lookup(store, sha256=OTHER_SHA) is None
    assert lookup(store, executable="/opt/other/greet") is None
    assert lookup(store, sha256=None) is None
    assert lookup(store, executable=None) is None
    assert lookup(store, executable=Path(EXE)) is not None


def test_allow_without_binding_is_not_remembered(store: PolicyStore) -> None:
    seen: list[str] = []
    store = PolicyStore(store.path, on_problem=seen.append)
    assert remember(store, Remember.ALWAYS, sha256=None) is None
    assert remember(store, Remember.SESSION, executable=None) is None
    assert store.list() == []
    assert len(seen) == 2
    assert "not remembered" in seen[0]
    assert "sha256" in seen[0]


def test_hosts_are_isolated(store: PolicyStore) -> None:
    remember(store, Remember.ALWAYS, host="laptop")
    remember(store, Remember.DENY_ALWAYS, host="other-laptop")
    assert lookup(store, host="build-server") is None
    assert lookup(store, host="laptop") is not None
    assert lookup(store, host="laptop").decision is Decision.ALLOW  # type: ignore[union-attr]


def test_kinds_are_isolated(store: PolicyStore) -> None:
    remember(store, Remember.ALWAYS, kind=Kind.SANDBOX)
    assert lookup(store, kind=Kind.SUDO) is None
    remember(store, Remember.DENY_ALWAYS, kind="sudo")
    assert lookup(store, kind="sudo").decision is Decision.DENY  # type: ignore[union-attr]
    assert lookup(store, kind=Kind.SANDBOX).decision is Decision.ALLOW  # type: ignore[union-attr]


def test_tools_are_isolated(store: PolicyStore) -> None:
    remember(store, Remember.ALWAYS)
    assert lookup(store, tool="greet2") is None


def test_new_decision_replaces_the_old_one(store: PolicyStore, path: Path) -> None:
    remember(store, Remember.ALWAYS)
    deny = remember(store, Remember.DENY_ALWAYS)
    assert store.list() == [deny]
    allow = remember(store, Remember.HOUR, sha256=OTHER_SHA)
    assert store.list() == [allow]
    session = remember(store, Remember.SESSION)
    assert store.list() == [session]
    assert yaml.safe_load(path.read_text())["policies"] == []


def test_deny_wins_over_allow_in_a_hand_edited_file(path: Path, clock: FakeClock) -> None:
    write_doc(path, [entry(), entry(decision="deny", remember="deny_always")])
    policy = lookup(PolicyStore(path, clock=clock))
    assert policy is not None
    assert policy.decision is Decision.DENY


# --- revoke / change ---------------------------------------------------------------------


def test_revoke_by_tool_kind_host(store: PolicyStore, path: Path) -> None:
    remember(store, Remember.ALWAYS, host="a")
    remember(store, Remember.ALWAYS, host="b")
    remember(store, Remember.DENY_ALWAYS, host="a", kind=Kind.SUDO)
    remember(store, Remember.SESSION, host="c")
    remember(store, Remember.ALWAYS, tool="other")
    assert store.revoke("greet", Kind.SUDO) == 1
    assert store.revoke("greet", host="a") == 1
    assert store.revoke("greet", host="a") == 0
    assert store.revoke("greet") == 2
    assert [p.tool for p in store.list()] == ["other"]
    assert [p.tool for p in PolicyStore(path).list()] == ["other"]
    assert store.revoke("nothing") == 0


def test_revoke_all(store: PolicyStore, clock: FakeClock) -> None:
    remember(store, Remember.ALWAYS)
    remember(store, Remember.SESSION, tool="x")
    remember(store, Remember.MINUTES_15, tool="y")
    clock.now += 3600  # y has expired: not counted
    assert store.revoke_all() == 2
    assert store.list(include_expired=True) == []


def test_change_duration(store: PolicyStore, clock: FakeClock, path: Path) -> None:
    remember(store, Remember.ALWAYS)
    clock.now = T0 + 100
    changed = store.change_duration("greet", "sandbox", HOST, Remember.MINUTES_15)
    assert changed is not None
    assert changed.created == T0 + 100  # a new choice starts now: expires - created = 15 min
    assert changed.expires == T0 + 100 + 900
    assert store.list() == [changed]
    denied = store.change_duration("greet", Kind.SANDBOX, HOST, Remember.DENY_ALWAYS)
    assert denied is not None
    assert denied.decision is Decision.DENY
    allowed = store.change_duration("greet", Kind.SANDBOX, HOST, Remember.HOUR)
    assert allowed is not None
    assert allowed.sha256 == SHA
    assert allowed.decision is Decision.ALLOW
    assert store.change_duration("greet", Kind.SANDBOX, HOST, Remember.ONCE) is None
    assert store.list() == []
    with pytest.raises(PolicyError, match="no remembered policy"):
        store.change_duration("greet", Kind.SANDBOX, HOST, Remember.HOUR)


def test_change_duration_session_to_file(store: PolicyStore, path: Path) -> None:
    remember(store, Remember.SESSION)
    store.change_duration("greet", Kind.SANDBOX, HOST, Remember.ALWAYS)
    assert lookup(PolicyStore(path)) is not None


def test_change_deny_without_executable_to_allow_fails(store: PolicyStore) -> None:
    remember(store, Remember.DENY_ALWAYS, executable=None, sha256=None)
    with pytest.raises(PolicyError, match="executable"):
        store.change_duration("greet", Kind.SANDBOX, HOST, Remember.ALWAYS)
    assert lookup(store) is not None


def test_set_rejects_invalid_policies(store: PolicyStore) -> None:
    bad = [
        Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ONCE, T0, None, EXE, SHA),
        Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.HOUR, T0, None, EXE, SHA),
        Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, "rel", SHA),
        Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, "x"),
        Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.ALWAYS, T0),
        Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.DENY_ALWAYS, T0, None, EXE),
        Policy("../x", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0),
        Policy("greet", Kind.SANDBOX, "", Decision.DENY, Remember.DENY_ALWAYS, T0),
    ]
    for policy in bad:
        with pytest.raises(PolicyError):
            store.set(policy)
    assert store.list() == []


# --- misc ------------------------------------------------------------------------------------


def test_describe_and_json(store: PolicyStore) -> None:
    policy = remember(store, Remember.HOUR)
    assert policy is not None
    text = policy.describe()
    assert "allow greet (sandbox) on laptop" in text
    assert "for 1 hour" in text
    assert EXE in text
    assert SHA[:12] in text
    assert policy.to_json()["expires"] == "2025-06-15T16:06:40Z"
    deny = remember(store, Remember.DENY_ALWAYS)
    assert deny is not None
    assert deny.describe() == "deny greet (sandbox) on laptop, deny always"


def test_iso_time_round_trip() -> None:
    for ts in (T0, T0 + 0.25, 0.0):
        assert parse_time(iso_time(ts)) == ts
    assert iso_time(T0) == "2025-06-15T15:06:40Z"
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time(12)


def test_threads_share_a_store(store: PolicyStore) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                remember(store, Remember.ALWAYS, tool=f"t{n}-{i}")
                assert lookup(store, tool=f"t{n}-{i}") is not None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(PolicyStore(store.path).list()) == 80


def test_file_sha256(tmp_path: Path) -> None:
    target = tmp_path / "tool"
    data = os.urandom(3 * 1024 * 1024 + 17)
    target.write_bytes(data)
    assert file_sha256(target) == hashlib.sha256(data).hexdigest()
    assert file_sha256(str(target)) == hashlib.sha256(data).hexdigest()
    assert file_sha256(tmp_path / "missing") is None
    assert file_sha256(tmp_path) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert file_sha256(fifo) is None  # returns at once instead of blocking
