"""Harness for the ollie-remote tests: a real OpenSSH server on loopback and a "remote" user.

Needs root.  :func:`create_world` makes

* the user ``ollie-remote-test`` (``useradd -m``, a random password set through
  ``chpasswd``'s stdin, a sudoers drop-in ``/etc/sudoers.d/ollie-remote-test``
  validated with ``visudo``), with a key pair made here in its
  ``~/.ssh/authorized_keys``;
* a runtime that user can execute: the test venv's interpreter may live under
  ``/root`` (0700) and the repository may not be readable by the user, so a
  venv is made from an interpreter of the same version the user *can* run,
  with *copies* of ``registry_core``, its resources and the third-party
  packages it imports (nothing in the repository changes), plus the
  ``ollie-tools`` / ``ollie-askpass`` entry points; ``~/.local/bin/ollie-tools``
  links to it (where ``ollie-remote`` looks, like a pipx install);
* ``sshd -D -f <config> -p <free port> -h <host key>`` on 127.0.0.1 (public keys
  only, ``UsePAM no``, ``StrictModes yes``, the pid file in the temporary
  directory);
* the local side: a HOME / XDG tree for the test process (root, as in CI), an
  ssh config with the aliases ``remote-a`` and ``remote-b`` (both that user on
  that server) and ``remote-unknown`` (a known_hosts file without the key),
  given to ollie-remote through ``$OLLIE_REMOTE_SSH_OPTIONS="-F <config>"``.

:func:`remove_world` stops everything it started by pid and removes the user,
the drop-in and the files.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from harness_procs import stop_process
from local_users import free_uid, install_dropin, python_for

from registry_core.paths import resources_dir

USER = "ollie-remote-test"
DROPIN = Path("/etc/sudoers.d/ollie-remote-test")
SSHD = "/usr/sbin/sshd"
APT_HINT = "apt-get install -y openssh-server openssh-client rsync"
REPO = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
T = TypeVar("T")


def require_real_ssh() -> None:
    """Skip (locally) or fail (under CI=true) unless this run can set up sshd and a user."""
    needed = ("ssh", "ssh-keygen", "rsync", "sudo", "useradd", "userdel", "chpasswd", "visudo")
    missing = [tool for tool in needed if not shutil.which(tool)]
    if not os.access(SSHD, os.X_OK):
        missing.insert(0, SSHD)
    problem = ""
    if os.getuid() != 0:
        problem = "needs root to create a test user and run sshd"
    elif missing:
        problem = f"missing programs: {', '.join(missing)} (install: {APT_HINT})"
    elif not DROPIN.parent.is_dir():
        problem = f"{DROPIN.parent} does not exist"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"real OpenSSH tests cannot run: {problem}")
        pytest.skip(problem)


def run(argv: list[str], stdin: str | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, check=False, timeout=60, **kw
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")
    return result


def wait_until(check: Callable[[], T | None], what: str, timeout: float = DEADLINE) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)  # poll interval, bounded by the deadline


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{entry}/status").read_text()
            for line in status.splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == pid:
                    found.append(int(entry))
    return found


def pids_of_uid(uid: int) -> list[int]:
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid == uid:
                found.append(int(entry))
    return found


def with_parent(argv: list[str]) -> list[str]:
    """``argv`` under ``setpriv --pdeathsig TERM``: the child gets SIGTERM when the test
    process dies, so a crashed pytest leaves no sshd or supervisor behind."""
    if shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", "TERM", "--", *argv]
    return argv


@dataclass
class RemoteUser:
    name: str
    uid: int
    gid: int
    home: Path
    password: str = field(repr=False)

    @property
    def groups(self) -> list[int]:
        return os.getgrouplist(self.name, self.gid)

    def as_user(self) -> dict[str, Any]:
        return {"user": self.uid, "group": self.gid, "extra_groups": self.groups}


@dataclass
class World:
    base: Path  # root-owned 0755: the user's runtime, sshd's files
    user: RemoteUser
    port: int
    local: Path  # the local side's HOME / XDG tree (root only)
    sshd: subprocess.Popen[bytes] | None = None
    started: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def venv_bin(self) -> Path:
        return self.base / "venv" / "bin"

    @property
    def ssh_config(self) -> Path:
        return self.local / "ssh" / "config"

    @property
    def sshd_log(self) -> Path:
        return self.base / "sshd" / "sshd.log"

    def local_env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.local / "home"),
            "XDG_RUNTIME_DIR": str(self.local / "run"),
            "XDG_CONFIG_HOME": str(self.local / "config"),
            "XDG_STATE_HOME": str(self.local / "state"),
            "OLLIE_TOOLS_PATH": str(self.local / "tools"),
            "OLLIE_ELEVATE_SOCKET": str(self.local / "run" / "ollie" / "elevate.sock"),
            "OLLIE_REMOTE_SSH_OPTIONS": f"-F {self.ssh_config}",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra)
        return env

    def ollie_remote(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(Path(sys.executable).parent / "ollie-remote"), *args],
            env=self.local_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start_connect(self, host: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.local / f"connect-{host}-{len(self.started)}.log", "wb")  # noqa: SIM115
        with log:
            proc = subprocess.Popen(
                with_parent(
                    [str(Path(sys.executable).parent / "ollie-remote"), "connect", host, *args]
                ),
                env=self.local_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.started.append(proc)
        return proc

    def connect_log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.local.glob("connect-*.log"))

    def remote(
        self, script: str, host: str = "remote-a", timeout: float = 60.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` on the "remote host" (as the remote user, through real ssh)."""
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), "-T", host, script],
            env=self.local_env(),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def remote_python(self, code: str, env: str = "") -> subprocess.CompletedProcess[str]:
        """Run Python ``code`` (stdin) with the remote user's runtime."""
        return self.remote(f"{env} {self.venv_bin}/python3 -", input=code)


# --- building the world ---------------------------------------------------------------


_IMPORTS = (
    "import registry_core.cli.tools, registry_core.cli.askpass, registry_core.cli.remote,"
    " registry_core.sandbox.apply, registry_core.dispatch, yaml, jsonschema"
)


def _third_party(purelib: Path) -> list[Path]:
    """Files and directories of ``purelib`` that registry_core's CLIs import."""
    code = (
        f"{_IMPORTS}\nimport sys, json\n"
        "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    tops: set[Path] = set()
    for name in json.loads(out.stdout.splitlines()[-1]):
        if not name:
            continue
        path = Path(name)
        with contextlib.suppress(ValueError):
            relative = path.relative_to(purelib)
            tops.add(purelib / relative.parts[0])
    return sorted(tops)


def _build_runtime(world: World) -> None:
    user, base = world.user, world.base
    python = python_for(user)
    run([python, "-m", "venv", "--without-pip", str(base / "venv")])
    site = base / "site"
    site.mkdir()
    shutil.copytree(REPO / "registry_core", site / "registry_core")
    shutil.copytree(resources_dir() / "sandbox", base / "resources" / "sandbox")
    # registry_core.paths.resources_dir() looks beside the package: site/../resources.
    purelib = Path(sysconfig.get_paths()["purelib"])
    for path in _third_party(purelib):
        if path.is_dir():
            shutil.copytree(path, site / path.name)
        else:
            shutil.copy2(path, site / path.name)
    target = Path(
        run(
            [
                str(world.venv_bin / "python3"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ]
        ).stdout.strip()
    )
    (target / "ollie_test_site.pth").write_text(f"{site}\n")
    for name, module in (
        ("ollie-tools", "registry_core.cli.tools"),
        ("ollie-askpass", "registry_core.cli.askpass"),
    ):
        script = world.venv_bin / name
        script.write_text(
            f"#!{world.venv_bin / 'python3'}\nfrom {module} import main_entry\nmain_entry()\n"
        )
    for path in [base, *base.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    for name in ("ollie-tools", "ollie-askpass"):
        os.chmod(world.venv_bin / name, 0o755)
    probe = subprocess.run(
        [str(world.venv_bin / "python3"), "-c", _IMPORTS],
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
        **user.as_user(),
    )
    if probe.returncode != 0:
        raise RuntimeError(f"{user.name} cannot import registry_core: {probe.stderr}")


def _user_files(world: World, public_key: str) -> None:
    user = world.user
    ssh_dir = user.home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(public_key)
    local_bin = user.home / ".local" / "bin"
    local_bin.mkdir(parents=True, exist_ok=True)
    (local_bin / "ollie-tools").symlink_to(world.venv_bin / "ollie-tools")
    (user.home / ".ollie-remote-marker").write_text("only the remote user has this\n")
    for path in [user.home, *user.home.rglob("*")]:
        os.lchown(path, user.uid, user.gid)
    os.chmod(ssh_dir / "authorized_keys", 0o600)


def _sudoers(user: str) -> str:
    return (
        "# ollie-tray test suite (tests/integration/ssh_harness.py): removed after the run.\n"
        f"Defaults:{user} timestamp_timeout=0, passwd_tries=3, !lecture\n"
        f"{user} ALL=(ALL:ALL) ALL\n"
    )


_SSHD_CONFIG = """\
ListenAddress 127.0.0.1
PidFile {pidfile}
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes yes
PermitRootLogin no
AllowUsers {user}
AllowStreamLocalForwarding yes
AllowTcpForwarding remote
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 50:30:100
LogLevel VERBOSE
"""


def _start_sshd(world: World) -> None:
    sshd_dir = world.base / "sshd"
    sshd_dir.mkdir(mode=0o700)
    key = sshd_dir / "host_ed25519"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
    config = sshd_dir / "sshd_config"
    config.write_text(_SSHD_CONFIG.format(pidfile=sshd_dir / "sshd.pid", user=world.user.name))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    run([SSHD, "-t", "-f", str(config), "-h", str(key)])
    with open(world.sshd_log, "wb") as log:
        world.sshd = subprocess.Popen(
            with_parent(
                [SSHD, "-D", "-e", "-f", str(config), "-p", str(world.port), "-h", str(key)]
            ),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def banner() -> bool:
        assert world.sshd is not None
        if world.sshd.poll() is not None:
            raise AssertionError(f"sshd exited: {world.sshd_log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", world.port), timeout=2) as conn:
                return conn.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    wait_until(banner, "sshd to accept connections")
    host_key = (key.with_suffix(".pub")).read_text().split()
    known = world.local / "ssh" / "known_hosts"
    known.write_text(f"[127.0.0.1]:{world.port} {host_key[0]} {host_key[1]}\n")


def _local_side(world: World) -> str:
    """The local HOME/XDG tree, key pair and ssh config; returns the public key."""
    for sub in ("home", "run", "config", "state", "tools", "ssh"):
        (world.local / sub).mkdir(mode=0o700, parents=True)
    key = world.local / "ssh" / "id_ed25519"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key), "-C", "ollie-test"])
    (world.local / "ssh" / "empty_known_hosts").write_text("")
    common = (
        "  HostName 127.0.0.1\n"
        f"  Port {world.port}\n"
        f"  User {world.user.name}\n"
        f"  IdentityFile {key}\n"
        "  IdentitiesOnly yes\n"
        "  IdentityAgent none\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
    )
    world.ssh_config.write_text(
        f"Host remote-a remote-b\n{common}  UserKnownHostsFile {world.local / 'ssh/known_hosts'}\n"
        f"Host remote-unknown\n{common}"
        f"  UserKnownHostsFile {world.local / 'ssh/empty_known_hosts'}\n"
    )
    os.chmod(world.ssh_config, 0o600)
    return (key.with_suffix(".pub")).read_text()


def create_world(local: Path) -> World:
    """Everything the tests need (call :func:`remove_world` after, even on failure)."""
    with contextlib.suppress(KeyError):
        pwd.getpwnam(USER)
        run(["userdel", "-r", "-f", USER])  # left over from an interrupted run
    password = f"Ollie-Remote-{secrets.token_hex(12)}"
    run(["useradd", "-m", "-u", str(free_uid()), "-s", "/bin/sh", USER])
    run(["chpasswd"], stdin=f"{USER}:{password}\n")
    entry = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="ollie-remote-"))
    os.chmod(base, 0o755)
    world = World(
        base=base,
        user=RemoteUser(USER, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir), password),
        port=free_port(),
        local=local,
    )
    try:
        public_key = _local_side(world)
        _build_runtime(world)
        _user_files(world, public_key)
        install_dropin(DROPIN, _sudoers(USER))
        _start_sshd(world)
    except BaseException:
        remove_world(world)
        raise
    return world


def remove_world(world: World) -> None:
    for proc in world.started:
        stop_process(proc)
    if world.sshd is not None:
        stop_process(world.sshd)
    for pid in pids_of_uid(world.user.uid):  # the user's leftover sessions, by pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        DROPIN.unlink()
    with contextlib.suppress(KeyError):
        pwd.getpwnam(world.user.name)
        run(["userdel", "-r", "-f", world.user.name])
    with contextlib.suppress(KeyError):
        grp.getgrnam(world.user.name)
        run(["groupdel", world.user.name])
    shutil.rmtree(f"/tmp/ollie-runtime-{world.user.uid}", ignore_errors=True)
    shutil.rmtree(world.base, ignore_errors=True)


def state_of(world: World, host: str) -> dict[str, Any] | None:
    path = world.local / "run" / "ollie" / "remote" / f"{host}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def wait_connected(world: World, host: str, old_ssh_pid: int | None = None) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        state = state_of(world, host)
        if state and state.get("connected") and state.get("ssh_pid") != old_ssh_pid:
            return state
        return None

    try:
        return wait_until(check, f"the forward to {host}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nconnect log:\n{world.connect_log()}") from None


def env_words(mapping: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in mapping.items())
