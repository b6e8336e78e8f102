"""The file an agent's path really names: symbolic links followed, as the kernel would.

A sandboxed tool may write the project directory, so it may plant
``NOTES.md -> ~/.bashrc`` (or ``docs -> ~``) there; the agent's next edit of
``NOTES.md`` writes the link's target.  ``ollie-approve`` therefore judges,
shows, diffs and matches patterns against the *real* path:

- every component is looked at with ``lstat``; a symbolic link's target is
  spliced in (relative to the link's directory) and walked again, so a link
  in any directory component counts, not only the last one;
- ``..`` goes up from the real directory reached so far (the kernel's reading:
  ``sub/..`` where ``sub -> ~/deep`` is ``~``), never lexically;
- a component that does not exist (a file or directories about to be
  created) ends the looking-up: it and what follows it are kept as named,
  since nothing can be a link there yet;
- more than :data:`MAX_LINKS` links (a loop), a component that cannot be
  looked at (no search permission, a name too long) or a path whose ``..``
  means a different file when read lexically (as a program that tidies the
  path before opening it would) cannot be told: :class:`Unresolvable`, which
  the hook turns into ``ask`` with the reason, never an allow.

Hard links cannot be followed (every name of a file is equally its own), so
:func:`resolve` reports how many names an existing file has; the hook never
counts a file with more than one name as inside the working directory.

What this cannot see: a link planted *after* the hook answered and before the
agent writes (the hook cannot hold the file open for the agent).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections import deque
from dataclasses import dataclass

from registry_core.errors import AgentActionError

MAX_LINKS = 40
"""Symbolic links followed for one path before it counts as a loop (the kernel's own limit)."""
MAX_PATH = 4096


class Unresolvable(AgentActionError):
    """The file a path names cannot be told (a link loop, an unreadable component...)."""


@dataclass(frozen=True)
class RealPath:
    """A path as the agent named it (absolute) and the file it names."""

    named: str
    real: str
    names: int = 1
    """Hard links of the existing file (1 for a directory or a file not there yet)."""

    @property
    def through_link(self) -> bool:
        """Is the real file another one than the name says (a symbolic link on the way)?"""
        return self.real != posixpath.normpath(self.named)


def absolute(path: str, cwd: str) -> str:
    """``path`` made absolute against ``cwd``, *not* normalised (``..`` stays visible)."""
    return path if path.startswith("/") else cwd.rstrip("/") + "/" + path


def _walk(path: str) -> str:
    """The real path of absolute ``path`` (see the module docstring).

    Raises :class:`Unresolvable`."""
    pending = deque(path.split("/"))
    real: list[str] = []
    links = 0
    while pending:
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            if real:
                real.pop()
            continue
        here = "/" + "/".join([*real, name])
        try:
            info = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            real.append(name)  # not there (yet): nothing beneath can be a link
            continue
        except OSError as exc:
            raise Unresolvable(f"{path}: cannot look at {here}: {exc.strerror}") from exc
        if not stat.S_ISLNK(info.st_mode):
            real.append(name)
            continue
        links += 1
        if links > MAX_LINKS:
            raise Unresolvable(
                f"{path}: more than {MAX_LINKS} symbolic links on the way (a loop?) at {here}"
            )
        try:
            target = os.readlink(here)
        except OSError as exc:
            raise Unresolvable(f"{path}: cannot read the link {here}: {exc.strerror}") from exc
        if target.startswith("/"):
            real.clear()
        pending.extendleft(reversed(target.split("/")))
    result = "/" + "/".join(real)
    if len(result) > MAX_PATH:
        raise Unresolvable(f"{path}: its real path is longer than {MAX_PATH} characters")
    return result


def real_path(path: str) -> str:
    """The real path of absolute ``path``; raises :class:`Unresolvable`.

    A ``..`` that the kernel and a lexical tidy-up read as two different files
    is refused: which one the agent writes depends on its code, not on us.
    """
    if not path.startswith("/") or "\x00" in path:
        raise Unresolvable(f"{path!r}: not an absolute path")
    real = _walk(path)
    if ".." in path.split("/"):
        lexical = _walk(posixpath.normpath(path))
        if lexical != real:
            raise Unresolvable(
                f"{path}: '..' after a symbolic link names {real}, "
                f"but {lexical} when the path is tidied first"
            )
    return real


def resolve(path: str, cwd: str) -> RealPath:
    """``path`` (absolute, or relative to ``cwd``) and the file it names.

    Raises :class:`Unresolvable`."""
    named = absolute(path, cwd)
    real = real_path(named)
    names = 1
    try:
        info = os.lstat(real)
    except OSError:
        pass  # not there (yet): a new file has one name
    else:
        if not stat.S_ISDIR(info.st_mode):
            names = info.st_nlink
    return RealPath(named=named, real=real, names=names)


def is_beneath(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or beneath it (both real, normal paths)."""
    return (path.rstrip("/") + "/").startswith(directory.rstrip("/") + "/")
