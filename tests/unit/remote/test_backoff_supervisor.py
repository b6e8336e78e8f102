"""The connect supervisor: backoff schedule, remote preparation, state files, reconnects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from registry_core import paths
from registry_core.errors import RemoteError
from registry_core.remote.connect import (
    EXIT_BUSY,
    EXIT_FATAL,
    Backoff,
    BackoffSchedule,
    Supervisor,
    expand_remote_path,
    parse_prepare,
    prepare_script,
)
from registry_core.remote.ssh import SshTarget
from registry_core.remote.state import read_connection, state_file

DEADLINE = 20.0

FAKE_SSH = """#!{python}
# A stand-in for ssh: command mode prints what the prepare script would; -N mode
# follows the next line of the plan file (ok: report the forward and wait; fail;
# hostkey), logging every start.
import os, signal, sys, time
plan = os.environ["FAKE_SSH_PLAN"]
if "-N" not in sys.argv:
    print("socket=/run/user/7/ollie/elevate.sock\\nuser=alice\\nhome=/home/alice")
    sys.exit(0)
with open(plan) as fh:
    lines = fh.read().splitlines()
step = lines[0] if lines else "ok"
with open(plan, "w") as fh:
    fh.write("\\n".join(lines[1:]))
with open(plan + ".log", "a") as fh:
    fh.write(f"{{os.getpid()}} {{step}} {{' '.join(sys.argv[1:])}}\\n")
if step == "fail":
    print("ssh: connect to host x port 22: Connection refused", file=sys.stderr)
    sys.exit(255)
if step == "hostkey":
    print("Host key verification failed.", file=sys.stderr)
    sys.exit(255)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("debug1: remote forward success for: listen /x:-2", file=sys.stderr, flush=True)
while True:
    signal.pause()
"""


def test_backoff_doubles_up_to_the_cap_and_resets_after_a_healthy_minute() -> None:
    schedule = BackoffSchedule()
    delays = [schedule.next_delay(0.5) for _ in range(9)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert schedule.next_delay(61.0) == 1  # the connection had stayed up a minute
    assert schedule.next_delay(5.0) == 2
    custom = BackoffSchedule(Backoff(initial=0.5, factor=3, cap=5, healthy_after=10))
    assert [custom.next_delay(1) for _ in range(4)] == [0.5, 1.5, 4.5, 5]


@pytest.mark.parametrize("runtime", [True, False])
def test_prepare_script_chooses_the_socket_paths_runtime_dir_would(
    tmp_path: Path, runtime: bool
) -> None:
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    if runtime:
        (tmp_path / "run").mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    done = subprocess.run(
        ["sh", "-c", prepare_script(None)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"socket={paths.elevate_socket(env)}" in done.stdout.splitlines()


def test_prepare_script_never_falls_back_to_tmp_and_refuses_foreign_dirs() -> None:
    script = prepare_script(None)
    assert "/tmp" not in script  # never a directory every sandboxed tool may write
    assert '[ ! -O "$dir" ]' in script  # a directory owned by someone else is refused
    assert 'if [ -S "$sock" ]; then rm -f -- "$sock"; fi' in script
    assert "sock=/srv/s/x.sock\n" in prepare_script("/srv/s/x.sock")


def test_prepare_script_runs_in_a_posix_shell(tmp_path: Path) -> None:
    import subprocess

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    stale = tmp_path / "ollie"
    stale.mkdir(mode=0o755)
    out = subprocess.run(
        ["sh", "-c", prepare_script(None)], env=env, capture_output=True, text=True, check=True
    )
    side = parse_prepare(out.stdout)
    assert side.socket == str(tmp_path / "ollie" / "elevate.sock")
    assert side.home == str(tmp_path)
    assert (stale.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("cache", [None, "xdg-cache"])
def test_prepare_script_without_a_runtime_dir_agrees_with_paths(
    tmp_path: Path, cache: str | None
) -> None:
    import subprocess

    from registry_core import paths

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    if cache:
        env["XDG_CACHE_HOME"] = str(tmp_path / cache)
    out = subprocess.run(
        ["sh", "-c", prepare_script(None)], env=env, capture_output=True, text=True, check=True
    )
    side = parse_prepare(out.stdout)
    assert side.socket == str(paths.elevate_socket(env))
    assert side.socket.startswith(f"{tmp_path / (cache or 'home/.cache')}/ollie/runtime-")
    # Every directory the script created is private, not only the socket's own.
    created = Path(side.socket).parent
    while created != tmp_path:
        assert (created.stat().st_mode & 0o777) == 0o700, created
        created = created.parent


def test_parse_prepare_needs_an_absolute_socket() -> None:
    with pytest.raises(RemoteError):
        parse_prepare("socket=relative\n")
    assert expand_remote_path("~/.config/ollie/tools", "/home/a") == "/home/a/.config/ollie/tools"
    assert expand_remote_path("tools", "/home/a/") == "/home/a/tools"
    assert expand_remote_path("/srv/tools", "/home/a") == "/srv/tools"


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    program = tmp_path / "fake-ssh"
    program.write_text(FAKE_SSH.format(python=sys.executable))
    program.chmod(0o755)
    plan = tmp_path / "plan"
    monkeypatch.setenv("FAKE_SSH_PLAN", str(plan))

    def with_plan(steps: str) -> Path:
        plan.write_text(steps)
        return program

    return with_plan


class Running:
    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.code = self.supervisor.run()

    def stop(self) -> int | None:
        self.supervisor.stop()
        self.thread.join(DEADLINE)
        return self.code


@pytest.fixture
def run_supervisor(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def start(program: Path, host: str = "box", **kw: Any) -> Running:
        supervisor = Supervisor(
            SshTarget(host, ssh=str(program)),
            local_socket=tmp_path / "local.sock",
            state_dir=tmp_path / "state",
            backoff=Backoff(initial=0.01, cap=0.05),
            log=lambda _text: None,
            **kw,
        )
        item = Running(supervisor)
        running.append(item)
        return item

    yield start
    for item in running:
        item.stop()


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        threading.Event().wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_state_file_while_connected_then_reconnect_after_failures(
    tmp_path: Path, fake_ssh: Callable[[str], Path], run_supervisor: Callable[..., Running]
) -> None:
    program = fake_ssh("ok\n")
    running = run_supervisor(program)
    path = state_file(tmp_path / "state", "box")
    conn = wait_for(lambda: (c := read_connection(path)) and c.connected and c, "connected")
    assert conn.pid == os.getpid()
    assert conn.remote_socket == "/run/user/7/ollie/elevate.sock"
    assert conn.remote_user == "alice"
    assert conn.tools_dir == "/home/alice/.config/ollie/tools"
    assert conn.local_socket == str(tmp_path / "local.sock")
    assert (path.stat().st_mode & 0o777) == 0o600
    assert ((tmp_path / "state").stat().st_mode & 0o777) == 0o700
    first = conn.ssh_pid
    # ssh dies; two attempts fail; the third holds again.
    (tmp_path / "plan").write_text("fail\nfail\nok\n")
    os.kill(first, 9)

    def reconnected() -> Any:
        c = read_connection(path)
        return c if c and c.connected and c.ssh_pid != first else None

    again = wait_for(reconnected, "reconnected")
    log = (tmp_path / "plan.log").read_text().splitlines()
    assert [line.split()[1] for line in log] == ["ok", "fail", "fail", "ok"]
    assert again.since == conn.since  # one supervisor, one "since"
    assert running.stop() == 0
    assert not path.exists()  # removed when stopped
    assert not os.path.exists(f"/proc/{again.ssh_pid}") or _zombie_or_gone(again.ssh_pid)


def _zombie_or_gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "State:\tZ" in status


def test_an_unknown_host_key_ends_the_supervisor(
    tmp_path: Path, fake_ssh: Callable[[str], Path], run_supervisor: Callable[..., Running]
) -> None:
    running = run_supervisor(fake_ssh("hostkey\n"))
    running.thread.join(DEADLINE)
    assert running.code == EXIT_FATAL
    assert not state_file(tmp_path / "state", "box").exists()


def test_one_supervisor_per_host(
    tmp_path: Path, fake_ssh: Callable[[str], Path], run_supervisor: Callable[..., Running]
) -> None:
    program = fake_ssh("ok\n")
    run_supervisor(program)
    path = state_file(tmp_path / "state", "box")
    wait_for(lambda: (c := read_connection(path)) and c.connected, "connected")
    second = run_supervisor(program)
    second.thread.join(DEADLINE)
    assert second.code == EXIT_BUSY
    assert read_connection(path) is not None  # the first one's record is untouched
    data = json.loads(path.read_text())
    assert data["connected"] is True
