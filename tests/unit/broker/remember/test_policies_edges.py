"""Policy store edge cases found by mutation testing (``make mutate``): each test
breaks when one rule of :mod:`registry_core.broker.remember.policies` is changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, lookup, remember

from registry_core.broker.question import Remember
from registry_core.broker.remember import policies as policies_module
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.broker.remember.policy_file import render_document
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError


def _write(path: Path, policies: list[Policy]) -> None:
    path.write_text(render_document(policies, [], None))
    path.chmod(0o600)


def test_change_duration_of_a_denied_key_acts_on_the_deny_even_beside_a_newer_allow(
    tmp_path: Path,
) -> None:
    # A hand edit left a deny (no executable) and a newer allow for one key: the deny
    # is in effect, so an allow choice cannot be made from it (it names no executable).
    path = tmp_path / "policies.yaml"
    deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0 - 5)
    allow = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)
    _write(path, [deny, allow])
    store = PolicyStore(path, clock=FakeClock())
    with pytest.raises(PolicyError, match=r"cannot change deny greet \(sandbox\) on laptop"):
        store.change_duration("greet", Kind.SANDBOX, HOST, Remember.HOUR)
    found = lookup(store)
    assert found is not None
    assert found.decision is Decision.DENY  # unchanged


def test_revoke_counts_only_active_session_policies(tmp_path: Path) -> None:
    clock = FakeClock()
    store = PolicyStore(tmp_path / "policies.yaml", clock=clock)
    stale = Policy(
        "greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.SESSION, T0, T0 + 60, EXE, SHA
    )
    store.set(stale)
    clock.now += 61  # its own expiry has passed
    assert store.revoke("greet") == 0
    assert store.list(include_expired=True) == []


def test_a_session_answer_is_reported_before_an_allow_another_program_stored(
    tmp_path: Path,
) -> None:
    # The person answered "this session" here; another program has since written an
    # allow for the same key: both allow, and the lookup names the person's answer.
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock())
    session = remember(store, Remember.SESSION)
    assert session is not None
    _write(
        path,
        [Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)],
    )
    assert lookup(store) == session


def test_a_corrupt_file_that_vanishes_while_parsed_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("policies: [unclosed\n")
    path.chmod(0o600)
    real_parse = policies_module.parse_document

    def removed_meanwhile(*args: Any, **kwargs: Any) -> Any:
        path.unlink()  # another program replaces the file: it is gone for a moment
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(policies_module, "parse_document", removed_meanwhile)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert store.problems == []
    assert list(tmp_path.iterdir()) == []  # nothing moved aside: there was nothing to move


def test_a_corrupt_file_with_too_many_copies_aside_names_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("policies: [unclosed\n")
    path.chmod(0o600)
    base = "policies.yaml.corrupt-20250615T150640"
    (tmp_path / base).write_text("old\n")
    for n in range(2, 1000):
        (tmp_path / f"{base}-{n}").write_text("old\n")
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert len(store.problems) == 1
    assert "could not move it aside: too many corrupt copies of" in store.problems[0]
    assert path.read_text() == "policies: [unclosed\n"  # kept, never overwritten


def test_a_corrupt_file_that_cannot_be_moved_is_not_read_again_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("policies: [unclosed\n")
    path.chmod(0o600)
    attempts: list[Path] = []

    def cannot_move(p: Path, now: float) -> Path:
        attempts.append(p)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(policies_module, "move_aside", cannot_move)
    store = PolicyStore(path, clock=FakeClock())
    for _ in range(3):
        assert lookup(store) is None  # the hot path does not parse an unchanged file again
    assert attempts == [path]
    path.write_text("policies: [still unclosed\n")
    assert lookup(store) is None
    assert attempts == [path, path]  # changed: read (and tried) again


def test_execute_bits_for_group_or_others_leave_the_file_trusted(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    allow = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)
    _write(path, [allow])
    path.chmod(0o711)  # only write bits make a file untrusted
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) == allow
    assert store.problems == []


def test_an_untrusted_files_allow_is_kept_under_rejected_saying_why(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    allow = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)
    _write(path, [allow])
    path.chmod(0o660)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    store.set(Policy("other", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0))
    doc = yaml.safe_load(path.read_text())
    assert [r["problem"] for r in doc["rejected"]] == [
        "the file was writable by its group (mode 0660); allow not applied"
    ]
    assert doc["rejected"][0]["entry"] == allow.to_json()


def test_an_unreadable_file_is_reported_once_and_not_opened_again_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    os.mkfifo(path, 0o600)
    opened: list[Path] = []
    real_open = policies_module.open_regular

    def counting_open(p: Path) -> int:
        opened.append(p)
        return real_open(p)

    monkeypatch.setattr(policies_module, "open_regular", counting_open)
    store = PolicyStore(path, clock=FakeClock())
    for _ in range(3):
        assert lookup(store) is None
    assert opened == [path]
    assert store.problems == [
        f"cannot read {path}: not a regular file (a FIFO); remembered policies are not applied"
    ]


def test_a_file_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    note = "n" * (3 << 19)  # 1.5 MiB: more than one read of the file
    allow = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, EXE, SHA)
    path.write_text(render_document([allow], [], {"note": note}))
    path.chmod(0o600)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) == allow
    store.revoke("greet")
    assert yaml.safe_load(path.read_text())["note"] == note  # kept as is by the write


def test_an_invalid_policy_is_refused_naming_the_tool_and_field(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies.yaml", clock=FakeClock())
    bad = Policy("greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.ALWAYS, T0, None, None, SHA)
    with pytest.raises(PolicyError) as refused:
        store.set(bad)
    assert str(refused.value) == (
        "invalid policy for greet: field 'executable': an allow needs the executable's "
        "absolute path"
    )


def test_an_allow_created_slightly_in_the_future_lives_no_longer_than_stated(
    tmp_path: Path,
) -> None:
    # created within the allowed clock skew (60 s ahead): expires - now is 3660 s, yet
    # the monotonic clock ends the 1h allow after exactly one hour.
    path = tmp_path / "policies.yaml"
    ahead = Policy(
        "greet", Kind.SANDBOX, HOST, Decision.ALLOW, Remember.HOUR, T0 + 60, T0 + 3660, EXE, SHA
    )
    _write(path, [ahead])
    mono = FakeClock(500.0)
    store = PolicyStore(path, clock=FakeClock(), monotonic=mono)
    assert lookup(store) == ahead
    mono.now += 3599
    assert lookup(store) == ahead
    mono.now += 1
    assert lookup(store) is None


def test_a_new_decision_replaces_the_keys_session_policy(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies.yaml", clock=FakeClock())
    session_deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.SESSION, T0)
    store.set(session_deny)
    allow = remember(store, Remember.ALWAYS)
    assert allow is not None
    assert store.list() == [allow]
    assert lookup(store) == allow


def test_writes_work_again_once_an_unreadable_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    os.mkfifo(path, 0o600)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    path.unlink()
    assert lookup(store) is None
    deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0)
    store.set(deny)
    assert PolicyStore(path, clock=FakeClock()).list() == [deny]


def test_a_directory_swapped_in_while_writing_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "ollie"
    path = home / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock())
    remember(store, Remember.DENY_ALWAYS)
    real_render = policies_module.render_document

    def swap_directory(*args: Any) -> str:
        home.rename(tmp_path / "moved")  # the lock file moves with it
        home.write_text("not a directory\n")
        return real_render(*args)

    monkeypatch.setattr(policies_module, "render_document", swap_directory)
    with pytest.raises(PolicyError) as refused:
        store.revoke("greet")
    assert str(refused.value) == f"cannot write {path}: Not a directory"


def test_the_file_just_written_is_not_read_back_by_the_next_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock())
    opened: list[Path] = []
    real_open = policies_module.open_regular

    def counting_open(p: Path) -> int:
        opened.append(p)
        return real_open(p)

    monkeypatch.setattr(policies_module, "open_regular", counting_open)
    allow = remember(store, Remember.ALWAYS)
    opened.clear()
    assert lookup(store) == allow
    assert opened == []  # the store knows what it wrote


def test_without_a_listener_problems_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policies.yaml"
    os.mkfifo(path, 0o600)
    store = PolicyStore(path, clock=FakeClock())
    with caplog.at_level("WARNING", logger="registry_core.broker.remember.policies"):
        assert lookup(store) is None
    assert [r.getMessage() for r in caplog.records] == store.problems
    assert store.problems[0].startswith(f"cannot read {path}: not a regular file")


def test_a_path_that_cannot_be_looked_at_blocks_writes_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / ("p" * 300) / "policies.yaml"  # a directory name too long to exist
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert store.problems == [
        f"cannot read {path}: File name too long; remembered policies are not applied"
    ]
    with pytest.raises(PolicyError):
        store.set(Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0))


def test_a_reload_keeps_the_monotonic_deadline_of_an_allow(tmp_path: Path) -> None:
    wall, mono = FakeClock(), FakeClock(1000.0)
    store = PolicyStore(tmp_path / "policies.yaml", clock=wall, monotonic=mono)
    assert remember(store, Remember.MINUTES_15) is not None
    assert lookup(store) is not None  # its deadline: 15 minutes of monotonic time from now
    mono.now += 14 * 60  # the wall clock stands still (a suspended or stepped clock)
    remember(store, Remember.DENY_ALWAYS, tool="other")  # the file is written and re-read
    assert lookup(store) is not None
    mono.now += 61
    assert lookup(store) is None


def test_a_lookup_of_an_unknown_kind_is_an_error_not_a_miss(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies.yaml", clock=FakeClock())
    remember(store, Remember.ALWAYS)
    assert lookup(store, kind="sandbox") is not None  # a plain string names a kind too
    with pytest.raises(ValueError, match="bogus"):
        lookup(store, kind="bogus")
