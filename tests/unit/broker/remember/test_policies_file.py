"""Unit tests of remembered elevation policies: the policies.yaml file and its format."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, entry, lookup, remember, write_doc

from registry_core.broker.question import Remember
from registry_core.broker.remember import policy_file
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.broker.remember.policy_file import iso_time, parse_document, parse_time
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError

# --- the file ------------------------------------------------------------------------------


def test_atomic_write_mode_and_reload(store: PolicyStore, path: Path) -> None:
    policy = remember(store, Remember.HOUR)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["policies.yaml", "policies.yaml.lock"]
    doc = yaml.safe_load(path.read_text())
    assert doc["version"] == 1
    assert doc["policies"] == [
        {
            "tool": "greet",
            "kind": "sandbox",
            "host": HOST,
            "decision": "allow",
            "remember": "1h",
            "created": iso_time(T0),
            "expires": iso_time(T0 + 3600),
            "executable": EXE,
            "sha256": SHA,
        }
    ]
    assert PolicyStore(path, clock=store._clock).list() == [policy]


def test_unwritable_location_raises(tmp_path: Path, clock: FakeClock) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    store = PolicyStore(blocker / "policies.yaml", clock=clock)
    policy = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0)
    with pytest.raises(PolicyError, match="cannot write"):
        store.set(policy)
    assert store.list() == []


def test_failed_write_leaves_no_temp_file_and_no_change(
    store: PolicyStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = remember(store, Remember.ALWAYS)
    before = path.read_bytes()

    def no_space(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(PolicyError, match="No space left"):
        store.set(Policy("other", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0))
    assert sorted(p.name for p in path.parent.iterdir()) == ["policies.yaml", "policies.yaml.lock"]
    assert path.read_bytes() == before
    assert store.list() == [first]


def test_remember_keeps_a_policy_it_cannot_save_for_the_session(
    tmp_path: Path, clock: FakeClock
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    seen: list[str] = []
    store = PolicyStore(blocker / "policies.yaml", clock=clock, on_problem=seen.append)
    policy = remember(store, Remember.ALWAYS)
    assert lookup(store) == policy
    assert seen
    assert "kept for this session only" in seen[0]
    assert store.problems == seen


def test_write_replaces_the_file_atomically(tmp_path: Path, path: Path) -> None:
    store = PolicyStore(path)
    remember(store, Remember.ALWAYS)
    before = path.stat().st_ino
    remember(store, Remember.DENY_ALWAYS, tool="other")
    assert path.stat().st_ino != before  # renamed over, never rewritten in place
    assert len(PolicyStore(path).list()) == 2


def test_external_edit_is_seen_live(store: PolicyStore, path: Path, clock: FakeClock) -> None:
    remember(store, Remember.ALWAYS)
    other = PolicyStore(path, clock=clock)  # e.g. ollie-tools policy in another process
    other.revoke("greet")
    assert lookup(store) is None
    write_doc(path, [entry(tool="edited", decision="deny", remember="deny_always")])
    policy = lookup(store, tool="edited")
    assert policy is not None
    assert policy.decision is Decision.DENY
    path.unlink()
    assert store.list() == []


def test_writes_merge_external_edits(store: PolicyStore, path: Path) -> None:
    remember(store, Remember.ALWAYS)
    PolicyStore(path).set(Policy("other", Kind.SUDO, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0))
    remember(store, Remember.ALWAYS, tool="third")
    assert sorted(p.tool for p in PolicyStore(path).list()) == ["greet", "other", "third"]


def test_expired_entries_are_pruned_on_write(store: PolicyStore, clock: FakeClock) -> None:
    remember(store, Remember.MINUTES_15)
    clock.now += 901
    remember(store, Remember.ALWAYS, tool="other")
    doc = yaml.safe_load(store.path.read_text())
    assert [p["tool"] for p in doc["policies"]] == ["other"]


def test_empty_and_missing_files_are_empty_stores(path: Path) -> None:
    assert PolicyStore(path).list() == []
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    store = PolicyStore(path)
    assert store.list() == []
    assert store.problems == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"version: 1\npolicies: [ {tool: greet\n", "not valid YAML"),
        (b"- just\n- a list\n", "top level must be a mapping"),
        (b"version: 2\npolicies: []\n", "unsupported version 2"),
        (b"version: 1\npolicies: {tool: greet}\n", "'policies' must be a list"),
        (b"version: 1\npolicies: []\nrejected: 7\n", "'rejected' must be a list"),
        (b"version: 1\npolicies: 0\n", "'policies' must be a list"),
        (b"\xff\xfe\x00garbage\x80", "not valid YAML"),
        (b"version: 1\npolicies: !!python/object:os.system {}\n", "not valid YAML"),
    ],
)
def test_corrupt_file_is_moved_aside(
    path: Path, clock: FakeClock, content: bytes, problem: str
) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    seen: list[str] = []
    store = PolicyStore(path, clock=clock, on_problem=seen.append)
    assert lookup(store) is None
    assert store.list() == []
    aside = path.with_name("policies.yaml.corrupt-20250615T150640")
    assert aside.read_bytes() == content
    assert not path.exists()
    assert len(seen) == 1
    assert store.problems == seen
    assert str(path) in seen[0]
    assert problem in seen[0]
    assert str(aside) in seen[0]
    # The store works on: a new decision starts a fresh file, the copy stays.
    remember(store, Remember.ALWAYS)
    assert lookup(PolicyStore(path, clock=clock)) is not None
    assert aside.read_bytes() == content


def test_a_file_changing_while_read_is_not_moved_aside(
    path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry_core.broker.remember import policies

    path.parent.mkdir(parents=True)
    path.write_bytes(b"version: 1\npolicies: [")  # half written by an editor
    with monkeypatch.context() as patch:
        patch.setattr(policies, "_read_bytes", lambda _path: b"version: 1\npolicies: []\n")
        store = PolicyStore(path, clock=clock)
        assert store.list() == []
        assert store.problems == []
        assert path.exists()
    assert store.list() == []  # still corrupt on the next look: now it is moved aside
    assert not path.exists()
    assert len(store.problems) == 1


def test_corrupt_copies_are_never_overwritten(path: Path, clock: FakeClock) -> None:
    path.parent.mkdir(parents=True)
    for n, content in enumerate([b"[1", b"[2", b"[3"]):
        path.write_bytes(content)
        PolicyStore(path, clock=clock).list()
        suffix = "" if n == 0 else f"-{n + 1}"
        aside = path.with_name(f"policies.yaml.corrupt-20250615T150640{suffix}")
        assert aside.read_bytes() == content


def test_a_file_that_cannot_be_read_blocks_writes(path: Path, clock: FakeClock) -> None:
    path.mkdir(parents=True)  # a directory where the file should be
    seen: list[str] = []
    store = PolicyStore(path, clock=clock, on_problem=seen.append)
    assert store.list() == []
    assert store.list() == []
    assert len(seen) == 1
    assert "cannot read" in seen[0]
    with pytest.raises(PolicyError, match="not changing"):
        store.set(Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0))
    assert path.is_dir()


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (entry(sha256="1234"), "sha256"),
        (entry(expries="2030-01-01T00:00:00Z"), "expries"),
        (entry(kind="root"), "kind"),
        (entry(remember="session"), "remember"),
        (entry(remember="1h", expires=None), "expires"),
        (entry(created="yesterday"), "created"),
        (entry(tool=123), "tool"),
        (entry(executable=None), "executable"),
        (entry(decision="deny"), "remember"),
        ({"tool": "greet"}, "kind"),
        ("just a string", "mapping"),
    ],
)
def test_bad_entry_is_skipped_and_preserved(
    path: Path, clock: FakeClock, bad: Any, field: str
) -> None:
    original = write_doc(path, [entry(tool="good"), bad, entry(tool="good2")])
    store = PolicyStore(path, clock=clock)
    assert sorted(p.tool for p in store.list()) == ["good", "good2"]
    assert len(store.problems) == 1
    assert "policies[1]" in store.problems[0]
    assert field in store.problems[0]
    assert str(path) in store.problems[0]
    assert path.read_bytes() == original  # untouched until the next write
    remember(store, Remember.ALWAYS, tool="new")
    doc = yaml.safe_load(path.read_text())
    assert [p["tool"] for p in doc["policies"]] == ["good", "good2", "new"]
    assert len(doc["rejected"]) == 1
    assert doc["rejected"][0]["entry"] == bad
    assert field in doc["rejected"][0]["problem"]
    # Reloading keeps the rejected entry, and it stays kept at later writes.
    again = PolicyStore(path, clock=clock)
    assert sorted(p.tool for p in again.list()) == ["good", "good2", "new"]
    assert "not applied" in again.problems[0]
    again.revoke_all()
    assert yaml.safe_load(path.read_text())["rejected"][0]["entry"] == bad


def test_unknown_top_level_keys_are_kept(path: Path) -> None:
    write_doc(path, [entry()], comment={"by": "hand"})
    store = PolicyStore(path)
    store.refresh()
    assert "unknown top-level key 'comment'" in store.problems[0]
    remember(store, Remember.ALWAYS, tool="new")
    assert yaml.safe_load(path.read_text())["comment"] == {"by": "hand"}


def test_missing_version_is_assumed_1(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"policies": [entry()]}))
    store = PolicyStore(path)
    assert lookup(store) is not None
    assert "no 'version'" in store.problems[0]


def test_hand_written_times(path: Path, clock: FakeClock) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(
        "version: 1\npolicies:\n"
        f"- {{tool: greet, kind: sandbox, host: {HOST}, decision: allow, remember: 1h,\n"
        "   created: 2025-06-15 15:06:40, expires: 2025-06-15T18:06:40+02:00,\n"
        f"   executable: {EXE}, sha256: {SHA.upper()}}}\n"
    )
    store = PolicyStore(path, clock=clock)
    policy = lookup(store)
    assert policy is not None
    assert policy.created == T0
    assert policy.expires == T0 + 3600
    assert policy.sha256 == SHA


def test_untrusted_file_applies_denies_only(path: Path, clock: FakeClock) -> None:
    write_doc(path, [entry(), entry(tool="bad", decision="deny", remember="deny_always")])
    path.chmod(0o666)
    store = PolicyStore(path, clock=clock)
    assert lookup(store) is None
    assert lookup(store, tool="bad") is not None
    assert "writable by its group and every user (mode 0666)" in store.problems[0]
    remember(store, Remember.ALWAYS, tool="new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert [p["tool"] for p in doc["policies"]] == ["bad", "new"]
    assert doc["rejected"][0]["entry"]["tool"] == "greet"
    assert lookup(PolicyStore(path, clock=clock)) is None


def test_documented_example_parses() -> None:
    doc = policy_file.__doc__ or ""
    start = doc.index("    version: 1")
    block = []
    for line in doc[start:].splitlines():
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    parsed = parse_document("\n".join(block).encode(), Path("doc"), T0)
    assert parsed.problems == ()
    (policy,) = parsed.policies
    assert policy.kind is Kind.SUDO
    assert policy.remember is Remember.HOUR
    assert policy.expires == parse_time("2025-05-04T13:00:00Z")


def test_problem_callback_failure_does_not_break_lookups(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"[")

    def explode(message: str) -> None:
        raise RuntimeError(message)

    store = PolicyStore(path, on_problem=explode)
    assert lookup(store) is None
    assert len(store.problems) == 1
