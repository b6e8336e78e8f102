"""What the broker itself knows about a requested tool (never only the requester's word).

The approval dialog shows the description, variant and executable from the
broker's own registry, with the executable's sha256, and lists every way the
request differs from what that registry would run.

The sha256 is asked for on every request; :class:`Sha256Cache` answers from
a ``stat`` while the file is provably the one it hashed (see there).  It is
thread-safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from registry_core.broker.remember.policies import fd_sha256, open_for_hashing
from registry_core.broker.wire import messages as m
from registry_core.pinned import STUB, approved_argv, display_argv, pinned_argv
from registry_core.registry import Registry, Tool
from registry_core.registry.meta import MAX_META_BYTES
from registry_core.safe_open import read_regular
from registry_core.trusted import SYSTEM_DIRS, find_trusted

REQUEST_CODE_TOOL = m.REQUEST_CODE_TOOL

_FileId = tuple[int, int, int, int, int]


def _file_id(st: os.stat_result) -> _FileId:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Sha256Cache:
    """File sha256s, remembered per path and (st_dev, st_ino, st_size, st_mtime_ns,
    st_ctime_ns): a lookup costs one ``stat`` while the file is unchanged.

    Any write, truncation, ``chmod``, rename onto the path or ``utime`` changes
    ``st_ctime_ns`` (which no user can set) or the inode, so a changed file is
    hashed again.  Timestamps are only as fine as the file system's clock tick
    (a jiffy; a whole second on some file systems), so a file changed again
    within the same tick would keep its stamps: a hash is therefore remembered
    only when the file's last change lies more than :attr:`racy_ns` before the
    hashing began (as git does with "racily clean" entries), and only when the
    file's stamps did not change while it was read.  A new or just-edited
    executable is hashed on every request until then.
    """

    def __init__(
        self,
        *,
        size: int = 256,
        racy_ns: int = 2_000_000_000,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.size = size
        self.racy_ns = racy_ns
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._known: OrderedDict[str, tuple[_FileId, str]] = OrderedDict()

    def sha256(self, path: str) -> str | None:
        """The sha256 of the regular file at ``path``; ``None`` when it cannot be read."""
        try:
            file_id: _FileId | None = _file_id(os.stat(path))
        except OSError:
            file_id = None
        if file_id is not None:
            with self._lock:
                known = self._known.get(path)
                if known is not None and known[0] == file_id:
                    self._known.move_to_end(path)
                    return known[1]
        return self._hash(path)

    def clear(self) -> None:
        with self._lock:
            self._known.clear()

    def _hash(self, path: str) -> str | None:
        started = self._clock_ns()
        try:
            fd = open_for_hashing(path)
        except OSError:
            return None
        try:
            before = os.fstat(fd)
            digest = fd_sha256(fd)
            after = os.fstat(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        file_id = _file_id(after)
        settled = max(after.st_mtime_ns, after.st_ctime_ns) < started - self.racy_ns
        if digest is not None and settled and _file_id(before) == file_id:
            with self._lock:
                self._known[path] = (file_id, digest)
                self._known.move_to_end(path)
                while len(self._known) > self.size:
                    self._known.popitem(last=False)
        return digest


SHA256 = Sha256Cache()
"""The broker's cache of executable hashes (shared by every :func:`gather_facts` call)."""


@dataclass(frozen=True)
class RequestFacts:
    description: str
    variant: int | None
    executable: str | None
    sha256: str | None
    mismatches: tuple[str, ...]


FindProgram = Callable[[str], str | None]
"""How the broker finds the programs it expects (``name`` -> absolute path or ``None``)."""


def _own_program(find_program: FindProgram, name: str) -> tuple[str | None, str]:
    """The broker's own trusted ``name`` and, when there is none, the mismatch to show."""
    own = find_program(name)
    if own is None:
        return None, f"{name} is not installed in a system directory this broker trusts"
    return own, ""


def _code_facts(req: m.ElevateRequest, find_program: FindProgram) -> RequestFacts:
    bash, missing = _own_program(find_program, "bash")
    real = os.path.realpath(bash) if bash else None
    mismatches = [missing] if missing else []
    argv = list(req.argv)
    # argv[0] must be exactly the path the broker's own lookup finds: a bare name
    # would be resolved on the requester's PATH, any other path is another program.
    if len(argv) != 3 or bash is None or argv[0] != bash or argv[1] != "-c":
        mismatches.append(f"argv {argv!r} is not bash -c <code>")
    elif argv[2] != req.code:
        mismatches.append("the code in argv differs from the code shown")
    return RequestFacts(
        description="Run bash code outside the sandbox (ollie-core x/elevate plugin).",
        variant=None,
        executable=real,
        sha256=SHA256.sha256(real) if real else None,
        mismatches=tuple(mismatches),
    )


_SYSTEM_DIRS_TEXT = f"({', '.join(SYSTEM_DIRS[:-1])} or {SYSTEM_DIRS[-1]})"
_REMOTE_SUDO = f"{_SYSTEM_DIRS_TEXT}/sudo"
_REMOTE_PYTHON = f"{_SYSTEM_DIRS_TEXT}/python3"


def _remote_system_program(arg: str, name: str) -> bool:
    """Is ``arg`` a plausible ``name`` (sudo, python3) of the remote host?  Its files
    cannot be looked at from here, so this is a check of the string alone: an absolute
    path, in one of the system directories, called ``name`` -- never a bare name (the
    remote requester's PATH would choose it) nor a file in a directory a tool may write
    there."""
    return os.path.basename(arg) == name and os.path.dirname(arg) in SYSTEM_DIRS


def _remote_pinned(argv: list[str]) -> tuple[str | None, str] | None:
    """(sha256, program) of a remote argv in the dispatcher's form, or ``None``.

    :func:`pinned_argv` with the remote host's system ``python3`` gives its sha256;
    the direct form ``[program]`` (a file only root can change there, see
    :func:`approved_argv`) has none (``None``)."""
    if len(argv) == 1:
        return None, argv[0]
    if len(argv) != 6 or not _remote_system_program(argv[0], "python3"):
        return None
    if argv[1:4] != ["-I", "-c", STUB]:
        return None
    return argv[4], argv[5]


def remote_programs(tool: Tool, remote_tools_dir: str) -> set[str]:
    """Paths a remote host's dispatcher may run for ``tool`` (ollie-remote deployed it
    from here into ``remote_tools_dir``): the co-located executable or any ``cmd`` of
    any variant (the remote host resolves its own variant), there; an absolute ``cmd``
    as is.  A bare name the tools directory does not hold is found on the remote PATH:
    ``*/name`` (marked by the ``*/`` prefix)."""
    names = [tool.name]
    with contextlib.suppress(OSError, ValueError, RecursionError):
        obj = json.loads(read_regular(tool.source, limit=MAX_META_BYTES, follow_symlinks=True))
        variants = obj.get("variants") if isinstance(obj, dict) else None
        found = [obj.get("cmd") if isinstance(obj, dict) else None]
        found += [v.get("cmd") for v in variants or () if isinstance(v, dict)]
        names += [c for c in found if isinstance(c, str) and c]
    programs: set[str] = set()
    for name in names:
        if os.path.isabs(name):
            programs.add(name)
        elif "/" in name or (tool.directory / name).is_file():
            programs.add(os.path.normpath(os.path.join(remote_tools_dir, name)))
        else:
            programs.add(f"*/{name}")
    return programs


def _deployed_copy(tool: Tool, program: str, remote_tools_dir: str) -> str | None:
    """The local file ollie-remote deployed as ``program`` into ``remote_tools_dir``
    (beside ``tool``'s ``.meta`` here), or ``None`` for a program of the remote PATH."""
    prefix = remote_tools_dir.rstrip("/") + "/"
    if not program.startswith(prefix):
        return None
    return str(tool.directory / program.removeprefix(prefix))


def _remote_ok(program: str, programs: set[str]) -> bool:
    if program in programs:
        return True
    return os.path.isabs(program) and f"*/{os.path.basename(program)}" in programs


class TrustedPrograms:
    """The trusted ``python3``, ``sudo`` and ``bash`` a request's argv is compared
    with, looked up again once ``ttl`` seconds have passed.

    The lookup walks every directory above the program (realpath, owner and mode
    of each): most of what deciding a remembered request costs.  Only root can
    change what it finds (the files and directories are root's, writable by root
    alone, or they are refused), and root is trusted (docs/security.md §13), so a
    second's memory weakens nothing; an upgrade that moves a program is seen
    within it.
    """

    def __init__(self, find: FindProgram = find_trusted, ttl: float = 1.0) -> None:
        self._find = find
        self._ttl = ttl
        self._known: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            known = self._known.get(name)
            if known is not None and now - known[0] < self._ttl:
                return known[1]
        found = self._find(name)
        with self._lock:
            self._known[name] = (now, found)
        return found


TRUSTED = TrustedPrograms()


def gather_facts(
    registry: Registry,
    req: m.ElevateRequest,
    *,
    remote_tools_dir: str | None = None,
    find_program: FindProgram = TRUSTED,
) -> RequestFacts:
    """Registry facts for ``req``; raises ToolNotFoundError / ToolUnavailableError.

    ``remote_tools_dir``: the request comes through an ollie-remote forward from a
    host whose tools (deployed from here) live there; the requested program is then
    checked against :func:`remote_programs`, and ``executable``/``sha256`` describe
    the local copy that was deployed.  ``find_program`` finds the broker's own
    ``sudo``, ``python3`` and ``bash`` (the trusted ones of the system directories,
    never ``PATH``): a request's programs must be exactly those paths.

    A registry tool runs through the pinned exec (:mod:`registry_core.pinned`): the
    argv must be ``[python3, -I, -c, STUB, sha256, executable]`` (after ``sudo -A --``
    for a sudo tool), the stub byte for byte and the sha256 the one the broker itself
    computes now -- so what the person approves (and what a remembered rule binds) is
    exactly what the pinned exec agrees to run."""
    if req.code is not None and req.tool == REQUEST_CODE_TOOL:
        return _code_facts(req, find_program)
    tool = registry.usable(req.tool)
    executable = tool.executable_file
    mismatches: list[str] = []
    if req.code is not None:
        mismatches.append("a code field was sent for a registry tool")
    if executable is None:
        mismatches.append(f"the registry finds no executable: {tool.resolution_detail}")
    argv = list(req.argv)
    expected: list[str]
    if req.kind is m.Kind.SUDO and not tool.sudo:
        mismatches.append("asks to run as root, but the tool does not declare sudo: true")
    if req.kind is not m.Kind.SUDO and tool.sudo:
        mismatches.append(
            "the tool declares sudo: true but the request asks only to leave the sandbox"
        )
    sha256 = SHA256.sha256(executable) if executable else None
    if executable is not None and sha256 is None:
        mismatches.append(f"the broker cannot read {executable} to compute its sha256")
    if remote_tools_dir is not None:
        # Through an ollie-remote forward: the program is a file on the remote host.
        if req.kind is m.Kind.SUDO:
            prefix = len(argv) >= 3 and _remote_system_program(argv[0], "sudo")
            pinned = _remote_pinned(argv[3:]) if prefix and argv[1:3] == ["-A", "--"] else None
        else:
            pinned = _remote_pinned(argv)
        sent_sha, program = pinned or ("", "")
        ok = pinned is not None and _remote_ok(program, remote_programs(tool, remote_tools_dir))
        if ok and sent_sha is None and program.startswith(remote_tools_dir.rstrip("/") + "/"):
            ok = False  # a deployed copy is the person's file there: only pinned, never by path
        deployed = _deployed_copy(tool, program, remote_tools_dir) if ok else None
        if deployed is not None and sent_sha is not None:
            copy_sha = SHA256.sha256(deployed)
            if sent_sha != copy_sha:
                mismatches.append(
                    f"the remote file's sha256 {sent_sha} is not the deployed copy's {copy_sha}"
                )
        where = f"{remote_tools_dir}/({tool.name} or a cmd of its .meta)"
        remote = pinned_argv(_REMOTE_PYTHON, "<sha256>", where)
        expected = [_REMOTE_SUDO, "-A", "--", *remote] if req.kind is m.Kind.SUDO else remote
    else:
        python, missing_python = _own_program(find_program, "python3")
        local = approved_argv(python or "python3", sha256 or "<unreadable>", executable or "")
        if missing_python and len(local) > 1:  # the pinned exec needs the system's python3
            mismatches.append(missing_python)
        if req.kind is m.Kind.SUDO:
            sudo, missing = _own_program(find_program, "sudo")
            if missing:
                mismatches.append(missing)
            expected = [sudo or "sudo", "-A", "--", *local]
            ok = sudo is not None and argv == expected
        else:
            expected = local
            ok = argv == expected
        ok = ok and sha256 is not None and (python is not None or len(local) == 1)
    if not ok and executable is not None:
        shown = display_argv(argv)
        mismatches.append(
            f"requested argv {shown!r}; the registry would run {display_argv(expected)!r}"
        )
    return RequestFacts(
        description=tool.description,
        variant=tool.variant,
        executable=executable,
        sha256=sha256,
        mismatches=tuple(mismatches),
    )
