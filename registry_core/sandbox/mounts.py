"""The mount view of a namespaced tool call, planned from its effective rules.

Pure planning (only ``lstat``/``readlink`` on the host): :func:`plan_view`
turns :class:`EffectiveRules` into bubblewrap arguments and into the Landlock
rules that go with them.  Nothing the rules do not name is in the view; the
exceptions are fixed and small:

* ``/tmp`` is the call's own empty directory (``private_tmp`` on the host,
  removed after the call); a rule naming ``/tmp`` (``{TMPDIR}`` expands to it)
  means that directory.  Other paths beneath ``/tmp`` that a rule names (a
  working directory under ``/tmp``, say) are bound from the host into it.
* ``/proc`` is a fresh procfs of the call's PID namespace (host processes are
  invisible); ``/dev`` a minimal one (``null zero full random urandom tty``,
  ``pts``, ``shm``) unless a rule names ``/dev`` itself.
* the broker socket is bound (read-only) at its own path;
* what the exec step needs to run (``helper_paths``: the interpreter that
  applies Landlock) is bound read-only when no rule covers it.  Landlock
  still denies the tool every access no rule grants.
* the root is remounted read-only at the end, and ``.git`` in and above the
  working directory is bound read-only (unless a writable rule names it).

Landlock rules bind inodes and bind mounts share them, so the rules are built
on the host paths.  A fresh procfs has inodes the host cannot name: rules
on ``/proc`` are returned apart (``proc_rules``) and added inside, by the
exec step.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import NamedTuple

from registry_core.sandbox.pinning import OpenedPaths
from registry_core.sandbox.profiles import Access
from registry_core.sandbox.rules import EffectiveRules, PathRule

TMP = "/tmp"  # noqa: S108 - the tool's private /tmp, not a host temporary file
PROC = "/proc"
DEV = "/dev"
#: Device nodes bubblewrap's ``--dev`` provides (bind mounts of the host's).
MINIMAL_DEV = frozenset(
    f"/dev/{name}" for name in ("null", "zero", "full", "random", "urandom", "tty")
)
_WRITABLE = (Access.RW, Access.RWX)


def beneath(path: str, root: str) -> bool:
    """Is ``path`` ``root`` or inside it (lexically)?"""
    return path == root or path.startswith(root.rstrip("/") + "/")


class View(NamedTuple):
    """What :func:`plan_view` decided for one call."""

    args: tuple[str, ...]  # bubblewrap arguments (mounts and --chdir)
    landlock: tuple[PathRule, ...]  # rules on host paths, built in the parent
    proc_rules: tuple[PathRule, ...]  # rules on the fresh /proc, added inside
    hidden_git: tuple[str, ...]  # .git entries bound read-only


def _lexists(path: str) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _host(path: str, private_tmp: str) -> str:
    return private_tmp if path == TMP else path


class _Planner:
    def __init__(self) -> None:
        # (view path, writable) of every directory/file bound so far.
        self.bound: list[tuple[str, bool]] = []
        self.args: list[str] = []

    def covering(self, path: str) -> tuple[str, bool] | None:
        best: tuple[str, bool] | None = None
        for root, writable in self.bound:
            if beneath(path, root) and (best is None or len(root) > len(best[0])):
                best = (root, writable)
        return best

    def covered(self, path: str, writable: bool) -> bool:
        """Is ``path`` already in the view, at least as writable as asked?"""
        return any(beneath(path, root) and (w or not writable) for root, w in self.bound)

    def bind_fd(self, fd: int, dest: str, writable: bool) -> None:
        """Bind the directory or file held open as ``fd`` (never a path resolved again)."""
        self.args += ["--bind-fd" if writable else "--ro-bind-fd", str(fd), dest]
        self.bound.append((dest, writable))

    def bind(self, source: str, dest: str, writable: bool, device: bool = False) -> None:
        flag = "--dev-bind" if device else "--bind" if writable else "--ro-bind"
        self.args += [flag, source, dest]
        if device and not writable:
            self.args += ["--remount-ro", dest]
        self.bound.append((dest, writable))


def _rank(rule: PathRule) -> tuple[int, int]:
    # Parents before children; for one path the writable rule first.
    return (rule.path.count("/"), 0 if rule.access in _WRITABLE else 1)


def _real_entry(path: str) -> bool:
    """A directory or regular file, not a symlink (binding through one could show its target)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def _git_entries(cwd: str, planner: _Planner) -> list[str]:
    """``.git`` in ``cwd`` and in each of its ancestors that is writable in the view.

    Every ancestor up to ``/`` is looked at, not only those of the mount
    holding ``cwd``: that mount may be nested in a writable one bound after
    it (the target of a symlink rule), and git run in ``cwd`` finds the
    outer ``.git`` just the same.  A ``.git`` that is a symlink is left
    alone: bubblewrap would bind its target, wherever that points.
    """
    found: list[str] = []
    path = cwd
    while True:
        cover = planner.covering(path)
        if cover is not None and cover[1]:
            candidate = os.path.join(path, ".git")
            if _real_entry(candidate):
                found.append(candidate)
        parent = os.path.dirname(path)
        if parent == path:
            return found
        path = parent


def plan_view(
    rules: EffectiveRules,
    *,
    cwd: str,
    private_tmp: str,
    broker_socket: str | None,
    helper_paths: Sequence[str] = (),
    opened: OpenedPaths | None = None,
) -> View:
    """Plan the mounts (bubblewrap arguments) and Landlock rules of one call.

    A ``.git`` stays writable only where a ``rw``/``rwx`` rule names it
    (``{CWD}/.git``): the profile's opt-in.  ``opened``: the pinned working
    directory and the rule paths inside it (:mod:`.pinning`), bound by
    descriptor; a rule path inside it that could not be opened without
    following a symlink is left out of the view and of Landlock.
    """
    planner = _Planner()
    planner.args += ["--proc", PROC]
    planner.bound.append((PROC, False))
    landlock: list[PathRule] = []
    proc_rules: list[PathRule] = []
    names_dev = any(rule.path == DEV for rule in rules.paths)
    if not names_dev:
        planner.args += ["--dev", DEV]
        planner.bound.append((DEV, False))
    # Not recorded as bound: paths beneath /tmp that rules name come from the host.
    planner.args += ["--bind", private_tmp, TMP]
    for rule in sorted(rules.paths, key=_rank):
        path = rule.path
        writable = rule.access in _WRITABLE
        if beneath(path, PROC):
            proc_rules.append(rule)
            continue
        if opened is not None and opened.inside(path):
            fd = opened.fds.get(path)
            if fd is None:
                continue  # a symlink (or nothing) inside the working directory
            landlock.append(rule)
            if not planner.covered(path, writable):
                planner.bind_fd(fd, path, writable)
            continue
        host = _host(path, private_tmp)
        if not _lexists(host):
            continue  # Landlock skips it too (and reports it)
        landlock.append(PathRule(host, rule.access, rule.origin))
        if path == TMP or (path in MINIMAL_DEV and not names_dev):
            continue
        if beneath(path, DEV):
            if not planner.covered(path, writable) or path == DEV:
                planner.bind(path, path, writable, device=True)
            continue
        if stat.S_ISLNK(os.lstat(path).st_mode):
            target = os.path.realpath(path)
            if not planner.covered(path, False):
                planner.args += ["--symlink", os.readlink(path), path]
                planner.bound.append((path, False))
            if _lexists(target) and not planner.covered(target, writable):
                planner.bind(target, target, writable)
            continue
        if not planner.covered(path, writable):
            planner.bind(path, path, writable)
    for path in helper_paths:
        if _lexists(path) and not planner.covered(path, False):
            if stat.S_ISLNK(os.lstat(path).st_mode):
                planner.args += ["--symlink", os.readlink(path), path]
                planner.bound.append((path, False))
            else:
                planner.bind(path, path, writable=False)
    if broker_socket and _lexists(broker_socket) and not planner.covered(broker_socket, False):
        planner.bind(broker_socket, broker_socket, writable=False)
    hidden: list[str] = []
    opted_in = {rule.path for rule in rules.paths if rule.access in _WRITABLE}
    for entry in _git_entries(cwd, planner):
        if entry in opted_in:
            continue
        if opened is not None and opened.inside(entry):
            fd = opened.open(entry)
            if fd is None:
                continue  # became a symlink: not bound (bwrap would show its target)
            planner.args += ["--ro-bind-fd", str(fd), entry]
        else:
            planner.args += ["--ro-bind", entry, entry]
        hidden.append(entry)
    if planner.covering(cwd) is None:
        planner.args += ["--dir", cwd]  # chdir works; its contents stay absent
    planner.args += ["--remount-ro", "/", "--chdir", cwd]
    return View(tuple(planner.args), tuple(landlock), tuple(proc_rules), tuple(hidden))


_ROW_KINDS = {
    "--bind": "rw",
    "--ro-bind": "ro",
    "--dev-bind": "device",
    "--bind-fd": "rw",
    "--ro-bind-fd": "ro",
}


def view_rows(args: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(kind, path in the view, detail)`` per mount of a :func:`plan_view` result."""
    rows: list[tuple[str, str, str]] = []
    index = 0
    while index < len(args):
        flag = args[index]
        if flag in _ROW_KINDS:
            source, dest = args[index + 1], args[index + 2]
            detail = "private, removed after the call" if dest == TMP else ""
            if flag.endswith("-fd"):
                pass  # held open by the dispatcher: the path itself, pinned
            elif dest not in (source, TMP):
                detail = f"from {source}"
            rows.append((_ROW_KINDS[flag], dest, detail))
            index += 3
        elif flag == "--symlink":
            rows.append(("symlink", args[index + 2], f"-> {args[index + 1]}"))
            index += 3
        elif flag in ("--proc", "--dev", "--dir"):
            what = {
                "--proc": "fresh procfs: this call's processes only",
                "--dev": "minimal: null zero full random urandom tty pts shm",
                "--dir": "empty (named by no rule)",
            }[flag]
            rows.append((flag[2:], args[index + 1], what))
            index += 2
        else:  # --remount-ro DEST, --chdir DIR
            index += 2
    return rows
