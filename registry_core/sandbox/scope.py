"""The call's transient cgroup: a systemd user scope around bwrap.

When the session has a systemd user manager, a sandboxed call's bwrap is
started as::

    systemd-run --user --scope --quiet --collect --unit=ollie-call-<random> \\
        --description="ollie-tools sandboxed call" \\
        -p TasksMax=<tasks> -p MemoryMax=<memory> -p MemorySwapMax=0 -- bwrap ...

``--scope`` makes systemd-run ask the manager for a transient scope holding
its own process, then exec bwrap in place: the process stays the dispatcher's
child, with the same pid, process group, pipes and timeout kill.  Every
process of the call is in that cgroup, so ``TasksMax`` bounds the tasks and
``MemoryMax`` the memory of the whole call (the kernel's OOM killer ends a
process of the call when it is reached, and with ``MemorySwapMax=0`` the call
cannot push the desktop into swap instead).  ``--collect`` unloads the unit
when its last process exited, even after an OOM kill.  CPU time stays with
``RLIMIT_CPU`` (a cgroup bounds a rate, not a total).  The exec step's rlimits
are set in any case: they are the bounds where no manager is present.

Detection costs a stat or two and starts nothing: the manager's private
socket ``$XDG_RUNTIME_DIR/systemd/private`` must be a socket of this user in
a directory of this user that no one else can write, and ``systemd-run`` must
be a trusted program of a system directory (never ``PATH``).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from typing import NamedTuple

from registry_core.paths import session_runtime_dir
from registry_core.sandbox.limits import CallLimits
from registry_core.trusted import find_trusted

UNIT_PREFIX = "ollie-call-"
ENFORCED_BY = "cgroup (systemd scope) + rlimits"
DESCRIPTION = "ollie-tools sandboxed call"  # else the whole bwrap command line
_NOT_CREATED = b"Failed to "  # how systemd-run's own errors start


class Scope(NamedTuple):
    """A systemd user manager to run calls in transient scopes of."""

    systemd_run: str
    runtime_dir: str


def find_scope(env: Mapping[str, str]) -> Scope | None:
    """The session's user manager, or ``None`` when it has none (or none to trust)."""
    runtime = session_runtime_dir(env)
    if runtime is None:
        return None
    uid = os.getuid()
    try:
        socket = os.lstat(runtime / "systemd" / "private")
    except OSError:
        return None
    if not stat.S_ISSOCK(socket.st_mode) or socket.st_uid != uid:
        return None
    try:
        directory = os.lstat(runtime / "systemd")
    except OSError:
        return None
    if (
        not stat.S_ISDIR(directory.st_mode)
        or directory.st_uid != uid
        or directory.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return None
    systemd_run = find_trusted("systemd-run")
    if systemd_run is None:
        return None
    return Scope(systemd_run, str(runtime))


def unit_name() -> str:
    return f"{UNIT_PREFIX}{secrets.token_hex(8)}"


def scoped_command(
    scope: Scope,
    argv: list[str],
    env: Mapping[str, str],
    limits: CallLimits,
    unit: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run the bwrap command ``argv`` in a scope bounded by ``limits``.

    systemd-run finds the manager through ``XDG_RUNTIME_DIR``; the tool's
    environment is kept as it was (bwrap sets or unsets that variable again).
    """
    prefix = [
        scope.systemd_run,
        "--user",
        "--scope",
        "--quiet",
        "--collect",
        f"--unit={unit or unit_name()}",
        f"--description={DESCRIPTION}",
        "-p",
        f"TasksMax={limits.tasks}",
        "-p",
        f"MemoryMax={limits.memory}",
        "-p",
        "MemorySwapMax=0",
        "--",
    ]
    original = env.get("XDG_RUNTIME_DIR")
    if original == scope.runtime_dir:
        return [*prefix, *argv], dict(env)
    restore = (
        ["--unsetenv", "XDG_RUNTIME_DIR"]
        if original is None
        else ["--setenv", "XDG_RUNTIME_DIR", original]
    )
    return [*prefix, argv[0], *restore, *argv[1:]], {**env, "XDG_RUNTIME_DIR": scope.runtime_dir}


def scope_not_created(exit_code: int, stderr: bytes) -> str | None:
    """systemd-run's reason when it exited without creating the scope, else ``None``.

    Only meaningful when the sandbox never started (the exec step's status
    pipe stayed empty): then the tool did not run, and the call can be run
    again without the scope.
    """
    if exit_code != 1 or not stderr.startswith(_NOT_CREATED):
        return None
    return stderr.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def unscoped_note(reason: str) -> str:
    """The call's ``unenforced`` entry when the scope could not be created."""
    return f"cgroup limits: systemd-run could not create the call's scope ({reason}); rlimits only"
