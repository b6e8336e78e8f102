"""The seccomp plan and its compilation (rules as data; the kernel is tested in
tests/integration/test_seccomp_filter.py)."""

from __future__ import annotations

import errno
import os
import socket
import struct
from pathlib import Path

import pytest

from registry_core.errors import SeccompUnavailableError
from registry_core.sandbox import contain as contain_mod
from registry_core.sandbox import seccomp
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule
from registry_core.sandbox.seccomp import Condition, Denial, plan


def _holds(cond: Condition, args: tuple[int, ...]) -> bool:
    value = args[cond.arg]
    if cond.op == 1:
        return value != cond.value
    if cond.op == 2:
        return value < cond.value
    if cond.op == 4:
        return value == cond.value
    if cond.op == 6:
        return value > cond.value
    assert cond.op == 7
    return value & cond.mask == cond.value


def _errno(rules: tuple[seccomp.Rule, ...], syscall: str, *args: int) -> int | None:
    """What the filter answers (an errno) or None (allowed): the plan evaluated."""
    padded = (*args, *([0] * (6 - len(args))))
    for rule in rules:
        for denial in rule.denials:
            if denial.syscall == syscall and all(_holds(c, padded) for c in denial.conditions):
                return denial.error
    return None


INET, INET6, UNIX, NETLINK = socket.AF_INET, socket.AF_INET6, socket.AF_UNIX, socket.AF_NETLINK
STREAM, DGRAM, RAW, SEQPACKET = 1, 2, 3, 5


@pytest.mark.parametrize("mode", [NetworkMode.RESTRICTED, NetworkMode.UNRESTRICTED])
def test_with_network_tcp_and_udp_are_allowed_and_every_other_inet_kind_refused(
    mode: NetworkMode,
) -> None:
    rules = plan(mode, ())
    for family in (INET, INET6):
        for kind, proto in ((STREAM, 0), (STREAM, 6), (DGRAM, 0), (DGRAM, 17)):
            assert _errno(rules, "socket", family, kind | 0x80800, proto) is None
        refused = [(STREAM, 262), (SEQPACKET, 132), (STREAM, 132), (DGRAM, 1), (RAW, 255)]
        for kind, proto in [*refused, (STREAM, 17), (DGRAM, 6), (RAW, 0), (4, 0)]:
            assert _errno(rules, "socket", family, kind, proto) == errno.EPROTONOSUPPORT


def test_without_network_no_inet_socket_at_all_but_unix_and_route_netlink() -> None:
    rules = plan(NetworkMode.DENY, ())
    for family in (INET, INET6):
        assert _errno(rules, "socket", family, STREAM, 0) == errno.EAFNOSUPPORT
    assert _errno(rules, "socket", UNIX, STREAM, 0) is None
    assert _errno(rules, "socketpair", UNIX, STREAM, 0) is None
    assert _errno(rules, "socket", NETLINK, RAW, 0) is None


@pytest.mark.parametrize("mode", list(NetworkMode))
def test_every_family_but_the_allowed_ones_is_refused_whatever_the_high_bits(
    mode: NetworkMode,
) -> None:
    rules = plan(mode, ())
    allowed = {UNIX, NETLINK} | ({INET, INET6} if mode is not NetworkMode.DENY else set())
    for family in range(0, 64):
        expected = None if family in allowed else errno.EAFNOSUPPORT
        assert _errno(rules, "socket", family, STREAM, 0) in (expected, errno.EPROTONOSUPPORT)
        if expected is not None:
            assert _errno(rules, "socket", family, STREAM, 0) == expected
        # The kernel reads an int: a value with high bits set is refused, never truncated.
        assert _errno(rules, "socket", (1 << 32) | family, STREAM, 0) == errno.EAFNOSUPPORT
    assert _errno(rules, "socket", 2**64 - 1, STREAM, 0) == errno.EAFNOSUPPORT


def test_netlink_is_route_only() -> None:
    rules = plan(NetworkMode.RESTRICTED, (8080,))
    for proto in (4, 9, 15, 16, 31):  # sock_diag, audit, ...
        assert _errno(rules, "socket", NETLINK, RAW, proto) == errno.EPROTONOSUPPORT


def test_listen_is_refused_only_where_a_restricted_network_names_no_bind_port() -> None:
    assert _errno(plan(NetworkMode.RESTRICTED, ()), "listen", 3, 5) == errno.EPERM
    assert _errno(plan(NetworkMode.RESTRICTED, (8080,)), "listen", 3, 5) is None
    assert _errno(plan(NetworkMode.UNRESTRICTED, ()), "listen", 3, 5) is None
    assert _errno(plan(NetworkMode.DENY, ()), "listen", 3, 5) is None  # Unix sockets only


def test_keyctl_may_only_join_a_new_anonymous_session_keyring() -> None:
    rules = plan(NetworkMode.RESTRICTED, ())
    assert _errno(rules, "keyctl", 1, 0) is None  # KEYCTL_JOIN_SESSION_KEYRING, NULL
    assert _errno(rules, "keyctl", 1, 0x7FFF0000) == errno.EPERM  # ... a named one
    for operation in (0, 2, 6, 11, 29, (1 << 32) | 1):  # get id, update, read, ...
        assert _errno(rules, "keyctl", operation, 0) == errno.EPERM
    assert _errno(rules, "add_key") == _errno(rules, "request_key") == errno.EPERM


@pytest.mark.parametrize(
    "syscall",
    [*seccomp.KERNEL, *seccomp.NAMESPACES, *seccomp.MOUNTS, *seccomp.SYSTEM],
)
def test_the_kernel_surface_is_refused_whatever_the_profile(syscall: str) -> None:
    for mode in NetworkMode:
        assert _errno(plan(mode, (1,)), syscall) == errno.EPERM


def test_clone_with_any_new_namespace_flag_is_refused_and_clone3_answers_enosys() -> None:
    rules = plan(NetworkMode.DENY, ())
    assert _errno(rules, "clone", 0x1200011) is None  # what fork() passes
    assert _errno(rules, "clone", 0x3D0F00) is None  # what pthread_create passes
    for bit in (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000):
        assert _errno(rules, "clone", bit | 0x11) == errno.EPERM
    assert _errno(rules, "clone3") == errno.ENOSYS


def test_terminal_injection_is_refused_on_the_low_32_bits_the_kernel_reads() -> None:
    rules = plan(NetworkMode.DENY, ())
    for cmd in (0x5412, 0x541C, (1 << 32) | 0x5412, (0xFFFF << 32) | 0x541C):
        assert _errno(rules, "ioctl", 0, cmd) == errno.EPERM
    assert _errno(rules, "ioctl", 0, 0x5401) is None  # TCGETS


def test_the_compiled_program_is_a_bpf_array_and_is_built_once() -> None:
    rules = plan(NetworkMode.RESTRICTED, ())
    program = seccomp.compile_filter(rules)
    assert program and len(program) % 8 == 0  # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k
    assert seccomp.compile_filter(rules) is program
    # It ends in returns: the last instruction is a BPF_RET (class 0x06).
    code, _jt, _jf, _k = struct.unpack("=HBBI", program[-8:])
    assert code & 0x07 == 0x06


def test_the_program_fd_reads_back_the_program_from_its_start() -> None:
    fd = seccomp.program_fd(b"x" * 100_000)
    try:
        with open(fd, "rb", closefd=False) as stream:
            assert stream.read() == b"x" * 100_000
    finally:
        os.close(fd)


def test_a_missing_libseccomp_refuses_the_call_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = _rules(tmp_path, best_effort=False)

    def missing(_rules: object) -> bytes:
        raise seccomp.FilterUnavailable("libseccomp cannot be loaded (not found)")

    monkeypatch.setattr(seccomp, "compile_filter", missing)
    with pytest.raises(SeccompUnavailableError) as caught:
        contain_mod.contain(
            rules,
            bwrap="/usr/bin/bwrap",
            executable="/bin/true",
            cwd=str(tmp_path),
            private_tmp_base=tmp_path / "tmp",
            broker_socket=None,
        )
    message = str(caught.value)
    assert "libseccomp2" in message and "best_effort" in message and str(rules.source) in message
    assert not (tmp_path / "tmp").exists() or not any((tmp_path / "tmp").iterdir())


def test_best_effort_runs_without_the_filter_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = _rules(tmp_path, best_effort=True)

    def missing(_rules: object) -> bytes:
        raise seccomp.FilterUnavailable("libseccomp cannot be loaded (not found)")

    monkeypatch.setattr(seccomp, "compile_filter", missing)
    launch = contain_mod.contain(
        rules,
        bwrap="/usr/bin/bwrap",
        executable="/bin/true",
        cwd=str(tmp_path),
        private_tmp_base=tmp_path / "tmp",
        broker_socket=None,
    )
    try:
        assert "--seccomp" not in launch.argv
        assert any(gap.startswith("seccomp: ") for gap in launch.sandbox.report.unenforced)
    finally:
        launch.close()


def test_a_contained_launch_loads_the_filter_and_disables_user_namespaces(
    tmp_path: Path,
) -> None:
    launch = contain_mod.contain(
        _rules(tmp_path, best_effort=False),
        bwrap="/usr/bin/bwrap",
        executable="/bin/true",
        cwd=str(tmp_path),
        private_tmp_base=tmp_path / "tmp",
        broker_socket=None,
    )
    try:
        argv = launch.argv[: launch.argv.index("--")]
        assert "--disable-userns" in argv
        fd = int(argv[argv.index("--seccomp") + 1])
        assert fd in launch.pass_fds
        with open(fd, "rb", closefd=False) as stream:
            assert stream.read() == seccomp.compile_filter(plan(NetworkMode.DENY, ()))
        options = launch.argv[launch.argv.index("--") + 6]
        assert options.startswith(f"keyctl={seccomp.keyctl_number()}")
    finally:
        launch.close()


def _rules(tmp_path: Path, *, best_effort: bool) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source=str(tmp_path / "t.yaml"),
        paths=(PathRule("/usr", Access.ROX, "test"),),
        network=NetworkPolicy(NetworkMode.DENY),
        env=(),
        best_effort=best_effort,
    )


def test_denials_are_plain_data() -> None:
    denial = Denial("listen", errno.EPERM)
    assert denial.conditions == ()
    assert Condition(1, 7, 5, 0xF).datum() == (0xF, 5)
    assert Condition(1, 4, 5).datum() == (5, 0)


def test_the_compiled_program_is_remembered_in_the_cache_and_read_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = plan(NetworkMode.RESTRICTED, ())
    cache = tmp_path / "cache" / "ollie"
    program = seccomp.program_for(rules, cache)
    file = cache / f"seccomp-{seccomp.digest(rules)}.bpf"
    assert file.read_bytes() == program and file.stat().st_mode & 0o777 == 0o600

    def no_compiling(_rules: object) -> bytes:
        raise AssertionError("compiled although remembered")

    monkeypatch.setattr(seccomp, "compile_filter", no_compiling)
    assert seccomp.program_for(rules, cache) == program


@pytest.mark.parametrize(
    "spoil",
    [
        lambda f: f.write_bytes(b""),
        lambda f: f.write_bytes(f.read_bytes()[:-3]),  # not whole instructions
        lambda f: f.write_bytes(f.read_bytes()[:-8] + b"\x20" + bytes(7)),  # ends in a load
        lambda f: f.write_bytes(b"\x06\x00\x00\x00\x00\x00\xff\x7f" * 5000),  # too long
        lambda f: f.chmod(0o622),  # others may write it
    ],
)
def test_a_remembered_program_that_cannot_be_trusted_is_compiled_again(
    spoil: object, tmp_path: Path
) -> None:
    rules = plan(NetworkMode.DENY, ())
    cache = tmp_path / "ollie"
    program = seccomp.program_for(rules, cache)
    file = cache / f"seccomp-{seccomp.digest(rules)}.bpf"
    spoil(file)  # type: ignore[operator]
    assert seccomp.program_for(rules, cache) == program
    assert file.read_bytes() == program


def test_each_plan_has_its_own_program() -> None:
    shapes = [plan(mode, bind) for mode in NetworkMode for bind in ((), (80,))]
    assert len({seccomp.digest(rules) for rules in shapes}) == len(set(shapes))


_PROBE = """
import ctypes.util, json, sys
def never(name):
    raise AssertionError(f"find_library({name!r}): it runs gcc and ld from PATH")
ctypes.util.find_library = never
from registry_core.sandbox import seccomp
from registry_core import trusted
if sys.argv[1] == "none":
    trusted.library_dirs = lambda: (sys.argv[2],)
    seccomp.library_dirs = trusted.library_dirs
try:
    seccomp.compile_filter(seccomp.plan(seccomp.NetworkMode.DENY, ()))
    print(json.dumps({"built": True}))
except seccomp.FilterUnavailable as exc:
    print(json.dumps({"built": False, "why": str(exc)}))
"""


@pytest.mark.parametrize("libraries", ["system", "none"])
def test_libseccomp_is_the_system_one_never_found_through_path(
    tmp_path: Path, libraries: str
) -> None:
    """A ``gcc``/``ld`` planted first on PATH (a project's .venv/bin) never runs:
    the library is taken from root's library directories, else the filter is
    unavailable (refused unless best effort)."""
    import json
    import subprocess
    import sys

    planted = tmp_path / "bin"
    planted.mkdir()
    marker = tmp_path / "ran"
    for name in ("gcc", "cc", "ld", "ldconfig"):
        (planted / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (planted / name).chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, libraries, str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{planted}:/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["built"] is (libraries == "system")
    if libraries == "none":
        assert "libseccomp.so.2 is not installed in a system library directory" in answer["why"]
    assert not marker.exists()
