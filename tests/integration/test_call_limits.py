"""Per-call limits, attacked for real: fork bomb, memory hog and CPU spin in bwrap.

A tool must not be able to take the person's desktop down.  Each test runs
the attack as a tool through the real dispatcher (bwrap, the exec step,
Landlock) and checks that the call ends at its bound while the dispatcher
carries on.  The fork bomb runs as a throwaway non-root user: the kernel
never applies ``RLIMIT_NPROC`` to uid 0, and what must be shown is that the
bound counts the call's tasks and not the person's other processes.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sudo_user
from sudo_user import SudoUser
from test_dispatch_sandboxed import SHIPPED_PROFILE, Stack
from test_escape_containment import Desk

from registry_core.errors import ProfileError

pytestmark = [pytest.mark.realstack, pytest.mark.usefixtures("landlock_abi")]

# Tries 1000 forks; each child sleeps briefly (the PID namespace ends them with the call).
FORK_BOMB = r"""#!/usr/bin/python3
import json, os, sys, time
sys.stdin.read()
forked, error = 0, None
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError as exc:
        error = exc.errno
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    forked += 1
print(json.dumps({"forked": forked, "errno": error}))
"""

MEMORY_HOG = r"""#!/usr/bin/python3
import json, sys
sys.stdin.read()
try:
    hog = bytearray(2 << 30)  # 2 GiB, beyond the 256 MiB of the test profile
    print(json.dumps({"allocated": len(hog)}))
except MemoryError:
    print(json.dumps({"allocated": 0}))
"""

CPU_SPIN = "#!/usr/bin/python3\nwhile True:\n    pass\n"


def _require_bwrap() -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bwrap is not installed")
        pytest.skip("bwrap is not installed")


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    _require_bwrap()
    return Stack(tmp_path)


def _with_limits(stack: Stack, name: str, limits: str) -> None:
    stack.write_profile(name, SHIPPED_PROFILE.read_text() + "\nlimits:\n" + limits)


def test_a_memory_hog_fails_inside_the_call_and_the_dispatcher_is_fine(stack: Stack) -> None:
    _with_limits(stack, "small", "  memory: 256M\n")
    stack.tool("hog", MEMORY_HOG)
    before = resource.getrlimit(resource.RLIMIT_DATA)
    result = stack.call("hog", profile="small", timeout=30)
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"allocated": 0})
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # never set on the dispatcher
    assert bytearray(300 << 20)  # and the dispatcher itself still allocates beyond it


def test_a_cpu_spin_is_stopped_at_the_cpu_limit_and_says_so(stack: Stack) -> None:
    _with_limits(stack, "spin", "  cpu: 1\n")
    stack.tool("spin", CPU_SPIN)
    result = stack.call("spin", profile="spin", timeout=30)
    assert not result.timed_out and result.duration < 10
    assert result.exit_code == 128 + 24  # SIGXCPU
    assert result.stderr.endswith("stopped by the CPU time limit (limits.cpu: 1 s per process)")


def test_the_landlock_only_path_applies_memory_and_cpu_too(stack: Stack) -> None:
    _with_limits(stack, "lenient", "  cpu: 1\n  memory: 256M\n")
    path = stack.profile_path("lenient")
    path.write_text(path.read_text().replace("best_effort: false", "best_effort: true"))
    stack.tool("hog", MEMORY_HOG)
    stack.tool("spin", CPU_SPIN)
    hog = stack.call("hog", profile="lenient", no_bwrap=True, timeout=30)
    assert json.loads(hog.stdout) == {"allocated": 0}
    spin = stack.call("spin", profile="lenient", no_bwrap=True, timeout=30)
    assert (spin.exit_code, spin.timed_out) == (-24, False)
    assert "stopped by the CPU time limit" in spin.stderr


def test_without_a_limits_section_the_defaults_apply(stack: Stack) -> None:
    stack.tool(
        "show",
        "#!/usr/bin/python3\nimport json, resource as r, sys\nsys.stdin.read()\n"
        "kinds = (r.RLIMIT_NPROC, r.RLIMIT_DATA, r.RLIMIT_CPU)\n"
        "print(json.dumps([r.getrlimit(x) for x in kinds]))\n",
    )
    result = stack.call("show", timeout=7)
    cpu = 7 * (os.cpu_count() or 1)
    assert json.loads(result.stdout) == [[256, 256], [4 << 30, 4 << 30], [cpu, cpu + 1]]


@pytest.mark.parametrize(
    ("limits", "named"),
    [("  tasks: none\n", "limits.tasks"), ("  memory: 4X\n", "limits.memory")],
)
def test_a_profile_with_bad_limits_is_refused_before_anything_runs(
    stack: Stack, limits: str, named: str
) -> None:
    _with_limits(stack, "bad", limits)
    marker = stack.root / "ran"
    stack.tool("touch", f"#!/bin/sh\ntouch {marker}\n")
    with pytest.raises(ProfileError) as caught:
        stack.call("touch", profile="bad")
    assert named in str(caught.value) and "line" in str(caught.value)
    assert not marker.exists()


# --- The fork bomb, as a non-root user with other processes of their own running.

OUTSIDE = 40  # the person's other processes, more than the call's bound
TASKS = 30
BWRAP_PLAIN = ("--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "/bin/true")


@pytest.fixture(scope="module")
def user() -> Iterator[SudoUser]:
    _require_bwrap()
    with sudo_user.throwaway() as account:
        yield account


@pytest.fixture
def desk(user: SudoUser) -> Iterator[Desk]:
    root = user.base / f"t-{secrets.token_hex(4)}"
    desk = Desk(user, root)
    sandbox = desk.home / ".config" / "ollie" / "sandbox"
    sandbox.mkdir(parents=True)
    default = sandbox / "default.yaml"
    default.write_text(SHIPPED_PROFILE.read_text() + f"\nlimits:\n  tasks: {TASKS}\n")
    for path in (sandbox, default):
        os.chown(path, user.uid, user.gid)
    others = [
        user.popen(["/bin/sleep", "120"], desk.env, desk.work, stdin=subprocess.DEVNULL)
        for _ in range(OUTSIDE)
    ]
    try:
        yield desk
    finally:
        for proc in others:
            proc.kill()
            proc.wait()
        shutil.rmtree(desk.runtime, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def test_a_fork_bomb_gets_at_most_the_task_limit_and_the_call_ends(desk: Desk) -> None:
    desk.tool("bomb", FORK_BOMB)
    result = desk.result("bomb")
    seen = json.loads(result["stdout"])
    # Bounded (bwrap's init, the tool and its children share the TASKS), refused with
    # EAGAIN; and the person's OUTSIDE other processes are not counted against it.
    assert seen["errno"] == 11
    assert TASKS - 5 <= seen["forked"] < TASKS
    assert result["exit_code"] == 0 and not result["timed_out"]


def test_the_same_bound_set_before_bwrap_would_count_the_persons_processes(desk: Desk) -> None:
    """Why the exec step sets it inside: outside, the kernel counts every process of the uid."""
    limit = TASKS

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))

    done = desk.user.run(
        [shutil.which("bwrap") or "bwrap", *BWRAP_PLAIN],
        desk.env,
        desk.work,
        preexec_fn=bound,
    )
    assert done.returncode != 0, "bwrap started although the uid has more processes than the bound"
