"""Ollie's own places: never writable from inside the sandbox.

A tool that can write Ollie's configuration adds a tool and an allow rule
there, and the next call runs it unsandboxed with no dialog; one that can
write Ollie's installation plants a ``.pth`` file or replaces a console
script, and the next ``ollie-tools`` runs its code with the user's full
rights (containment II, finding 5).  So this module holds the one list of
those places, with what each is (:func:`protected_dirs`):

- Ollie's configuration, state and cache directories, where sandboxed calls
  get their private ``/tmp``, and Ollie's runtime directory (the broker's
  socket, the MCP token, ollie-remote's sockets);
- the tools directories;
- the installation: ``sys.prefix``, ``sys.exec_prefix``, ``sys.base_prefix``
  and ``sys.base_exec_prefix`` (a venv, pipx's venv, ``~/.local`` or the
  system's ``/usr``), the directories holding the ``registry_core`` and
  ``ollie_tray`` packages (their site-packages, or the checkout of an
  editable install), the directories of Ollie's commands
  (:func:`registry_core.paths.own_program_dirs`) and those on ``PATH``
  whose ``ollie-tools`` is a link to one of them (pipx's ``~/.local/bin``).

System prefixes (``/usr``, ``/usr/local``) are on the list too: they are
root's, and a sandbox never grants more than the user has, so a writable
rule there gains nothing -- but where a prefix is the user's (a
user-owned ``/usr/local``, a venv, ``~/.local``) it is exactly what must be
kept, and one rule for all is simpler than deciding who owns what.  Only
``/`` is left out (a prefix of ``/`` would make every path Ollie's; a rule
at ``/`` is refused anyway, as it is above the configuration directory).

Two checks use the list.  :func:`check_working_directory` (in
:mod:`.workdir`) refuses a working directory at, inside or above any of
them, as a profile's ``{CWD}`` rule makes it writable.
:func:`refuse_protected_rules` refuses a profile whose writable rule
(``rw``, ``rwx``: the only keys that grant write) lies at, inside or above
one of them, naming the profile, the key and line, the value as written and
the place; the dispatcher runs it for every sandboxed call, ``ollie-tools
sandbox check`` and ``sandbox show`` report it.  Paths are compared as the
kernel sees them: templates expanded, then symlinks resolved.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from registry_core import paths
from registry_core.errors import ProtectedPathError, SandboxError
from registry_core.sandbox.profiles import Access, SandboxProfile
from registry_core.sandbox.rules import UnresolvedTemplateError, expand_path

WRITABLE = (Access.RW, Access.RWX)
"""The ``filesystem`` keys that grant write (``ro``/``rox`` never do)."""

PACKAGES = ("registry_core", "ollie_tray")
COMMAND = "ollie-tools"  # every installation has it; a link to it marks a command directory


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _inside(path: str, root: str) -> bool:
    """Is ``path`` ``root`` or inside it (both real, normalised)?"""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _package_parent(name: str) -> str | None:
    # find_spec of a top-level name locates it without importing it (no GTK for ollie_tray).
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.dirname(locations[0]) if locations else None


def _add(found: dict[str, str], path: str | None, what: str) -> None:
    if path:
        real = _real(path)
        if real != "/":
            found.setdefault(real, what)


@functools.cache
def _running_installation() -> tuple[tuple[str, str], ...]:
    """The places of the installation that is running: fixed for the process."""
    found: dict[str, str] = {}
    _add(found, sys.prefix, "Ollie's Python installation (sys.prefix)")
    _add(found, sys.exec_prefix, "Ollie's Python installation (sys.exec_prefix)")
    _add(found, sys.base_prefix, "the Python installation Ollie runs on (sys.base_prefix)")
    _add(
        found, sys.base_exec_prefix, "the Python installation Ollie runs on (sys.base_exec_prefix)"
    )
    for package in PACKAGES:
        _add(found, _package_parent(package), f"where Ollie's {package} package is installed")
    for place in _commands():
        _add(found, place, "the directory of Ollie's commands")
    return tuple(found.items())


@functools.cache
def _commands() -> tuple[str, ...]:
    return tuple(_real(place) for place in paths.own_program_dirs())


def installation_dirs(env: Mapping[str, str]) -> dict[str, str]:
    """The running installation's places (real paths) and what each is.

    ``env``'s ``PATH`` is searched for links to Ollie's commands (``ollie-tools``
    in ``~/.local/bin`` pointing into pipx's venv); a hostile ``PATH`` can only add
    places, which narrows what a tool may write.
    """
    found = dict(_running_installation())
    commands = _commands()
    for entry in (env.get("PATH") or "").split(":"):
        if entry and os.path.isabs(entry):
            target = os.path.dirname(_real(os.path.join(entry, COMMAND)))
            if target in commands:
                _add(found, entry, "a directory linking to Ollie's commands")
    return found


def protected_dirs(env: Mapping[str, str], tools_dirs: Iterable[str | Path]) -> dict[str, str]:
    """Every place a sandboxed tool must not write (real paths) and what each is.

    The first name wins where two coincide (a tools directory that is Ollie's
    configuration directory keeps that name)."""
    found = {
        _real(paths.ollie_config_dir(env)): "Ollie's configuration directory",
        _real(paths.state_home(env) / "ollie"): "Ollie's state directory",
        _real(paths.cache_home(env) / "ollie"): "Ollie's cache directory",
        _real(paths.sandbox_tmp_base(env)): "where sandboxed calls get their private /tmp",
        _real(paths.runtime_dir(env) / "ollie"): "Ollie's runtime directory",
    }
    for directory in tools_dirs:
        found.setdefault(_real(directory), "a tools directory")
    for directory, what in installation_dirs(env).items():
        found.setdefault(directory, what)
    return found


class Overlap(NamedTuple):
    """How a path meets a protected place: ``relation`` is "at", "above" or "inside"."""

    relation: str
    directory: str
    what: str


def overlap(path: str, protected: Mapping[str, str]) -> Overlap | None:
    """The first protected place ``path`` (real) is at, above or inside, if any."""
    for directory, what in protected.items():
        if path == directory:
            return Overlap("at", directory, what)
        if _inside(directory, path):
            return Overlap("above", directory, what)
        if _inside(path, directory):
            return Overlap("inside", directory, what)
    return None


def refuse_protected_rules(
    profile: SandboxProfile,
    env: Mapping[str, str],
    cwd: str,
    tools_dirs: Iterable[str | Path],
    private: Collection[str] = (),
) -> None:
    """Raise :class:`ProtectedPathError` when a writable rule of ``profile`` lies at,
    above or inside one of :func:`protected_dirs`.

    ``env`` is the environment the templates are expanded with (the dispatcher's,
    with the tools path in use); ``private``: expanded paths that do not name the
    host's directory of that name (the namespace sandbox's private ``/tmp``).  A
    rule naming the working directory itself is :func:`check_working_directory`'s
    (refused there, with its own message, before this runs).
    """
    protected = protected_dirs(env, tools_dirs)
    here = cwd  # the real path the working directory was pinned at (sandbox/pinning.py)
    for template, access, line in profile.filesystem.located():
        if access not in WRITABLE:
            continue
        try:
            expanded = expand_path(template, env, cwd)
        except UnresolvedTemplateError:
            continue  # dropped with a warning by effective_rules: it grants nothing
        for path in expanded:
            if path in private or path == here:
                continue
            try:
                real = _real(path)
            except OSError as exc:  # changing under us (inside the working directory)
                raise SandboxError(f"cannot resolve {path} of {profile.source}: {exc}") from exc
            if real == here:
                continue
            found = overlap(real, protected)
            if found is not None:
                where = f", line {line}" if line is not None else ""
                raise ProtectedPathError(
                    profile=profile.name,
                    source=profile.source,
                    origin=f"filesystem.{access.value}{where}",
                    template=template,
                    rule_path=real,
                    access=access.value,
                    relation=found.relation,
                    directory=found.directory,
                    what=found.what,
                )
