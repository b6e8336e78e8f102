"""Throw-away local accounts for the real-stack tests: create, run as, remove (needs root).

Shared by the harnesses that need a second user (``sudo_user.py``): an
account made with ``useradd -m`` and a password set through ``chpasswd``'s
stdin (never on a command line), a sudoers drop-in validated with ``visudo``
before it is installed, an interpreter of this Python's version that the
account can execute, and the removal of all of it.  Imported as a plain
module (the test directories are on ``sys.path``); the name must not start
with ``test_``.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


def run(
    argv: list[str], stdin: str | None = None, timeout: float | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """Run an administration command; raises ``RuntimeError`` with its stderr if it fails."""
    result = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, check=False, timeout=timeout, **kw
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")
    return result


@dataclass(frozen=True)
class Account:
    """A local account as ``useradd`` made it."""

    name: str
    uid: int
    gid: int
    groups: list[int]
    home: Path
    password: str = field(repr=False)


def free_uid() -> int:
    """A uid for a new account: none has it, and it owns none of ``/``'s top entries
    (an account owning one of them could swap what lies below, and Ollie would
    rightly refuse every system program)."""
    owners = {os.stat("/").st_uid}
    for entry in os.scandir("/"):
        with contextlib.suppress(OSError):
            owners.add(entry.stat(follow_symlinks=False).st_uid)
    uid = 20000
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in owners:
                return uid
        uid += 1


def add_account(name: str, password: str, *, shell: str = "/bin/bash") -> Account:
    """``useradd -m`` the account ``name`` (with a :func:`free_uid`) and set its
    ``password`` (through stdin)."""
    run(["useradd", "-m", "-u", str(free_uid()), "-s", shell, name])
    run(["chpasswd"], stdin=f"{name}:{password}\n")
    entry = pwd.getpwnam(name)
    return Account(
        name=name,
        uid=entry.pw_uid,
        gid=entry.pw_gid,
        groups=os.getgrouplist(name, entry.pw_gid),
        home=Path(entry.pw_dir),
        password=password,
    )


def remove_account(name: str) -> None:
    """Remove the account ``name`` with its home and its group, whichever of them exist."""
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        run(["userdel", "-r", "-f", name])
    with contextlib.suppress(KeyError):
        grp.getgrnam(name)
        run(["groupdel", name])


def shared_dir(prefix: str) -> Path:
    """A fresh root-owned directory (mode 0755) other users can enter."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(base, 0o755)
    return base


def install_dropin(path: Path, text: str) -> None:
    """Install ``text`` as the sudoers drop-in ``path`` (0440), checked by ``visudo`` first."""
    fd, tmp = tempfile.mkstemp(prefix="ollie-sudoers-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o440)
        run(["visudo", "-cf", tmp])
        shutil.copyfile(tmp, path)
        os.chmod(path, 0o440)
        run(["visudo", "-c"])  # the whole configuration still parses
    finally:
        os.unlink(tmp)


class RunsAs(Protocol):
    """Who a process can be started as (an :class:`Account` or a harness's own user)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> int: ...
    @property
    def gid(self) -> int: ...
    @property
    def groups(self) -> list[int]: ...


def python_for(user: RunsAs) -> str:
    """An interpreter of this Python's version that ``user`` can execute."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        os.path.realpath(sys.executable),
        getattr(sys, "_base_executable", sys.executable),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
    ]
    for candidate in dict.fromkeys(candidates):
        if not os.path.isfile(candidate):
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                user=user.uid,
                group=user.gid,
                extra_groups=user.groups,
                cwd="/",
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            continue
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    raise RuntimeError(f"no Python {version} that {user.name} can run among {candidates}")
