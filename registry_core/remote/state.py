"""Local records of remote hosts: live connections and deployed hosts.

* ``$XDG_RUNTIME_DIR/ollie/remote/<host>.json`` (0600, in a 0700 directory):
  one per running ``ollie-remote connect`` supervisor, written by it and
  removed when it stops.  ``{host, pid, ssh_pid, remote_socket,
  local_socket, since, connected, remote_user}``; ``ssh_pid`` is ``null``
  while the supervisor waits to reconnect.  The broker trusts these files
  (they are ours, in our private runtime directory) to tell which local ssh
  process carries which host's forwarded connections.
* ``$XDG_STATE_HOME/ollie/remote-hosts.json``: every host ``deploy`` reached,
  with its remote tools directory and where ``ollie-tools`` lives there (the
  Tool Browser lists these hosts).

Files are written atomically (temporary file + rename).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from registry_core import paths
from registry_core.errors import RemoteError
from registry_core.remote.ssh import check_host
from registry_core.safe_open import open_regular, read_regular

STATE_SUFFIX = ".json"


@dataclass(frozen=True)
class Connection:
    """One ``ollie-remote connect`` supervisor, as its state file says."""

    host: str
    pid: int
    remote_socket: str
    local_socket: str
    since: float
    ssh_pid: int | None = None
    connected: bool = False
    remote_user: str = ""
    tools_dir: str = ""  # the remote tools directory (absolute), where deployed files live

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Connection:
        """Raises ``ValueError`` for anything that is not a well-formed record."""
        try:
            host = check_host(str(obj["host"]))
            pid = obj["pid"]
            ssh_pid = obj.get("ssh_pid")
            since = obj["since"]
        except (KeyError, RemoteError) as exc:
            raise ValueError(f"bad connection record: {exc}") from exc
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
            raise ValueError("pid must be an integer > 1")
        if ssh_pid is not None and (
            not isinstance(ssh_pid, int) or isinstance(ssh_pid, bool) or ssh_pid <= 1
        ):
            raise ValueError("ssh_pid must be null or an integer > 1")
        if not isinstance(since, int | float):
            raise ValueError("since must be a number")
        return cls(
            host=host,
            pid=pid,
            ssh_pid=ssh_pid,
            remote_socket=str(obj.get("remote_socket", "")),
            local_socket=str(obj.get("local_socket", "")),
            since=float(since),
            connected=bool(obj.get("connected", False)),
            remote_user=str(obj.get("remote_user", "")),
            tools_dir=str(obj.get("tools_dir", "")),
        )


def state_dir(env: Mapping[str, str]) -> Path:
    return paths.runtime_dir(env) / "ollie" / "remote"


def state_file(directory: Path, host: str) -> Path:
    return directory / f"{check_host(host)}{STATE_SUFFIX}"


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` (and missing parents) 0700; refuse one that is not ours."""
    for path in reversed([directory, *directory.parents]):
        if path.exists():
            continue
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    st = directory.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"{directory} belongs to uid {st.st_uid}, not to you")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)


def write_json_atomic(path: Path, obj: Any, mode: int = 0o600) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode)
            json.dump(obj, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_connection(directory: Path, conn: Connection) -> Path:
    ensure_private_dir(directory)
    path = state_file(directory, conn.host)
    write_json_atomic(path, conn.to_json())
    return path


def read_connection(path: Path) -> Connection | None:
    """The record in ``path``, or ``None`` when it is missing, malformed or not trustworthy
    (another owner, or writable by group/others)."""
    try:
        fd = open_regular(path)  # no link followed, no FIFO blocking
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
            return None
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(65536)
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        obj = json.loads(data)
        if not isinstance(obj, dict):
            return None
        return Connection.from_json(obj)
    except ValueError:
        return None


def remove_connection(directory: Path, host: str, pid: int) -> None:
    """Remove ``host``'s record if it still belongs to supervisor ``pid``."""
    path = state_file(directory, host)
    current = read_connection(path)
    if current is not None and current.pid != pid:
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def process_alive(pid: int) -> bool:
    """A running (not zombie) process of ours."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith(("Z", "X")):
        return False
    uids = fields.get("Uid", "").split()
    return bool(uids) and uids[0] == str(os.getuid())


def all_connections(directory: Path) -> list[Connection]:
    """Every readable record (live or stale), sorted by host."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found: list[Connection] = []
    for name in names:
        if not name.endswith(STATE_SUFFIX) or name.startswith("."):
            continue
        conn = read_connection(directory / name)
        if conn is not None and name == f"{conn.host}{STATE_SUFFIX}":
            found.append(conn)
    return found


def live_connections(directory: Path, *, clean: bool = True) -> list[Connection]:
    """Records whose supervisor still runs; with ``clean``, stale files are removed."""
    live: list[Connection] = []
    for conn in all_connections(directory):
        if process_alive(conn.pid):
            live.append(conn)
        elif clean:
            remove_connection(directory, conn.host, conn.pid)
    return live


# --- deployed hosts ------------------------------------------------------------


@dataclass(frozen=True)
class DeployedHost:
    host: str
    remote_path: str
    ollie_tools: str = ""
    deployed_at: float = 0.0


def hosts_file(env: Mapping[str, str]) -> Path:
    return paths.state_home(env) / "ollie" / "remote-hosts.json"


def deployed_hosts(env: Mapping[str, str]) -> list[DeployedHost]:
    try:
        obj = json.loads(read_regular(hosts_file(env), limit=1 << 20).decode("utf-8"))
    except (OSError, ValueError):
        return []
    hosts = obj.get("hosts") if isinstance(obj, dict) else None
    if not isinstance(hosts, dict):
        return []
    out: list[DeployedHost] = []
    for host, entry in sorted(hosts.items()):
        if not isinstance(entry, dict):
            continue
        try:
            check_host(host)
        except RemoteError:
            continue  # a bad entry is skipped, the others still count
        when = entry.get("deployed_at", 0.0)
        out.append(
            DeployedHost(
                host=host,
                remote_path=str(entry.get("remote_path", "")),
                ollie_tools=str(entry.get("ollie_tools", "") or ""),
                deployed_at=float(when) if isinstance(when, int | float) else 0.0,
            )
        )
    return out


def record_deployed(env: Mapping[str, str], deployed: DeployedHost) -> None:
    path = hosts_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    hosts = {h.host: h for h in deployed_hosts(env)}
    hosts[deployed.host] = deployed
    obj = {
        "hosts": {
            h.host: {
                "remote_path": h.remote_path,
                "ollie_tools": h.ollie_tools,
                "deployed_at": h.deployed_at,
            }
            for h in hosts.values()
        }
    }
    write_json_atomic(path, obj, 0o600)


def browsable_hosts(env: Mapping[str, str]) -> list[str]:
    """Every connected or deployed host, sorted (the Tool Browser's host list)."""
    names = {c.host for c in live_connections(state_dir(env), clean=False)}
    names.update(h.host for h in deployed_hosts(env))
    return sorted(names)


def now() -> float:
    return time.time()
