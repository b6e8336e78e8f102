"""Harness for the real-sudo tests: a throw-away user, a sudoers drop-in, a runtime it can use.

Needs root.  :func:`create` makes the user ``ollie-sudo-test-<hex>`` with a
random marker password (``Ollie-Marker-<hex>``, set through ``chpasswd``'s
stdin), installs ``/etc/sudoers.d/ollie-test-<hex>`` (validated with ``visudo
-cf``, mode 0440: the user may run anything with its password, and one tool
without; a fresh name per run, so parallel runs do not collide),
and builds a runtime the user can execute: the test venv's interpreter may
live under ``/root`` (0700), so a venv is made from an interpreter of the same
version the user *can* run, with the project and this venv's site-packages
on its path, plus copies of the ``ollie-*`` entry points and of the tools.
Nothing in the repository changes.  :func:`remove` undoes all of it.
The account and drop-in steps themselves are ``local_users.py``'s.

:class:`UserDirs` is one test's HOME / XDG directories (owned by the user)
and :class:`BrokerProcess` is the scripted broker (``scripted_broker.py``)
running as the user, its events read from a pipe with deadlines.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from local_users import (
    add_account,
    install_dropin,
    python_for,
    remove_account,
    run,
    shared_dir,
)

from registry_core.paths import resources_dir

# One user and drop-in per test run (``-<hex>``), so runs on one machine cannot
# delete each other's; leftovers of runs whose process is gone are removed.
USER_PREFIX = "ollie-sudo-test"
SUDOERS_DIR = Path("/etc/sudoers.d")
DROPIN_PREFIX = "ollie-test"
EXAMPLES = resources_dir() / "examples" / "tools"
HERE = Path(__file__).resolve().parent
ENTRY_POINTS = ("ollie-tools", "ollie-askpass", "ollie-elevate", "ollie-broker")
NOPASSWD_TOOL = "whoami_nopasswd"
# Test the copying fallback of the runtime even where the repository is readable.
FORCE_COPY = os.environ.get("OLLIE_TEST_SUDO_COPY") == "1"
DEADLINE = 60.0


def require_real_sudo() -> None:
    """Skip (locally) or fail (under CI=true) unless this run can set up real sudo."""
    missing = [
        tool
        for tool in ("sudo", "useradd", "userdel", "chpasswd", "visudo")
        if not shutil.which(tool)
    ]
    problem = ""
    if os.getuid() != 0:
        problem = "needs root to create a test user and a sudoers drop-in"
    elif missing:
        problem = f"missing programs: {', '.join(missing)}"
    elif not SUDOERS_DIR.is_dir():
        problem = f"{SUDOERS_DIR} does not exist"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"real sudo tests cannot run: {problem}")
        pytest.skip(problem)


@dataclass
class SudoUser:
    name: str
    uid: int
    gid: int
    groups: list[int]
    home: Path  # the account's own home (useradd -m)
    password: str = field(repr=False)
    base: Path  # root-owned 0755: runtime, tools, per-test directories
    started: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def dropin(self) -> Path:
        return SUDOERS_DIR / f"{DROPIN_PREFIX}-{self.name.removeprefix(USER_PREFIX + '-')}"

    @property
    def tools(self) -> Path:
        return self.base / "tools"

    @property
    def bin(self) -> Path:
        return self.base / "venv" / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python3"

    @property
    def launcher(self) -> Path:
        return self.base / "scripted_broker.py"

    def popen(
        self, argv: list[str], env: Mapping[str, str], cwd: Path, **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` as this user (uid, gid and supplementary groups)."""
        proc = subprocess.Popen(
            argv,
            user=self.uid,
            group=self.gid,
            extra_groups=self.groups,
            env=dict(env),
            cwd=cwd,
            **kw,
        )
        self.started.append(proc)
        return proc

    def run(
        self,
        argv: list[str],
        env: Mapping[str, str],
        cwd: Path,
        timeout: float = DEADLINE,
        **kw: Any,
    ) -> subprocess.CompletedProcess[str]:
        proc = self.popen(
            argv, env, cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
        )
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _sudoers(user: str, nopasswd: Path) -> str:
    return (
        "# ollie-tray test suite (tests/integration/sudo_user.py): removed after the run.\n"
        f"# user {user} pid {os.getpid()}\n"
        f"Defaults:{user} timestamp_timeout=0, passwd_tries=3, !lecture\n"
        f"{user} ALL=(ALL:ALL) ALL\n"
        f"{user} ALL=(root) NOPASSWD: {nopasswd}\n"
    )


def _remove_leftovers() -> None:
    """Drop-ins (and their users) of earlier runs whose test process no longer exists."""
    for path in SUDOERS_DIR.glob(f"{DROPIN_PREFIX}-*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            words = path.read_text().splitlines()[1].split()  # "# user NAME pid PID"
            name, pid = words[2], int(words[4])
            if name.startswith(USER_PREFIX) and not os.path.exists(f"/proc/{pid}"):
                path.unlink()
                remove_account(name)


def _build_runtime(user: SudoUser) -> None:
    base = user.base
    # Tools: copies, root-owned and not writable by the user (one runs without a password).
    user.tools.mkdir(mode=0o755)
    for name in ("whoami_root", NOPASSWD_TOOL):
        shutil.copyfile(EXAMPLES / "whoami_root", user.tools / name)
        os.chmod(user.tools / name, 0o755)
        shutil.copyfile(EXAMPLES / "whoami_root.meta", user.tools / f"{name}.meta")
        os.chmod(user.tools / f"{name}.meta", 0o644)
    # A venv on an interpreter the user can run, seeing this venv's packages.
    run([python_for(user), "-m", "venv", "--without-pip", str(base / "venv")])
    purelib = Path(sysconfig.get_paths()["purelib"])
    target = Path(
        subprocess.run(
            [str(user.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    lines = [f"import site; site.addsitedir({str(purelib)!r})"]
    if FORCE_COPY or not _user_can_import(user, target, lines):
        # The repository or the venv is not readable by the user (a checkout
        # under /root, say): run copies of the package and what it imports.
        _copy_import_closure(purelib, base)
        lines = [str(base / "src"), str(base / "site")]
        if not _user_can_import(user, target, lines):
            raise RuntimeError(f"{user.name} cannot import registry_core and its dependencies")
    for name in ENTRY_POINTS:
        original = (Path(sys.executable).parent / name).read_text().splitlines(keepends=True)
        (user.bin / name).write_text(f"#!{user.python}\n" + "".join(original[1:]))
        os.chmod(user.bin / name, 0o755)
    shutil.copyfile(HERE / "scripted_broker.py", user.launcher)
    os.chmod(user.launcher, 0o644)
    for path in [base, *base.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o755)


_CLOSURE_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import registry_core.cli.askpass, registry_core.cli.broker, registry_core.cli.elevate
import registry_core.cli.tools, scripted_broker, yaml
for module in list(sys.modules.values()):
    print(getattr(module, "__file__", None) or "")
"""


def _copy_import_closure(purelib: Path, base: Path) -> None:
    """Copy ``registry_core`` and the site-packages it (and the launcher) imports."""
    source = Path(__file__).resolve().parents[2]
    shutil.copytree(source / "registry_core", base / "src" / "registry_core")
    # paths.resources_dir() looks beside the package: the shipped sandbox profile.
    shutil.copytree(source / "resources", base / "src" / "resources")
    listing = subprocess.run(
        [sys.executable, "-c", _CLOSURE_PROBE, str(HERE)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout.splitlines()
    tops = {
        Path(f).relative_to(purelib).parts[0]
        for f in listing
        if f and Path(f).is_relative_to(purelib)
    }
    (base / "site").mkdir()
    for top in sorted(tops):
        if (purelib / top).is_dir():
            shutil.copytree(purelib / top, base / "site" / top)
        else:
            shutil.copyfile(purelib / top, base / "site" / top)


def _user_can_import(user: SudoUser, site_packages: Path, pth_lines: list[str]) -> bool:
    (site_packages / "ollie_test_paths.pth").write_text("\n".join(pth_lines) + "\n")
    os.chmod(site_packages / "ollie_test_paths.pth", 0o644)
    for path in [user.base, *user.base.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o755)
    probe = subprocess.run(
        [str(user.python), "-c", "import registry_core.cli.tools, registry_core.cli.askpass, yaml"],
        user=user.uid,
        group=user.gid,
        extra_groups=user.groups,
        cwd="/",
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def create() -> SudoUser:
    """The test user, its sudoers drop-in and its runtime (call :func:`remove` after)."""
    _remove_leftovers()
    suffix = secrets.token_hex(4)
    name = f"{USER_PREFIX}-{suffix}"
    account = add_account(name, f"Ollie-Marker-{secrets.token_hex(12)}")
    user = SudoUser(
        name=name,
        uid=account.uid,
        gid=account.gid,
        groups=account.groups,
        home=account.home,
        password=account.password,
        base=shared_dir("ollie-sudo-"),
    )
    try:
        _build_runtime(user)
        install_dropin(user.dropin, _sudoers(name, user.tools / NOPASSWD_TOOL))
    except BaseException:
        remove(user)
        raise
    return user


def remove(user: SudoUser) -> None:
    """Kill what the tests started as the user, then remove drop-in, user and files."""
    for proc in user.started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    with contextlib.suppress(FileNotFoundError):
        user.dropin.unlink()
    remove_account(user.name)
    shutil.rmtree(user.base, ignore_errors=True)


@contextlib.contextmanager
def throwaway() -> Iterator[SudoUser]:
    """:func:`create` once real sudo is known to work; :func:`remove` on the way out."""
    require_real_sudo()
    user = create()
    try:
        yield user
    finally:
        remove(user)  # kills what was started as the user, removes the account


class UserDirs:
    """One test's HOME, XDG and temporary directories, owned by the user."""

    def __init__(self, user: SudoUser, name: str) -> None:
        self.user = user
        self.root = user.base / name
        self.root.mkdir(mode=0o755)
        for sub in ("home", "run", "config", "state", "tmp"):
            (self.root / sub).mkdir(mode=0o700)
        for path in [self.root, *self.root.iterdir()]:
            os.chown(path, user.uid, user.gid)
        self.home = self.root / "home"
        self.socket = self.root / "run" / "ollie" / "elevate.sock"
        self.audit = self.root / "state" / "ollie" / "audit.jsonl"
        self.policies = self.root / "config" / "ollie" / "policies.yaml"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{self.user.bin}:/usr/bin:/bin",
            "HOME": str(self.home),
            "USER": self.user.name,
            "LOGNAME": self.user.name,
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_STATE_HOME": str(self.root / "state"),
            "TMPDIR": str(self.root / "tmp"),
            "OLLIE_ELEVATE_SOCKET": str(self.socket),
            "OLLIE_TOOLS_PATH": str(self.user.tools),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra)
        return env

    def call(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.user.run(
            [str(self.user.bin / "ollie-tools"), "call", tool, *args],
            self.env(),
            self.home,
            stdin=subprocess.DEVNULL,
        )


class BrokerProcess:
    """``scripted_broker.py`` as the user; its script goes in on stdin, events come out a pipe."""

    def __init__(
        self, dirs: UserDirs, script: Mapping[str, Any], logs: Path, timeout: float = 30.0
    ) -> None:
        self.dirs = dirs
        self.events: list[dict[str, Any]] = []
        self.stdout_path = logs / "broker.stdout"
        self.stderr_path = logs / "broker.stderr"
        read_fd, write_fd = os.pipe()
        self._events_fd = read_fd
        self._pending = b""
        argv = [
            str(dirs.user.python),
            str(dirs.user.launcher),
            "--socket",
            str(dirs.socket),
            "--tools",
            str(dirs.user.tools),
            "--state",
            str(dirs.root),
            "--events-fd",
            str(write_fd),
            "--timeout",
            str(timeout),
        ]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = dirs.user.popen(
                argv,
                dirs.env(),
                dirs.home,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                pass_fds=(write_fd,),
            )
        os.close(write_fd)
        self.command(script)
        self.wait_for(lambda e: e["type"] == "ready")

    @property
    def stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def command(self, message: Mapping[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def release(self) -> None:
        self.command({"cmd": "release"})

    def advance(self, seconds: float) -> None:
        done = len(self.of_type("command_done"))
        self.command({"cmd": "advance", "seconds": seconds})
        self.wait_for(lambda e: e["type"] == "command_done", skip=done)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        self._read(0)
        return [e for e in self.events if e["type"] == kind]

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = DEADLINE, skip: int = 0
    ) -> dict[str, Any]:
        """The first (after ``skip`` earlier ones) event matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events if predicate(e)]
            if len(found) > skip:
                return found[skip]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(remaining):
                raise AssertionError(f"no matching broker event within {timeout} s: {self.events}")

    def _read(self, timeout: float) -> bool:
        """Read what the pipe holds (waiting up to ``timeout``); False at end of stream."""
        ready, _, _ = select.select([self._events_fd], [], [], timeout)
        if not ready:
            return timeout == 0
        chunk = os.read(self._events_fd, 65536)
        if not chunk:
            return False
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        self.events.extend(json.loads(line) for line in lines if line.strip())
        return True

    def stop(self) -> tuple[bytes, bytes]:
        """Close stdin (the broker shuts down), wait, and return its stdout and stderr."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(DEADLINE)
        while self._read(1):
            pass
        os.close(self._events_fd)
        return self.stdout_path.read_bytes(), self.stderr_path.read_bytes()


@contextlib.contextmanager
def broker_starter(
    dirs: UserDirs, logs: Path
) -> Iterator[Callable[[dict[str, Any]], BrokerProcess]]:
    """A function starting scripted brokers for ``dirs``; those still running stop on exit."""
    brokers: list[BrokerProcess] = []

    def start(script: dict[str, Any]) -> BrokerProcess:
        broker = BrokerProcess(dirs, script, logs)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        if broker.proc.returncode is None:
            broker.stop()


def files_containing(needle: bytes, roots: Iterable[Path]) -> list[Path]:
    """Every regular file under ``roots`` whose bytes contain ``needle``."""
    hits: list[Path] = []
    for root in roots:
        if not root.exists():
            continue
        paths = (
            [root]
            if root.is_file()
            else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        )
        for path in paths:
            with contextlib.suppress(OSError):
                if needle in path.read_bytes():
                    hits.append(path)
    return hits


def processes_exposing(needle: bytes) -> list[str]:
    """``/proc/<pid>/{cmdline,environ}`` files that contain ``needle`` right now."""
    hits: list[str] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        for name in ("cmdline", "environ"):
            with contextlib.suppress(OSError), open(f"/proc/{entry}/{name}", "rb") as fh:
                if needle in fh.read():
                    hits.append(f"/proc/{entry}/{name}")
    return hits
