"""Three processes remembering agents' action rules at once lose none.

``action-policies.json`` is rewritten by the tray's broker, ``ollie-broker`` and
``ollie-tools action-policy``, each with its own :class:`ActionRuleStore`.  A
store that reads the file before taking the cross-process lock can write back
a version missing a rule another process stored in between, and both report
success: the same lost update ``policies.yaml`` had.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harness_procs import run_together

from registry_core.broker.question import Remember
from registry_core.broker.remember.action_rules import ActionRuleStore
from registry_core.broker.wire.messages import PatternKind
from registry_core.file_lock import LockTimeoutError

ROUNDS = 100
WRITERS = 3

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from registry_core.broker.remember.action_rules import ActionRuleStore
    from registry_core.broker.wire.messages import PatternKind
    from registry_core.broker.question import Remember

    path, name, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = ActionRuleStore(path)
    sys.stdin.readline()  # start together
    for n in range(rounds):
        choice = Remember.ALWAYS if n % 2 else Remember.DENY_ALWAYS
        if store.remember("claude", "Bash", PatternKind.PROGRAM, f"{name}-{n}", choice) is None:
            sys.exit(f"round {n}: not remembered")
    sys.exit("\\n".join(store.problems) if store.problems else 0)
    """
)


def test_three_writer_processes_lose_no_action_rule(tmp_path: Path) -> None:
    path = tmp_path / "config" / "action-policies.json"
    argv = [sys.executable, "-c", _WRITER, str(path)]
    assert run_together([[*argv, f"w{i}", str(ROUNDS)] for i in range(WRITERS)]) == [0] * WRITERS
    rules = json.loads(path.read_text())["rules"]
    patterns = {r["pattern"] for r in rules}
    expected = {f"w{i}-{n}" for i in range(WRITERS) for n in range(ROUNDS)}
    assert len(expected - patterns) == 0, f"{len(expected - patterns)} rules lost"
    assert len(rules) == WRITERS * ROUNDS


def _holder(lock: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600);"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
            str(lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_held_lock_is_a_clear_error_after_the_timeout_never_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "action-policies.json"
    lock = tmp_path / "action-policies.json.lock"
    with _holder(lock) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        store = ActionRuleStore(path, lock_timeout=0.3)
        # forget and revoke are asked for by a person: a clear error, nothing changed.
        with pytest.raises(LockTimeoutError, match=r"could not lock .*action-policies\.json\.lock"):
            store.forget(agent="claude")
        # remember never raises (it is on the broker's answer path): the rule is kept
        # for this process and the problem names the lock.
        rule = store.remember("claude", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
        assert rule is not None
        assert store.problems == [
            f"{path}: cannot write: could not lock {lock} within 0.3 s: another process "
            "holds it (a running ollie-tray, ollie-broker or ollie-tools); "
            "kept for this session only"
        ]
        assert [r.pattern for r in store.rules()] == ["git"]
        assert not path.exists()
        holder.kill()
    # Once the holder is gone, the kernel has released its lock.
    store = ActionRuleStore(path, lock_timeout=5)
    store.remember("claude", "Bash", PatternKind.PROGRAM, "ls", Remember.ALWAYS)
    assert [r["pattern"] for r in json.loads(path.read_text())["rules"]] == ["ls"]
    assert store.problems == []
