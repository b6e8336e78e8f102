"""Expiry against both clocks, implausible times rejected, hostile policies files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, lookup, remember

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.broker.remember.policy_file import iso_time
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError


def test_a_wall_clock_stepped_back_does_not_stretch_an_allow(tmp_path: Path) -> None:
    wall, mono = FakeClock(), FakeClock(1000.0)
    store = PolicyStore(tmp_path / "policies.yaml", clock=wall, monotonic=mono)
    assert remember(store, Remember.MINUTES_15) is not None
    assert lookup(store) is not None
    wall.now -= 86400  # the clock is stepped back one day
    mono.now += 14 * 60
    assert lookup(store) is not None
    mono.now += 61
    assert lookup(store) is None
    assert store.list() == []


def test_the_wall_clock_ends_an_allow_across_restarts(tmp_path: Path) -> None:
    wall = FakeClock()
    store = PolicyStore(tmp_path / "policies.yaml", clock=wall, monotonic=FakeClock(0.0))
    remember(store, Remember.HOUR)
    wall.now += 3600  # a new process, no monotonic time passed: the wall clock decides
    later = PolicyStore(tmp_path / "policies.yaml", clock=wall, monotonic=FakeClock(0.0))
    assert lookup(later) is None


def test_a_new_process_counts_the_remaining_time_not_more(tmp_path: Path) -> None:
    wall = FakeClock()
    PolicyStore(tmp_path / "policies.yaml", clock=wall).remember(
        "greet", "sandbox", HOST, Remember.MINUTES_15, EXE, SHA
    )
    wall.now += 600
    mono = FakeClock(0.0)
    later = PolicyStore(tmp_path / "policies.yaml", clock=wall, monotonic=mono)
    assert lookup(later) is not None
    wall.now -= 86400
    mono.now += 301  # 5 of the 15 minutes were left
    assert lookup(later) is None


def _entry(created: float, expires: float | None, remember: str = "15m") -> dict[str, object]:
    return {
        "tool": "greet",
        "kind": "sandbox",
        "host": HOST,
        "decision": "allow",
        "remember": remember,
        "created": iso_time(created),
        "expires": None if expires is None else iso_time(expires),
        "executable": EXE,
        "sha256": SHA,
    }


@pytest.mark.parametrize(
    ("created", "expires", "choice", "problem"),
    [
        (T0 + 3600, T0 + 3600 + 900, "15m", "field 'created'.*in the future"),
        (T0, T0 + 86400, "15m", "field 'expires'.*more than 15m after 'created'"),
        (T0, T0 + 3601, "1h", "field 'expires'.*more than 1h after 'created'"),
    ],
)
def test_implausible_times_are_rejected_and_kept(
    tmp_path: Path, created: float, expires: float, choice: str, problem: str
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "policies": [_entry(created, expires, choice)]}))
    path.chmod(0o600)
    store = PolicyStore(path, clock=FakeClock())
    assert lookup(store) is None
    assert any(pytest.importorskip("re").search(problem, p) for p in store.problems)
    remember(store, Remember.DENY_ALWAYS, tool="other")  # the next write keeps it aside
    doc = yaml.safe_load(path.read_text())
    assert [e["tool"] for e in doc["policies"]] == ["other"]
    assert doc["rejected"][0]["entry"]["created"] == iso_time(created)


def test_a_little_clock_skew_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "policies": [_entry(T0 + 30, T0 + 930)]}))
    path.chmod(0o600)
    assert lookup(PolicyStore(path, clock=FakeClock())) is not None


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "device"])
def test_a_policies_path_that_is_no_regular_file_is_named_not_read(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "policies.yaml"
    real = tmp_path / "real.yaml"
    real.write_text(yaml.safe_dump({"version": 1, "policies": [_entry(T0, T0 + 900)]}))
    real.chmod(0o600)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(real)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    store = PolicyStore(path, clock=FakeClock())
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(lookup(store)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the lookup hung"
    assert result == [None]
    assert any(str(path) in p and "not a regular file" in p for p in store.problems)
    deny = Policy("greet", Kind.SANDBOX, HOST, Decision.DENY, Remember.DENY_ALWAYS, T0)
    with pytest.raises(PolicyError, match="not a regular file"):
        store.set(deny)  # writes are refused: the path is left as it is
    assert os.path.lexists(path)
