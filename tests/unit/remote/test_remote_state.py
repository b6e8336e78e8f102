"""ollie-remote's local records: connection state files and the deployed-hosts list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from registry_core.remote.state import (
    Connection,
    DeployedHost,
    all_connections,
    browsable_hosts,
    deployed_hosts,
    live_connections,
    read_connection,
    record_deployed,
    remove_connection,
    state_dir,
    state_file,
    write_connection,
)


def conn(host: str = "laptop", pid: int | None = None, **kw: object) -> Connection:
    fields: dict[str, object] = {
        "host": host,
        "pid": pid or os.getpid(),
        "remote_socket": "/run/user/1000/ollie/elevate.sock",
        "local_socket": "/run/user/0/ollie/elevate.sock",
        "since": 1700000000.0,
    }
    fields.update(kw)
    return Connection(**fields)  # type: ignore[arg-type]


def test_state_dir_follows_the_runtime_dir(tmp_path: Path) -> None:
    assert state_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == tmp_path / "ollie" / "remote"


def test_write_and_read_back_private(tmp_path: Path) -> None:
    directory = tmp_path / "run" / "ollie" / "remote"
    record = conn(ssh_pid=1234, connected=True, remote_user="bob", tools_dir="/home/bob/t")
    path = write_connection(directory, record)
    assert path == state_file(directory, "laptop")
    assert read_connection(path) == record
    assert (path.stat().st_mode & 0o777) == 0o600
    assert (directory.stat().st_mode & 0o777) == 0o700
    assert ((tmp_path / "run" / "ollie").stat().st_mode & 0o777) == 0o700


def test_untrustworthy_or_malformed_records_are_ignored(tmp_path: Path) -> None:
    directory = tmp_path / "remote"
    path = write_connection(directory, conn())
    os.chmod(path, 0o666)  # others could have written it
    assert read_connection(path) is None
    path.write_text("{not json")
    os.chmod(path, 0o600)
    assert read_connection(path) is None
    for bad in ({"host": "a b", "pid": 5, "since": 1}, {"host": "x", "pid": True, "since": 1}):
        path.write_text(json.dumps(bad))
        assert read_connection(path) is None
    link = directory / "other.json"
    link.symlink_to(path)
    assert read_connection(link) is None  # never followed
    # A file whose name does not match its host is not listed.
    (directory / "impostor.json").write_text(json.dumps(conn("laptop").to_json()))
    os.chmod(directory / "impostor.json", 0o600)
    assert all_connections(directory) == []


def test_stale_records_are_removed_live_ones_kept(tmp_path: Path) -> None:
    directory = tmp_path / "remote"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    write_connection(directory, conn("stale-host", pid=gone.pid))
    write_connection(directory, conn("live-host"))
    assert [c.host for c in live_connections(directory, clean=False)] == ["live-host"]
    assert state_file(directory, "stale-host").exists()
    assert [c.host for c in live_connections(directory)] == ["live-host"]
    assert not state_file(directory, "stale-host").exists()


def test_remove_only_our_own_record(tmp_path: Path) -> None:
    directory = tmp_path / "remote"
    write_connection(directory, conn(pid=os.getpid()))
    remove_connection(directory, "laptop", pid=os.getpid() + 1)  # someone else's
    assert state_file(directory, "laptop").exists()
    remove_connection(directory, "laptop", pid=os.getpid())
    assert not state_file(directory, "laptop").exists()


def test_deployed_hosts_are_recorded_and_listed(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    assert deployed_hosts(env) == []
    record_deployed(env, DeployedHost("box", "~/.config/ollie/tools", "/usr/bin/ollie-tools", 1.0))
    record_deployed(env, DeployedHost("alpha", "tools", "", 2.0))
    record_deployed(env, DeployedHost("box", "/srv/tools", "", 3.0))  # replaces
    assert deployed_hosts(env) == [
        DeployedHost("alpha", "tools", "", 2.0),
        DeployedHost("box", "/srv/tools", "", 3.0),
    ]
    write_connection(state_dir(env), conn("connected-only"))
    assert browsable_hosts(env) == ["alpha", "box", "connected-only"]
    (tmp_path / "state" / "ollie" / "remote-hosts.json").write_text("[broken")
    assert deployed_hosts(env) == []
