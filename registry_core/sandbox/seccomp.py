"""The seccomp filter of every contained call: the kernel surface a tool never needs.

Landlock restricts files and TCP ports; namespaces hide the rest of the
system.  What is left is the kernel itself, and a few of its interfaces went
around both (docs/security.md §2c): an MPTCP socket ignores Landlock's TCP
port rules, ``listen()`` without ``bind()`` picks a port Landlock never sees,
the session keyring is the dispatcher's, ``io_uring`` and ``userfaultfd``
are the usual doors of kernel exploits, ``NETLINK_SOCK_DIAG`` lists every
socket of the host.  This module says what a call may not do (:func:`plan`,
plain data, shown by ``ollie-tools sandbox show``) and compiles it with
libseccomp (through the ``pyseccomp`` binding, docs/decisions.md) into the
BPF program bwrap loads right before the exec step (``--seccomp FD``).

The filter is a deny list over an allowing default: a tool may use any system
call except these, so no ordinary program breaks, while everything below
fails with an errno the program can handle (never a kill).

* ``socket``/``socketpair``: families ``AF_UNIX``, ``AF_NETLINK`` (route
  only) and, where the profile allows network, ``AF_INET``/``AF_INET6`` with
  TCP (protocol 0 or ``IPPROTO_TCP``) or UDP (name lookups need it while the
  host's network namespace is shared).  No MPTCP, SCTP, raw, packet or ping
  sockets.
* ``listen``: refused while the network is restricted and ``bind_tcp`` is
  empty (an unbound listening socket autobinds a port no rule covers).  The
  filter cannot tell a Unix socket from a TCP one here, so Unix listeners are
  refused too in that case; with the network denied only Unix sockets exist
  and ``listen`` is allowed.
* ``add_key``, ``request_key`` and ``keyctl``, but for joining a new anonymous
  session keyring, which the exec step does first (:func:`keyctl_number`).
* ``io_uring_*``, ``userfaultfd``, ``perf_event_open``, ``bpf``, ``ptrace``,
  ``process_vm_readv``/``writev``.
* New namespaces: ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*``
  flag, and ``clone3`` (its flags sit in memory a filter cannot read; it
  answers ``ENOSYS`` so the C library falls back to ``clone``); bwrap's
  ``--disable-userns`` too.
* Mount APIs, ``chroot``, kexec, module loading.
* The terminal injection ioctls ``TIOCSTI`` and ``TIOCLINUX`` (compared on
  the low 32 bits, as the kernel reads them).

Only the native architecture's system calls are allowed at all: a call made
through another ABI (``int 0x80``, x32) kills the process, as libseccomp does
by default, so the 32-bit ``socketcall`` cannot go around the rules above.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import threading
import zlib
from pathlib import Path
from typing import Any, NamedTuple

from registry_core.safe_open import read_own_cache, write_own_cache
from registry_core.sandbox.profiles import NetworkMode
from registry_core.sandbox.report import Gap
from registry_core.trusted import find_trusted_library, library_dirs

PACKAGE = "libseccomp2"

# Comparison operators of libseccomp (scmp_compare).
_NE, _LT, _EQ, _GT, _MASKED_EQ = 1, 2, 4, 6, 7
_LOW32 = 0xFFFF_FFFF

# Linux's values (the socket module is not imported on a call's path).
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_IPPROTO_TCP, _IPPROTO_UDP = 6, 17
_SOCK_STREAM, _SOCK_DGRAM = 1, 2
_SOCK_TYPE_MASK = 0xF
_NETLINK_ROUTE = 0
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_CLONE_NEW = {
    "CLONE_NEWNS": 0x0002_0000,
    "CLONE_NEWCGROUP": 0x0200_0000,
    "CLONE_NEWUTS": 0x0400_0000,
    "CLONE_NEWIPC": 0x0800_0000,
    "CLONE_NEWUSER": 0x1000_0000,
    "CLONE_NEWPID": 0x2000_0000,
    "CLONE_NEWNET": 0x4000_0000,
    "CLONE_NEWTIME": 0x0000_0080,
}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 271, "s390x": 280}

KERNEL = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
)
NAMESPACES = ("unshare", "setns")
MOUNTS = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
)
SYSTEM = ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")


class Condition(NamedTuple):
    """One comparison of a system call argument: ``args[arg] OP value``
    (``MASKED_EQ``: ``arg & mask == value``)."""

    arg: int
    op: int
    value: int
    mask: int = 0

    def datum(self) -> tuple[int, int]:
        """libseccomp's (datum_a, datum_b): the mask comes first for ``MASKED_EQ``."""
        return (self.mask, self.value) if self.op == _MASKED_EQ else (self.value, 0)


class Denial(NamedTuple):
    """A system call (when every condition holds) that fails with ``error``."""

    syscall: str
    error: int
    conditions: tuple[Condition, ...] = ()


class Rule(NamedTuple):
    """What a person reads in ``sandbox show``: one line, and the denials behind it."""

    what: str
    denials: tuple[Denial, ...]


def _eq(index: int, value: int) -> Condition:
    return Condition(index, _EQ, value)


def _outside(index: int, allowed: tuple[int, ...], *, limit: int | None = None) -> list[Condition]:
    """Conditions that together match every value of ``arg[index]`` not in
    ``allowed`` (sorted): one per value between them, plus below and above.
    ``limit``: compare ``arg & limit`` instead (values below ``limit + 1``)."""
    found: list[Condition] = []
    if limit is None:
        if allowed[0] > 0:
            found.append(Condition(index, _LT, allowed[0]))
        found.append(Condition(index, _GT, allowed[-1]))
        values: range = range(allowed[0], allowed[-1])
    else:
        values = range(limit + 1)
    for value in values:
        if value not in allowed:
            cond = _eq(index, value)
            if limit is not None:
                cond = Condition(index, _MASKED_EQ, value, limit)
            found.append(cond)
    return found


def _socket_rules(network: NetworkMode) -> list[Rule]:
    families = [_AF_UNIX, _AF_NETLINK]
    inet = network is not NetworkMode.DENY
    if inet:
        families += [_AF_INET, _AF_INET6]
    allowed = tuple(sorted(families))
    wrong_family = tuple(
        Denial(name, errno.EAFNOSUPPORT, (cond,))
        for name in ("socket", "socketpair")
        for cond in _outside(0, allowed)
    )
    netlink = (
        Denial(
            "socket",
            errno.EPROTONOSUPPORT,
            (_eq(0, _AF_NETLINK), Condition(2, _GT, _NETLINK_ROUTE)),
        ),
    )
    rules = [
        Rule(
            "sockets: AF_UNIX, AF_NETLINK"
            + (", AF_INET and AF_INET6" if inet else " (no AF_INET/AF_INET6: network denied)"),
            wrong_family,
        ),
        Rule("netlink: NETLINK_ROUTE only (no sock_diag, audit, ...)", netlink),
    ]
    if inet:
        inet_denials: list[Denial] = []
        for family in (_AF_INET, _AF_INET6):
            fam = _eq(0, family)
            kinds = (_SOCK_STREAM, _SOCK_DGRAM)
            for cond in _outside(1, kinds, limit=_SOCK_TYPE_MASK):
                inet_denials.append(Denial("socket", errno.EPROTONOSUPPORT, (fam, cond)))
            for cond in _outside(2, (0, _IPPROTO_TCP, _IPPROTO_UDP)):
                inet_denials.append(Denial("socket", errno.EPROTONOSUPPORT, (fam, cond)))
            for kind, wrong in ((_SOCK_STREAM, _IPPROTO_UDP), (_SOCK_DGRAM, _IPPROTO_TCP)):
                typed = Condition(1, _MASKED_EQ, kind, _SOCK_TYPE_MASK)
                inet_denials.append(
                    Denial("socket", errno.EPROTONOSUPPORT, (fam, typed, _eq(2, wrong)))
                )
        rules.append(
            Rule(
                "inet sockets: TCP and UDP only (no MPTCP, SCTP, raw or ping sockets)",
                tuple(inet_denials),
            )
        )
    return rules


@functools.cache
def plan(network: NetworkMode, bind_tcp: tuple[int, ...]) -> tuple[Rule, ...]:
    """What the filter of a call with this network section refuses."""
    rules = _socket_rules(network)
    if network is NetworkMode.RESTRICTED and not bind_tcp:
        rules.append(
            Rule(
                "listen(): refused, the profile has no bind_tcp (Unix sockets included)",
                (Denial("listen", errno.EPERM),),
            )
        )

    def every(names: tuple[str, ...]) -> tuple[Denial, ...]:
        return tuple(Denial(name, errno.EPERM) for name in names)

    clone = tuple(
        Denial("clone", errno.EPERM, (Condition(_clone_flags_index(), _MASKED_EQ, bit, bit),))
        for bit in _CLONE_NEW.values()
    )
    rules += [
        Rule(
            "keyrings: add_key, request_key, keyctl (but joining a new anonymous session keyring)",
            (
                *every(("add_key", "request_key")),
                Denial("keyctl", errno.EPERM, (Condition(0, _NE, _KEYCTL_JOIN_SESSION_KEYRING),)),
                Denial("keyctl", errno.EPERM, (Condition(1, _NE, 0),)),
            ),
        ),
        Rule("kernel interfaces: " + ", ".join(KERNEL), every(KERNEL)),
        Rule(
            "new namespaces: unshare, setns, clone with CLONE_NEW*, clone3 (ENOSYS)",
            (*every(NAMESPACES), *clone, Denial("clone3", errno.ENOSYS)),
        ),
        Rule("mounts: " + ", ".join(MOUNTS), every(MOUNTS)),
        Rule("kexec and kernel modules: " + ", ".join(SYSTEM), every(SYSTEM)),
        Rule(
            "terminal injection: ioctl TIOCSTI, TIOCLINUX",
            tuple(
                Denial("ioctl", errno.EPERM, (Condition(1, _MASKED_EQ, cmd, _LOW32),))
                for cmd in (_TIOCSTI, _TIOCLINUX)
            ),
        ),
    ]
    return tuple(rules)


LIBRARY = "libseccomp.so.2"


@functools.cache
def _binding() -> Any:
    """The pyseccomp module over the trusted system ``libseccomp.so.2``; raises
    :class:`FilterUnavailable` without one.

    pyseccomp looks its libraries up with ``ctypes.util.find_library`` when it is
    imported, and that runs ``gcc`` and ``ld`` from ``PATH`` when the loader's
    cache lacks the library.  While it is imported, the lookup answers only with
    the trusted library's absolute path (and the C library's soname), so no
    program is ever taken from ``PATH`` (docs/security.md §2c).
    """
    import ctypes.util

    library = find_trusted_library(LIBRARY)
    if library is None:
        raise FilterUnavailable(
            f"{LIBRARY} is not installed in a system library directory Ollie trusts "
            f"({', '.join(library_dirs())})"
        )
    names = {"seccomp": library, "c": "libc.so.6"}
    with _IMPORT_LOCK:
        looked_up = ctypes.util.find_library
        ctypes.util.find_library = names.get  # type: ignore[assignment]
        try:
            import pyseccomp
        except (ImportError, OSError, RuntimeError) as exc:
            raise FilterUnavailable(f"libseccomp cannot be loaded ({exc})") from exc
        finally:
            ctypes.util.find_library = looked_up
    return pyseccomp


_IMPORT_LOCK = threading.Lock()


def _clone_flags_index() -> int:
    """``clone``'s flags are argument 0, except on s390 where they are argument 1."""
    return 1 if os.uname().machine.startswith("s390") else 0


class FilterUnavailable(Exception):
    """libseccomp is missing or cannot build the filter on this system."""


@functools.cache
def compile_filter(rules: tuple[Rule, ...]) -> bytes:
    """The BPF program (bwrap's ``--seccomp`` format) of ``rules``."""
    lib = _binding()
    try:
        program = lib.SyscallFilter(lib.ALLOW)
        for rule in rules:
            for denial in rule.denials:
                number = lib.resolve_syscall(lib.Arch.NATIVE, denial.syscall)
                if number == -1:  # unknown to this libseccomp: nothing to refuse
                    continue
                args = [lib.Arg(c.arg, c.op, *c.datum()) for c in denial.conditions]
                program.add_rule(lib.ERRNO(denial.error), number, *args)
        fd = os.memfd_create("ollie-seccomp", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(fd), "rb", closefd=True) as out:
                program.export_bpf(out)
            os.lseek(fd, 0, os.SEEK_SET)
            return _read_all(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise FilterUnavailable(f"libseccomp could not build the filter ({exc})") from exc


_MAX_PROGRAM = 4096 * 8  # BPF_MAXINSNS instructions of 8 bytes
_RET = 0x06


def _plausible(program: bytes) -> bool:
    """A whole number of instructions, within the kernel's limit, ending in a return."""
    if not program or len(program) % 8 or len(program) > _MAX_PROGRAM:
        return False
    return program[-8] & 0x07 == _RET


def digest(rules: tuple[Rule, ...]) -> str:
    """Names one plan on one architecture (the file name of its compiled program).

    A checksum, not a cryptographic hash: it only tells a handful of plans
    apart in a directory of ours (``hashlib`` would cost a call 3 ms to load
    OpenSSL)."""
    text = f"{os.uname().machine} {rules!r}".encode()
    return f"{zlib.crc32(text):08x}{len(text):x}"


def program_for(rules: tuple[Rule, ...], cache: Path | None) -> bytes:
    """The compiled program of ``rules``, remembered in the ``cache`` directory.

    Loading libseccomp and compiling cost about as much as the rest of a
    call's start-up, so the program is kept as ``seccomp-<digest>.bpf`` in
    Ollie's cache directory (a place no profile may make writable, §2 of
    docs/security.md) and read back by every later call; a file that is not
    ours, writable by others or not a plausible program is compiled again.
    """
    if cache is None:
        return compile_filter(rules)
    file = cache / f"seccomp-{digest(rules)}.bpf"
    remembered = read_own_cache(file, limit=_MAX_PROGRAM)
    if remembered is not None and _plausible(remembered):
        return remembered
    program = compile_filter(rules)
    with contextlib.suppress(OSError):
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_own_cache(file, program)
    return program


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def program_fd(program: bytes) -> int:
    """A descriptor (inheritable, at offset 0) holding ``program``, for ``--seccomp``."""
    fd = os.memfd_create("ollie-seccomp", 0)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def missing_filter_gap(reason: str) -> Gap:
    return Gap(
        "seccomp",
        f"{reason}: MPTCP, raw and packet sockets, sock_diag, listen(), keyrings, "
        f"io_uring, userfaultfd and new namespaces stay open to tools; install "
        f"the '{PACKAGE}' package",
        requested=True,
    )


def unavailable_reason() -> str | None:
    """Why no filter can be built here (``None``: it can)."""
    try:
        compile_filter(plan(NetworkMode.DENY, ()))
    except FilterUnavailable as exc:
        return str(exc)
    return None


def keyctl_number() -> int:
    """This architecture's ``keyctl`` system call number, for the exec step.

    The exec step joins a new anonymous session keyring before it runs the tool
    (the one ``keyctl`` the filter lets through: it only gives the dispatcher's
    keyring up), so nothing inside possesses the dispatcher's keyring even where
    the filter is missing.  The number is known here for the common
    architectures; loading libseccomp to look it up would cost each call as
    much as its filter.
    """
    number = _KEYCTL.get(os.uname().machine)
    if number is None:  # libseccomp knows every architecture's number
        number = int(_binding().resolve_syscall(_binding().Arch.NATIVE, "keyctl"))
    return number
