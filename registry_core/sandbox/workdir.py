"""Working directories a sandboxed call must never run in.

Profiles grant the call's working directory (``{CWD}``) read and write.  In
``/``, in the home directory, or in a directory holding (or held by) Ollie's
own configuration, state, cache or tools directories (or holding the broker's
socket), that would
hand a tool ``~/.bashrc``, ``~/.ssh``, ``policies.yaml``, the sandbox profiles
or the tools themselves.  :func:`check_working_directory` refuses those with
:class:`UnsafeWorkingDirectoryError`, whatever the profile says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from registry_core import paths
from registry_core.errors import UnsafeWorkingDirectoryError
from registry_core.sandbox.mounts import TMP, beneath


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def protected_dirs(env: Mapping[str, str], tools_dirs: Iterable[str | Path]) -> dict[str, str]:
    """Ollie's own directories (real paths) and what each is."""
    found = {
        _real(paths.ollie_config_dir(env)): "Ollie's configuration directory",
        _real(paths.state_home(env) / "ollie"): "Ollie's state directory",
        _real(paths.cache_home(env) / "ollie"): "Ollie's cache directory",
        _real(paths.sandbox_tmp_base(env)): "where sandboxed calls get their private /tmp",
    }
    for directory in tools_dirs:
        found.setdefault(_real(directory), "a tools directory")
    return found


def check_working_directory(
    cwd: str, env: Mapping[str, str], tools_dirs: Iterable[str | Path] = ()
) -> None:
    """Raise :class:`UnsafeWorkingDirectoryError` when ``cwd`` is dangerous to grant."""
    real = _real(cwd)
    home = _real(env.get("HOME") or Path.home())
    if real == "/":
        raise UnsafeWorkingDirectoryError(cwd, "the root directory")
    if real == home:
        raise UnsafeWorkingDirectoryError(cwd, "your home directory")
    if real == TMP:
        raise UnsafeWorkingDirectoryError(cwd, "the shared temporary directory")
    socket_dir = _real(paths.elevate_socket(env).parent)
    if beneath(socket_dir, real):  # a subdirectory of it is harmless
        what = "the elevation broker's socket directory"
        raise UnsafeWorkingDirectoryError(
            cwd, what if real == socket_dir else f"an ancestor of {what} ({socket_dir})"
        )
    for directory, what in protected_dirs(env, tools_dirs).items():
        if beneath(real, directory):
            raise UnsafeWorkingDirectoryError(cwd, f"inside {what} ({directory})")
        if beneath(directory, real):
            raise UnsafeWorkingDirectoryError(cwd, f"an ancestor of {what} ({directory})")
