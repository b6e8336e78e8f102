"""Working directories a sandboxed call must never run in.

Profiles grant the call's working directory (``{CWD}``) read and write.  In
``/``, in the home directory, or in a directory at, inside or holding one of
Ollie's own places (:func:`~registry_core.sandbox.protected.protected_dirs`:
its configuration, state, cache, runtime and tools directories, its
installation) or the broker's socket directory, that would hand a tool
``~/.bashrc``, ``~/.ssh``, ``policies.yaml``, the sandbox profiles, the
tools, or the venv whose next ``ollie-tools`` runs a planted ``.pth``.
:func:`check_working_directory` refuses those with
:class:`UnsafeWorkingDirectoryError`, whatever the profile says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from registry_core import paths
from registry_core.errors import UnsafeWorkingDirectoryError
from registry_core.sandbox.mounts import TMP, beneath
from registry_core.sandbox.protected import overlap, protected_dirs

__all__ = ["check_working_directory", "protected_dirs"]


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def check_working_directory(
    cwd: str,
    env: Mapping[str, str],
    tools_dirs: Iterable[str | Path] = (),
    *,
    resolved: bool = False,
) -> None:
    """Raise :class:`UnsafeWorkingDirectoryError` when ``cwd`` is dangerous to grant.

    ``resolved``: ``cwd`` is the real path a pinned directory was opened at
    (:mod:`.pinning`); it is judged as is, never resolved again.
    """
    real = cwd if resolved else _real(cwd)
    home = _real(env.get("HOME") or Path.home())
    if real == "/":
        raise UnsafeWorkingDirectoryError(cwd, "the root directory")
    if real == home:
        raise UnsafeWorkingDirectoryError(cwd, "your home directory")
    if real == TMP:
        raise UnsafeWorkingDirectoryError(cwd, "the shared temporary directory")
    socket_dir = _real(paths.elevate_socket(env).parent)
    # A subdirectory of a configured socket directory elsewhere is harmless; the
    # default one is Ollie's runtime directory, protected whole below.
    if beneath(socket_dir, real):
        what = "the elevation broker's socket directory"
        raise UnsafeWorkingDirectoryError(
            cwd, what if real == socket_dir else f"an ancestor of {what} ({socket_dir})"
        )
    found = overlap(real, protected_dirs(env, tools_dirs))
    if found is not None:
        relation = "an ancestor of" if found.relation == "above" else "inside"
        raise UnsafeWorkingDirectoryError(cwd, f"{relation} {found.what} ({found.directory})")
