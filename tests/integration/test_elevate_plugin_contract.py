"""``ollie-elevate`` driven the way ollie-core drives its ``x/elevate`` plugin.

ollie-core (``executeElevated``) starts ``<plugins>/elevate -- <code>`` with
the session directory as cwd, no stdin, stdout and stderr on pipes, waits
for the exit status -- and at the step's deadline (default 30 s) SIGKILLs
the plugin process alone (Go's ``exec.CommandContext``).  Here the real
entry point runs as a subprocess in that way against a real broker (a
thread of this process) with a scripted person; every process of the code
is real, and after a kill none may survive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_harness import DEADLINE, SPAWNER, alive, read_to_eof, wait_all_gone, wait_for_file
from scripted_broker import FakePrompter, ServerThread, live_server, server_without_tools

from registry_core.broker.question import Approval

ELEVATE = Path(sys.executable).parent / "ollie-elevate"
DENIED = 77


_started: list[subprocess.Popen[bytes]] = []
_code_pids: list[int] = []


@pytest.fixture(autouse=True)
def _no_plugin_left() -> Iterator[None]:
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(DEADLINE)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    while _code_pids:  # a failed test must not leave the code's processes behind
        pid = _code_pids.pop()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def prompter() -> FakePrompter:
    return FakePrompter()


@pytest.fixture
def server(tmp_path: Path, prompter: FakePrompter) -> Iterator[ServerThread]:
    with server_without_tools(tmp_path, prompter) as thread:
        yield thread


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "session"
    path.mkdir()
    return path


def plugin_env(server: ServerThread, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "OLLIE_ELEVATE_SOCKET": str(server.path),
        "LANG": "C.UTF-8",
        **extra,
    }
    if "PYTHONPATH" in os.environ:  # lets the suite run against another checkout
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def start_plugin(code: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """As ollie-core starts it: argv ``-- code``, cwd, no stdin, two pipes."""
    proc = subprocess.Popen(
        [str(ELEVATE), "--", code],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _started.append(proc)
    return proc


def code_pids(session: Path) -> list[int]:
    pids = [int(line) for line in (session / "pids").read_text().split()]
    _code_pids.extend(pids)
    return pids


def test_output_streams_cwd_and_exit_status_reach_the_runtime(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path
) -> None:
    prompter.approvals.append(Approval(True))
    proc = start_plugin("pwd; echo err >&2; exit 5", session, plugin_env(server, tmp_path))
    out, err = read_to_eof(proc)
    assert proc.wait(DEADLINE) == 5
    assert (out, err) == (f"{session}\n".encode(), b"err\n")


def test_code_killed_by_a_signal_exits_128_plus_the_signal(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path
) -> None:
    prompter.approvals.append(Approval(True))
    proc = start_plugin("kill -TERM $$", session, plugin_env(server, tmp_path))
    read_to_eof(proc)
    assert proc.wait(DEADLINE) == 128 + signal.SIGTERM


@pytest.fixture
def patient_server(tmp_path: Path, prompter: FakePrompter) -> Iterator[ServerThread]:
    """A broker whose own countdown (an hour) is far longer than ollie-core's step."""
    tools = tmp_path / "tools"
    tools.mkdir()
    path = tmp_path / "run" / "elevate.sock"
    with live_server([tools], tmp_path, path, prompter, prompt_timeout=3600) as thread:
        yield thread


@pytest.mark.parametrize(
    ("setting", "limit"), [({}, 30.0), ({"OLLIE_ELEVATE_TIMEOUT": "20"}, 20.0)]
)
def test_the_countdown_never_outlasts_the_steps_deadline(
    patient_server: ServerThread,
    prompter: FakePrompter,
    tmp_path: Path,
    session: Path,
    setting: dict[str, str],
    limit: float,
) -> None:
    prompter.approvals.append(Approval(False))
    proc = start_plugin("true", session, plugin_env(patient_server, tmp_path, **setting))
    read_to_eof(proc)
    assert proc.wait(DEADLINE) == DENIED
    [asked] = prompter.of_type("approval")
    assert 0 < asked["timeout"] <= limit  # the broker's own countdown is an hour


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "nan", "86401"])
def test_a_bad_timeout_is_a_usage_error_and_asks_nobody(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path, bad: str
) -> None:
    proc = start_plugin(
        "touch ran", session, plugin_env(server, tmp_path, OLLIE_ELEVATE_TIMEOUT=bad)
    )
    _out, err = read_to_eof(proc)
    assert proc.wait(DEADLINE) == 2
    assert b"OLLIE_ELEVATE_TIMEOUT" in err
    assert prompter.of_type("approval") == []
    assert not (session / "ran").exists()


def test_no_decision_by_the_deadline_is_a_denial(tmp_path: Path, session: Path) -> None:
    # The broker itself would wait an hour; the step's 3 s deadline ends it.
    prompter = FakePrompter(hold_approvals=True, default=Approval(True))
    tools = tmp_path / "tools"
    tools.mkdir()
    path = tmp_path / "run" / "elevate.sock"
    with live_server([tools], tmp_path, path, prompter, prompt_timeout=3600) as server:
        env = plugin_env(server, tmp_path, OLLIE_ELEVATE_TIMEOUT="3")
        proc = start_plugin("touch ran", session, env)
        _out, err = read_to_eof(proc)  # within DEADLINE (20 s), not the broker's hour
        assert proc.wait(DEADLINE) == DENIED
        assert err.startswith(b"elevation denied: ")
        if prompter.of_type("approval"):  # asked (not denied before asking on a slow start)
            prompter.wait_for(lambda e: e["type"] in ("decided", "cancelled"))
        prompter.release()  # a late yes changes nothing
    assert not (session / "ran").exists()


def test_sigkill_while_the_person_decides_withdraws_the_question(
    tmp_path: Path, session: Path
) -> None:
    prompter = FakePrompter(hold_approvals=True, default=Approval(True))
    with server_without_tools(tmp_path, prompter) as server:
        proc = start_plugin("touch ran", session, plugin_env(server, tmp_path))
        asked = prompter.wait_for(lambda e: e["type"] == "approval")
        proc.kill()  # what ollie-core does at its deadline
        read_to_eof(proc)
        assert proc.wait(DEADLINE) == -signal.SIGKILL
        prompter.wait_for(lambda e: e["type"] == "cancelled" and e["id"] == asked["id"])
        prompter.release()  # the person says yes -- too late, nobody asked any more
    assert not (session / "ran").exists()


def test_sigkill_while_the_code_runs_kills_every_process_of_it(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path
) -> None:
    prompter.approvals.append(Approval(True))
    proc = start_plugin(SPAWNER, session, plugin_env(server, tmp_path))
    wait_for_file(session / "started")
    pids = code_pids(session)
    assert len(pids) == 4 and all(alive(pid) for pid in pids)
    proc.kill()  # the runtime's step timeout: SIGKILL to the plugin process only
    out, _err = read_to_eof(proc)  # EOF: no process holds the pipes any more
    assert out == b"running\n"
    assert proc.wait(DEADLINE) == -signal.SIGKILL
    wait_all_gone(pids)


def test_what_the_code_leaves_running_ends_with_it(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path
) -> None:
    prompter.approvals.append(Approval(True))
    code = "sleep 300 & echo $! > pids; setsid sleep 300 & echo $! >> pids; echo done"
    proc = start_plugin(code, session, plugin_env(server, tmp_path))
    out, _err = read_to_eof(proc)  # returns although the sleeps were meant to run on
    assert proc.wait(DEADLINE) == 0
    assert out == b"done\n"
    wait_all_gone(code_pids(session))


def test_a_killed_keeper_parent_is_noticed_even_when_the_code_ignores_signals(
    server: ServerThread, prompter: FakePrompter, tmp_path: Path, session: Path
) -> None:
    prompter.approvals.append(Approval(True))
    code = "trap '' TERM INT HUP; echo $$ > pids; echo ready > started; while :; do sleep 1; done"
    proc = start_plugin(code, session, plugin_env(server, tmp_path))
    wait_for_file(session / "started")
    pids = code_pids(session)
    proc.kill()
    read_to_eof(proc)
    wait_all_gone(pids)


def install(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ELEVATE), "--install"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def test_install_links_the_plugin_where_ollie_core_looks(tmp_path: Path, session: Path) -> None:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    env = {**base, "OLLIE_CFG_PATH": str(tmp_path / "cfg")}
    link = tmp_path / "cfg" / "scripts" / "x" / "elevate"
    first = install(env, session)
    assert first.returncode == 0, first.stderr
    assert link.is_symlink() and link.resolve() == ELEVATE.resolve()
    again = install(env, session)
    assert (again.returncode, again.stdout.startswith(f"{link} already")) == (0, True)
    plugins = {**env, "OLLIE_PLUGINS_PATH": f"{tmp_path / 'p1'}:{tmp_path / 'p2'}"}
    assert install(plugins, session).returncode == 0
    assert (tmp_path / "p1" / "elevate").resolve() == ELEVATE.resolve()


def test_install_never_replaces_someone_elses_plugin(tmp_path: Path, session: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OLLIE_PLUGINS_PATH": str(tmp_path)}
    (tmp_path / "elevate").write_text('#!/bin/sh\nexec other-backend "$@"\n')
    result = install(env, session)
    assert result.returncode == 1
    assert "not ours" in result.stderr
    assert (tmp_path / "elevate").read_text().startswith("#!/bin/sh\nexec other-backend")
