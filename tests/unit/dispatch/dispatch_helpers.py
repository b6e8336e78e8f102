"""Shared pieces of the dispatcher's unit tests: sample tools, a fake gate, an isolated stack.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry_core.dispatch import (
    Authorization,
    CallOptions,
    CallResult,
    Dispatcher,
    ElevationRequest,
)
from registry_core.errors import ElevationDeniedError
from registry_core.paths import resources_dir
from registry_core.pinned import pinned_argv
from registry_core.registry import Registry, RegistryLoader
from registry_core.sandbox import abi_version
from registry_core.trusted import find_trusted

SHIPPED_PROFILE = resources_dir() / "sandbox" / "default.yaml"
HAS_LANDLOCK = abi_version() >= 1

ECHO = "#!/usr/bin/python3\nimport sys\nsys.stdout.write(sys.stdin.read())\n"
MARKER = "#!/bin/sh\ncat >/dev/null\ntouch ran\necho ran\n"
ENV_DUMP = """#!/usr/bin/python3
import json, os, sys
sys.stdin.read()
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
"""


class FakeGate:
    """Records every elevation request; approves or denies all of them."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[ElevationRequest] = []
        self.reports: list[tuple[str, int, bool]] = []

    def authorize(self, request: ElevationRequest) -> Authorization:
        self.requests.append(request)
        if not self.approve:
            raise ElevationDeniedError("fake gate says no")
        return Authorization(reason="fake gate says yes")

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> None:
        self.reports.append((grant, exit_code, auth_failed))


@dataclass
class Stack:
    """An isolated home, config, runtime dir, tools dir and working directory."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sub in ("home", "config", "runtime", "tmp", "tools", "work", "bin"):
            (self.root / sub).mkdir()
        self.env = {
            "PATH": f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmp"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_RUNTIME_DIR": str(self.root / "runtime"),
            "DISPLAY": ":42",
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={self.root / 'runtime' / 'bus'}",
            "SSH_AUTH_SOCK": str(self.root / "runtime" / "ssh-agent.sock"),
            "SECRET_TOKEN": "do-not-leak",
        }
        if not HAS_LANDLOCK:
            # No Landlock here: keep the contract testable (CI has Landlock and
            # exercises the real default profile).
            self.profile_path("default").parent.mkdir(parents=True)
            text = SHIPPED_PROFILE.read_text().replace("best_effort: false", "best_effort: true")
            self.profile_path("default").write_text(text)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tools(self) -> Path:
        return self.root / "tools"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    def profile_path(self, name: str) -> Path:
        return self.root / "config" / "ollie" / "sandbox" / f"{name}.yaml"

    def write_profile(self, name: str, data: dict[str, Any] | str) -> Path:
        path = self.profile_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return path

    def default_profile_with(self, **changes: Any) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(SHIPPED_PROFILE.read_text())
        data.update(changes)
        if not HAS_LANDLOCK:
            data["general"]["best_effort"] = True
        return data

    def tool(
        self, name: str, script: str | None = None, directory: Path | None = None, **meta: Any
    ) -> Path:
        where = directory or self.tools
        where.mkdir(exist_ok=True)
        (where / f"{name}.meta").write_text(json.dumps({"description": f"{name}.", **meta}))
        exe = where / name
        if script is not None:
            exe.write_text(script)
            exe.chmod(0o755)
        return exe

    def registry(self, *dirs: Path) -> Registry:
        return RegistryLoader(list(dirs) or [self.tools], self.env).load()

    def dispatcher(self, *dirs: Path, gate: Any = None) -> Dispatcher:
        registry = self.registry(*dirs)
        # Ollie's own askpass (a sudo call is refused without one); never run here.
        askpass = str(Path(sys.executable).parent / "ollie-askpass")
        if gate is None:
            return Dispatcher(registry=lambda: registry, env=self.env, askpass=askpass)
        return Dispatcher(registry=lambda: registry, env=self.env, gate=gate, askpass=askpass)

    def call(self, name: str, args: Any = None, **options: Any) -> CallResult:
        dispatcher = self.dispatcher()
        return dispatcher.call(name, {} if args is None else args, self.options(**options))

    def options(self, **options: Any) -> CallOptions:
        return CallOptions(cwd=str(self.cwd), **options)


def pid_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (zombie or reaped); waits on a pidfd, no polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def processes_running(token: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line contains ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def assert_no_process(token: str, what: str, timeout: float = 10.0) -> None:
    """Fail unless every process whose command line holds ``token`` is gone within ``timeout``.

    Tools run in their own PID namespace, so the pids they see are not the
    host's: a unique argument (``sleep 60.<nonce>``) finds them instead.
    Survivors are killed so a failing run leaves nothing behind.
    """
    for pid in processes_running(token):
        if not pid_gone(pid, timeout):
            survivors = processes_running(token)
            for survivor in survivors:
                os.kill(survivor, signal.SIGKILL)
            pytest.fail(f"{what} survived: pids {survivors}")


def assert_gone(pid: int, what: str) -> None:
    """Fail when ``pid`` survived; a survivor is killed so a failing run leaves nothing behind."""
    if not pid_gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"{what} (pid {pid}) survived the timeout")


def pinned(exe: Path | str) -> tuple[str, ...]:
    """The pinned exec argv (registry_core.pinned) the dispatcher sends for the file ``exe``."""
    sha = hashlib.sha256(Path(exe).read_bytes()).hexdigest()
    return tuple(pinned_argv(find_trusted("python3") or "/usr/bin/python3", sha, str(exe)))
