"""A small ctypes binding of the Linux Landlock LSM (ABI 1 to 7).

Only raw system calls through libc's ``syscall()``; no helper process, no
third-party package.  The split between parent and child is the point:

* In the **parent** a :class:`RulesetBuilder` creates the ruleset, opens every
  rule path (``O_PATH | O_CLOEXEC``) and adds the rules.  The result is a
  :class:`PreparedSandbox` holding the ruleset fd.  It can be reused for any
  number of children and must be closed when no longer needed.
* In the **child** (between ``fork`` and ``exec``) :meth:`PreparedSandbox.preexec`
  does only ``prctl(PR_SET_NO_NEW_PRIVS)`` and ``landlock_restrict_self``.  It
  is meant as ``subprocess.Popen(preexec_fn=prepared.preexec)``.  If either
  call fails it raises, so ``Popen`` fails and the tool never runs unsandboxed.

No ``pass_fds`` is needed: ``preexec_fn`` runs before ``subprocess`` closes
the inherited fds, so the (close-on-exec) ruleset fd is usable there.  It must
not reach the tool: a tool holding it could add rules with
``landlock_add_rule`` and widen the sandbox of every later tool that reuses
the same cached ruleset.  So ``preexec`` closes it in the child after use,
which also neutralises a mistaken ``pass_fds=(fd,)``.

Threading: builders are not thread-safe.  ``preexec`` of one prepared
sandbox may run in children forked from several threads at once (it only
reads); closing it while another thread is about to fork makes that child's
``preexec`` raise, so the call fails closed, never open.
"""

from __future__ import annotations

import ctypes
import enum
import errno
import functools
import os
import stat
from types import TracebackType

from registry_core.errors import SandboxError
from registry_core.sandbox.report import EnforcementReport, Gap, SkippedPath

# Syscall numbers: identical on x86_64, i386 and every architecture using the
# generic syscall table (aarch64, riscv64, ...).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

#: The newest ABI whose access rights this module knows.  On a newer kernel
#: everything up to this ABI is used and the rest is left unhandled.
MAX_KNOWN_ABI = 7


class FsAccess(enum.IntFlag):
    """``LANDLOCK_ACCESS_FS_*`` rights."""

    EXECUTE = 1 << 0
    WRITE_FILE = 1 << 1
    READ_FILE = 1 << 2
    READ_DIR = 1 << 3
    REMOVE_DIR = 1 << 4
    REMOVE_FILE = 1 << 5
    MAKE_CHAR = 1 << 6
    MAKE_DIR = 1 << 7
    MAKE_REG = 1 << 8
    MAKE_SOCK = 1 << 9
    MAKE_FIFO = 1 << 10
    MAKE_BLOCK = 1 << 11
    MAKE_SYM = 1 << 12
    REFER = 1 << 13  # ABI 2
    TRUNCATE = 1 << 14  # ABI 3
    IOCTL_DEV = 1 << 15  # ABI 5


class NetAccess(enum.IntFlag):
    """``LANDLOCK_ACCESS_NET_*`` rights (ABI 4)."""

    BIND_TCP = 1 << 0
    CONNECT_TCP = 1 << 1


class Scope(enum.IntFlag):
    """``LANDLOCK_SCOPE_*`` flags (ABI 6)."""

    ABSTRACT_UNIX_SOCKET = 1 << 0
    SIGNAL = 1 << 1


_NO_NET = NetAccess(0)
_NO_SCOPE = Scope(0)

#: Rights that may be granted on a path that is not a directory; the kernel
#: rejects a rule on a file carrying any other right with EINVAL.
FILE_ONLY_ACCESS = (
    FsAccess.EXECUTE
    | FsAccess.WRITE_FILE
    | FsAccess.READ_FILE
    | FsAccess.TRUNCATE
    | FsAccess.IOCTL_DEV
)

_FS_ABI1 = (
    FsAccess.EXECUTE
    | FsAccess.WRITE_FILE
    | FsAccess.READ_FILE
    | FsAccess.READ_DIR
    | FsAccess.REMOVE_DIR
    | FsAccess.REMOVE_FILE
    | FsAccess.MAKE_CHAR
    | FsAccess.MAKE_DIR
    | FsAccess.MAKE_REG
    | FsAccess.MAKE_SOCK
    | FsAccess.MAKE_FIFO
    | FsAccess.MAKE_BLOCK
    | FsAccess.MAKE_SYM
)


def fs_access_for_abi(abi: int) -> FsAccess:
    """Every filesystem right the kernel of ``abi`` can handle (nothing for 0)."""
    if abi < 1:
        return FsAccess(0)
    rights = _FS_ABI1
    if abi >= 2:
        rights |= FsAccess.REFER
    if abi >= 3:
        rights |= FsAccess.TRUNCATE
    if abi >= 5:
        rights |= FsAccess.IOCTL_DEV
    return rights


def net_access_for_abi(abi: int) -> NetAccess:
    """TCP rights the kernel of ``abi`` can handle (ABI 4 and later)."""
    return NetAccess.BIND_TCP | NetAccess.CONNECT_TCP if abi >= 4 else NetAccess(0)


def scopes_for_abi(abi: int) -> Scope:
    """IPC scopes the kernel of ``abi`` can enforce (ABI 6 and later)."""
    return Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL if abi >= 6 else Scope(0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel struct is __attribute__((packed)): 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class _Libc:
    """The two libc entry points we need, with errno capture."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.prctl = libc.prctl
        self.prctl.restype = ctypes.c_int
        self.prctl.argtypes = (
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        )

    def call(self, number: int, *args: int) -> int:
        """``syscall(number, *args)``; raises :class:`OSError` on -1."""
        result = int(self.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args)))
        if result == -1:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return result


@functools.cache
def _libc() -> _Libc:
    # Loaded on first use (never at import) and then shared: it is only a
    # handle on the process's own libc.
    return _Libc()


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable.

    0 covers a kernel without Landlock (ENOSYS), one where it is built in
    but disabled at boot (EOPNOTSUPP), and a seccomp filter (e.g. a
    container runtime's) that refuses the call (EPERM).  Anything else is a
    :class:`SandboxError`.
    """
    try:
        return _libc().call(_SYS_LANDLOCK_CREATE_RULESET, 0, 0, _CREATE_RULESET_VERSION)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
            return 0
        raise SandboxError(f"cannot query the Landlock ABI version: {exc}") from exc


class PreparedSandbox:
    """A Landlock ruleset ready to be enforced in child processes.

    ``fd`` is ``None`` for a *best effort* sandbox on a kernel without
    Landlock: then :meth:`preexec` only sets ``no_new_privs``.  ``report``
    says what is and is not enforced (ABI, gaps, skipped rule paths).
    """

    def __init__(self, fd: int | None, report: EnforcementReport) -> None:
        self._fd = fd
        self._closed = False
        self.report = report
        # Resolved now, in the parent: the child must not dlopen anything.
        self._libc = _libc()

    @property
    def abi(self) -> int:
        return self.report.abi

    @property
    def enforcing(self) -> bool:
        """True when children get a Landlock domain (not only no_new_privs)."""
        return self._fd is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def fd(self) -> int | None:
        return self._fd

    def preexec(self) -> None:
        """Restrict the calling (child) process; for ``Popen(preexec_fn=...)``.

        Runs between ``fork`` and ``exec``: only two system calls, no
        allocation-heavy work.  Raises :class:`OSError` on any failure so the
        child never execs unsandboxed.
        """
        if self._closed:
            raise OSError(errno.EBADF, "sandbox ruleset was closed")
        libc = self._libc
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, "prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(code))
        if self._fd is not None:
            libc.call(_SYS_LANDLOCK_RESTRICT_SELF, self._fd, 0)
            # The tool must never hold the ruleset (see the module docstring);
            # closing it here also undoes a mistaken ``pass_fds``.
            os.close(self._fd)

    def close(self) -> None:
        """Close the ruleset fd; :meth:`preexec` fails afterwards."""
        if self._closed:
            return
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)

    def __enter__(self) -> PreparedSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"fd={self._fd}"
        return f"<PreparedSandbox abi={self.abi} {state}>"


class RulesetBuilder:
    """Builds one Landlock ruleset in the parent process.

    ``handled_*`` are the rights the ruleset restricts (everything handled and
    not granted by a rule is denied); they are masked to what ``abi`` knows.
    Use :meth:`add_path` / :meth:`add_port`, then :meth:`finish` to get the
    :class:`PreparedSandbox` (or :meth:`close` to abandon it).
    """

    def __init__(
        self,
        abi: int,
        handled_fs: FsAccess,
        handled_net: NetAccess = _NO_NET,
        scoped: Scope = _NO_SCOPE,
    ) -> None:
        if abi < 1:
            raise OSError(errno.EOPNOTSUPP, "Landlock is not available in this kernel")
        known = min(abi, MAX_KNOWN_ABI)
        self.abi = abi
        self.handled_fs = handled_fs & fs_access_for_abi(known)
        self.handled_net = handled_net & net_access_for_abi(known)
        self.scoped = scoped & scopes_for_abi(known)
        attr = _RulesetAttr(int(self.handled_fs), int(self.handled_net), int(self.scoped))
        self._fd: int | None = _libc().call(
            _SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), ctypes.sizeof(attr), 0
        )
        self._skipped: list[SkippedPath] = []

    def _ruleset_fd(self) -> int:
        if self._fd is None:
            raise OSError(errno.EBADF, "ruleset builder already finished or closed")
        return self._fd

    def add_path(
        self, path: str, access: FsAccess, *, opened: int | None = None
    ) -> FsAccess | None:
        """Allow ``access`` beneath ``path``; returns the rights actually granted.

        Rights are masked to the handled set, and to file rights when ``path``
        is not a directory.  A path that cannot be opened (missing, no
        permission, ...) is recorded in ``skipped`` and ``None`` is returned.
        ``opened``: a descriptor of ``path`` held by the caller (the pinned
        working directory): the rule is added on it, ``path`` is not resolved.
        """
        ruleset = self._ruleset_fd()
        try:
            path_fd = os.open(path, os.O_PATH | os.O_CLOEXEC) if opened is None else opened
        except OSError as exc:
            reason = "does not exist" if exc.errno == errno.ENOENT else exc.strerror
            self._skipped.append(SkippedPath(path, reason or str(exc)))
            return None
        try:
            granted = access & self.handled_fs
            if not stat.S_ISDIR(os.fstat(path_fd).st_mode):
                granted &= FILE_ONLY_ACCESS
            if not granted:
                self._skipped.append(SkippedPath(path, "no applicable rights for this path"))
                return None
            attr = _PathBeneathAttr(int(granted), path_fd)
            _libc().call(
                _SYS_LANDLOCK_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.addressof(attr), 0
            )
            return granted
        finally:
            if opened is None:
                os.close(path_fd)

    def add_port(self, port: int, access: NetAccess) -> None:
        """Allow ``access`` (bind and/or connect) on TCP ``port``."""
        ruleset = self._ruleset_fd()
        granted = access & self.handled_net
        if not granted:
            raise ValueError("TCP rules need network rights handled by the ruleset (ABI 4)")
        if not 0 <= port <= 65535:
            raise ValueError(f"TCP port out of range: {port}")
        attr = _NetPortAttr(int(granted), port)
        _libc().call(_SYS_LANDLOCK_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.addressof(attr), 0)

    def finish(self, gaps: tuple[Gap, ...] = ()) -> PreparedSandbox:
        """Hand the ruleset fd over to a :class:`PreparedSandbox`.

        ``gaps`` (what the caller knows is not enforced) goes into its report,
        together with the paths this builder skipped.
        """
        fd = self._ruleset_fd()
        self._fd = None
        report = EnforcementReport(self.abi, True, gaps, tuple(self._skipped))
        return PreparedSandbox(fd, report)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RulesetBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def no_landlock_sandbox(gaps: tuple[Gap, ...] = ()) -> PreparedSandbox:
    """A best-effort stand-in on a kernel without Landlock: only ``no_new_privs``."""
    return PreparedSandbox(None, EnforcementReport(0, False, gaps))
