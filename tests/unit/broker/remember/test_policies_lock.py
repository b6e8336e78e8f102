"""The policy store's cross-process rules: lock file, lost writes, lock-free lookups."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, lookup, remember

from registry_core.broker.question import Remember
from registry_core.broker.remember import policies as policies_module
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.broker.remember.policy_file import render_document
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError
from registry_core.file_lock import exclusive


def test_a_write_by_a_program_ignoring_the_lock_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock())
    remember(store, Remember.DENY_ALWAYS)
    real_render = policies_module.render_document

    def render_while_someone_writes(*args: Any) -> str:
        # Between our read and our rename, a program that takes no lock rewrites the file.
        path.write_text(path.read_text() + "# a hand edit\n")
        return real_render(*args)

    monkeypatch.setattr(policies_module, "render_document", render_while_someone_writes)
    with pytest.raises(PolicyError) as refused:
        store.revoke("greet")
    assert str(refused.value) == (
        f"not changing {path}: it changed while being read (another program wrote it "
        "without taking its lock); nothing was written, try again"
    )
    assert "# a hand edit" in path.read_text()  # not overwritten


def test_lookups_do_not_take_the_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    remember(store, Remember.DENY_ALWAYS)
    other = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    with exclusive(path.with_name("policies.yaml.lock")):
        assert lookup(other) is not None  # the read path never waits for writers
        assert other.list()
        with pytest.raises(PolicyError, match="could not lock"):
            other.revoke("greet")
    assert other.revoke("greet") == 1


def test_the_lock_file_is_not_followed_when_a_link(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    target = tmp_path / "elsewhere"
    os.symlink(target, path.with_name("policies.yaml.lock"))
    store = PolicyStore(path, clock=FakeClock())
    with pytest.raises(PolicyError, match="symbolic link"):
        store.revoke_all()
    assert not target.exists()
    assert HOST


def _change(store: PolicyStore, change: str) -> object:
    if change == "set":
        deny = Policy("other", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, 0)
        return store.set(deny)
    if change == "revoke":
        return store.revoke("greet")
    if change == "revoke_all":
        return store.revoke_all()
    return store.change_duration("greet", Kind.SANDBOX, HOST, Remember.HOUR)


@pytest.mark.parametrize("change", ["set", "revoke", "revoke_all", "change_duration", "remember"])
def test_every_change_takes_the_file_lock(tmp_path: Path, change: str) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    remember(store, Remember.ALWAYS)
    before = path.read_bytes()
    with exclusive(path.with_name("policies.yaml.lock")):
        if change == "remember":
            remember(store, Remember.DENY_ALWAYS, tool="other")
            assert any("could not lock" in p for p in store.problems)
        else:
            with pytest.raises(PolicyError, match="could not lock"):
                _change(store, change)
    assert path.read_bytes() == before  # nothing written without the lock


def test_change_duration_keeps_a_deny_over_an_allow(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    clock = FakeClock()
    store = PolicyStore(path, clock=clock)
    allow = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)
    deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0 - 5)
    path.write_text(render_document([allow, deny], [], None))
    path.chmod(0o600)
    changed = store.change_duration("greet", Kind.SANDBOX, HOST, Remember.DENY_ALWAYS)
    assert changed is not None
    assert changed.decision is Decision.DENY
    # with two allows, the newest one's executable is kept
    newer = Policy(
        "greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0 + 1, None, EXE + "2", SHA
    )
    path.write_text(render_document([allow, newer], [], None))
    clock.now += 1
    kept = store.change_duration("greet", Kind.SANDBOX, HOST, Remember.HOUR)
    assert kept is not None
    assert kept.executable == EXE + "2"


def test_a_corrupt_file_that_cannot_be_moved_aside_blocks_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("policies: [unclosed\n")
    path.chmod(0o600)

    def cannot_move(p: Path, now: float) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(policies_module, "move_aside", cannot_move)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert any("could not move it aside: Permission denied" in p for p in store.problems)
    deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0)
    with pytest.raises(PolicyError, match="not changing"):
        store.set(deny)  # the unreadable file is never overwritten
    assert path.read_text() == "policies: [unclosed\n"


def test_a_rule_kept_for_this_session_only_applies_at_once(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    assert lookup(store) is None
    with exclusive(path.with_name("policies.yaml.lock")):  # the file cannot be written
        remember(store, Remember.DENY_ALWAYS)
    assert any("kept for this session only" in p for p in store.problems)
    assert lookup(store) is not None
