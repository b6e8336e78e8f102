"""Three processes rewriting ``policies.yaml`` at once lose nothing.

Each writer is a real process with its own :class:`PolicyStore` (as the broker,
the tray and ``ollie-tools policy`` each have one); each remembers its own
rules round after round.  Before the cross-process lock, a writer reading the
file between another's read and rename dropped that writer's rule while both
reported success.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from harness_procs import run_together

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire.messages import Kind
from registry_core.errors import PolicyError

ROUNDS = 100
WRITERS = 3

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from registry_core.broker.remember.policies import PolicyStore
    from registry_core.broker.question import Remember

    path, name, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    try:
        store = PolicyStore(path, lock_timeout=60)
    except TypeError:  # the store before the lock
        store = PolicyStore(path)
    sys.stdin.readline()  # start together
    for n in range(rounds):
        exe = "/opt/tools/t"
        choice = Remember.ALWAYS if n % 2 else Remember.DENY_ALWAYS
        if store.remember(f"{name}-{n}", "sandbox", "h", choice, exe, "a" * 64) is None:
            sys.exit(f"round {n}: not remembered")
    problems = [p for p in store.problems if "kept for this session" in p]
    sys.exit("\\n".join(problems) if problems else 0)
    """
)


def test_three_writer_processes_lose_no_rule(tmp_path: Path) -> None:
    path = tmp_path / "config" / "policies.yaml"
    argv = [sys.executable, "-c", _WRITER, str(path)]
    assert run_together([[*argv, f"w{i}", str(ROUNDS)] for i in range(WRITERS)]) == [0] * WRITERS
    entries = yaml.safe_load(path.read_text())["policies"]
    names = {e["tool"] for e in entries}
    expected = {f"w{i}-{n}" for i in range(WRITERS) for n in range(ROUNDS)}
    assert len(expected - names) == 0, f"{len(expected - names)} rules lost"
    assert len(entries) == WRITERS * ROUNDS


def test_a_held_lock_is_a_clear_error_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600);"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
            str(path) + ".lock",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        store = PolicyStore(path, lock_timeout=0.3)
        with pytest.raises(PolicyError, match=r"could not lock .*policies\.yaml\.lock"):
            store.revoke_all()
        # remember() keeps the choice for this session and says why it was not saved.
        policy = store.remember("t", Kind.SANDBOX, "h", Remember.DENY_ALWAYS, None, None)
        assert policy is not None
        assert any("kept for this session only" in p for p in store.problems)
        assert not path.exists()
        holder.kill()
    # Once the holder is gone, the kernel has released its lock.
    PolicyStore(path, lock_timeout=5).revoke_all()
