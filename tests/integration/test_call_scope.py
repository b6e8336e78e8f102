"""The call's transient cgroup, for real: a systemd user manager, systemd-run and bwrap.

A session with a systemd user manager runs each sandboxed call in a scope
(registry_core.sandbox.scope).  These tests run a fork bomb and a memory hog
spread over several processes through the real dispatcher, with and without
the manager, and check that the scope is what bounds them and that it is gone
after the call.

Where the session has no manager of its own, one is started for the tests
(user_manager.sh, as root on a cgroup v1/v2 hybrid machine whose PID 1 is not
systemd, like CI).  Skipped where neither is possible; under ``CI=true`` a
failure when the machine is one the helper supports.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dispatch_sandboxed import SHIPPED_PROFILE, Stack

from registry_core.sandbox.scope import UNIT_PREFIX, find_scope
from registry_core.trusted import find_trusted

pytestmark = [pytest.mark.realstack, pytest.mark.usefixtures("landlock_abi")]

HELPER = Path(__file__).with_name("user_manager.sh")
SYSTEMD = "/lib/systemd/systemd"
HIERARCHIES = ("systemd", "unified", "memory", "pids")

# Tries FORKS forks; each child sleeps briefly (the PID namespace ends them with the call).
FORKS = 300
FORK_BOMB = f"""#!/usr/bin/python3
import json, os, sys, time
sys.stdin.read()
forked, error = 0, None
for _ in range({FORKS}):
    try:
        pid = os.fork()
    except OSError as exc:
        error = exc.errno
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    forked += 1
print(json.dumps({{"forked": forked, "errno": error}}))
"""

# Three processes of 120 MiB each (touched): each under limits.memory, together over it.
HOGS = r"""#!/usr/bin/python3
import json, os, sys, time
sys.stdin.read()
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        block = bytearray(120 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(1)
        os._exit(0)
    pids.append(pid)
print(json.dumps({"statuses": [os.waitpid(pid, 0)[1] for pid in pids]}))
"""


def _unavailable(reason: str, *, supported: bool) -> None:
    if supported and os.environ.get("CI") == "true":
        pytest.fail(f"no systemd user manager for the scope tests: {reason}")
    pytest.skip(f"no systemd user manager: {reason}")


def _memory_cgroup() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            return path
    return ""


def _cgroup_dirs(name: str) -> list[str]:
    """The directories user_manager.sh makes for ``name``, parents first."""
    parts = [*_memory_cgroup().strip("/").split("/"), name]
    dirs = []
    for hierarchy in HIERARCHIES:
        for depth in range(1, len(parts) + 1):
            part = "/".join(p for p in parts[:depth] if p)
            if part:
                dirs.append(f"/sys/fs/cgroup/{hierarchy}/{part}")
    return dirs


def _remove_cgroups(made: list[str]) -> None:
    """Remove what the manager left (empty by now) and the parents the helper made."""
    for top in reversed(made):
        for directory, _subdirs, _files in os.walk(top, topdown=False):
            with contextlib.suppress(OSError):
                os.rmdir(directory)


@pytest.fixture(scope="module")
def manager() -> Iterator[str]:
    """The runtime directory of a running systemd user manager."""
    if shutil.which("bwrap") is None:
        _unavailable("bwrap is not installed", supported=True)
    existing = find_scope(dict(os.environ))
    if existing is not None:
        yield existing.runtime_dir
        return
    hybrid = "name=systemd" in Path("/proc/self/cgroup").read_text()
    supported = os.getuid() == 0 and os.path.exists(SYSTEMD) and hybrid
    if not supported:
        _unavailable(
            "the session has none, and user_manager.sh needs root, systemd and a hybrid"
            " cgroup layout",
            supported=False,
        )
    if find_trusted("systemd-run") is None or shutil.which("unshare") is None:
        _unavailable("systemd-run or unshare is missing", supported=True)
    runtime = tempfile.mkdtemp(prefix="ollie-um-", dir="/tmp")  # short: a socket path
    name = f"ollie-test-manager-{secrets.token_hex(4)}"
    made = [path for path in _cgroup_dirs(name) if not os.path.exists(path)]
    log = Path(runtime) / "manager.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(HELPER), runtime, name],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 15
        while find_scope({"XDG_RUNTIME_DIR": runtime}) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                _unavailable(
                    f"user_manager.sh did not start one: {log.read_text()[-500:]}", supported=True
                )
            time.sleep(0.05)
        yield runtime
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _remove_cgroups(made)
        shutil.rmtree(runtime, ignore_errors=True)


def _units(runtime: str) -> list[str]:
    systemctl = find_trusted("systemctl")
    assert systemctl is not None
    listed = subprocess.run(
        [systemctl, "--user", "list-units", "--all", "--plain", "--no-legend", f"{UNIT_PREFIX}*"],
        env={"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": runtime},
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split()[0] for line in listed.stdout.splitlines() if line.startswith(UNIT_PREFIX)]


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    return Stack(tmp_path)


def _scoped(stack: Stack, runtime: str) -> Stack:
    stack.env["XDG_RUNTIME_DIR"] = runtime
    return stack


def _with_limits(stack: Stack, limits: str) -> None:
    stack.write_profile("default", SHIPPED_PROFILE.read_text() + "\nlimits:\n" + limits)


def test_a_fork_bomb_stops_at_the_scopes_task_limit(stack: Stack, manager: str) -> None:
    _with_limits(stack, "  tasks: 30\n")
    stack.tool("bomb", FORK_BOMB)
    scoped = _scoped(stack, manager).call("bomb", timeout=30)
    seen = json.loads(scoped.stdout)
    assert seen["errno"] == 11  # EAGAIN from pids.max
    assert 20 <= seen["forked"] < 30
    assert not any("cgroup" in gap for gap in scoped.unenforced)
    if os.getuid() == 0:
        # The kernel never applies RLIMIT_NPROC to root: without the scope nothing bounds it.
        stack.env["XDG_RUNTIME_DIR"] = str(stack.root / "runtime")
        unscoped = stack.call("bomb", timeout=30)
        assert json.loads(unscoped.stdout) == {"forked": FORKS, "errno": None}
    assert _units(manager) == []


def test_memory_spread_over_processes_is_bounded_for_the_whole_call(
    stack: Stack, manager: str
) -> None:
    _with_limits(stack, "  memory: 200M\n")
    stack.tool("hogs", HOGS)
    scoped = _scoped(stack, manager).call("hogs", timeout=30)
    statuses = json.loads(scoped.stdout)["statuses"]
    assert 9 in statuses  # SIGKILL: the OOM killer of the call's cgroup
    # RLIMIT_DATA alone bounds each process, not their sum: all three get their 120 MiB.
    stack.env["XDG_RUNTIME_DIR"] = str(stack.root / "runtime")
    unscoped = stack.call("hogs", timeout=30)
    assert json.loads(unscoped.stdout) == {"statuses": [0, 0, 0]}
    assert _units(manager) == []


def test_the_call_has_its_own_unit_while_it_runs_and_none_after(stack: Stack, manager: str) -> None:
    stack.tool("nap", "#!/bin/sh\ncat >/dev/null\nsleep 3\necho done\n")
    seen: list[list[str]] = []

    def watch() -> None:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            units = _units(manager)
            if units:
                seen.append(units)
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    result = _scoped(stack, manager).call("nap", timeout=30, on_start=lambda pid: watcher.start())
    watcher.join()
    assert result.stdout == "done\n"
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].startswith(UNIT_PREFIX)
    assert seen[0][0].endswith(".scope")
    assert _units(manager) == []


def test_a_timeout_ends_the_call_and_its_scope(stack: Stack, manager: str) -> None:
    stack.tool("slow", "#!/bin/sh\ncat >/dev/null\nsleep 6009 &\nexec sleep 6010\n")
    result = _scoped(stack, manager).call("slow", timeout=1)
    assert (result.timed_out, result.exit_code) == (True, 124)
    deadline = time.monotonic() + 5
    while _units(manager) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _units(manager) == []
