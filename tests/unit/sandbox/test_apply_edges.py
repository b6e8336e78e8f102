"""``apply``: what is reported, what is refused word for word, and what a prepared ruleset enforces.

The enforcement tests prepare rulesets on this kernel and run real children
under them (``preexec``), with real TCP listeners for the port rules.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.errors import LandlockUnavailableError, SandboxError
from registry_core.sandbox import landlock
from registry_core.sandbox.apply import SandboxCache, gaps, prepare, sandbox_env
from registry_core.sandbox.landlock import PreparedSandbox
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.report import EnforcementReport, Gap
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule

ABI = landlock.abi_version()
needs_landlock = pytest.mark.skipif(ABI < 1, reason="this kernel offers no Landlock")
RUN = [
    *(p for p in ("/usr", "/bin", "/lib", "/lib64", "/etc") if os.path.exists(p)),
    *sorted({sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}),
]

TRUNCATE = Gap("truncate", "truncate(2) of files is not restricted", 3)
TCP = Gap("tcp", "TCP bind/connect restrictions are not enforced", 4, requested=True)
IOCTL = Gap("ioctl_dev", "ioctl(2) on device files is not restricted", 5)
SCOPE = Gap("scope", "signals and abstract Unix sockets outside the sandbox are not restricted", 6)
UDP = Gap("udp", "UDP and other non-TCP sockets are not restricted by Landlock")
SOCKETS = Gap(
    "unix_sockets",
    "connect() to named Unix sockets is not restricted; only the environment "
    "allowlist hides X11, D-Bus and ssh-agent",
)
SOCKETS_IN_NAMESPACES = Gap(
    "unix_sockets",
    "connect() to named Unix sockets inside paths the profile names is not "
    "restricted (every other socket is absent from the mount view)",
)


def make_rules(
    mode: NetworkMode = NetworkMode.RESTRICTED,
    *,
    bind: tuple[int, ...] = (),
    connect: tuple[int, ...] = (),
    best_effort: bool = False,
    paths: tuple[str, ...] = (),
    env: tuple[str, ...] = (),
    env_values: tuple[tuple[str, str], ...] = (),
) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source="/p/t.yaml",
        paths=tuple(PathRule(p, Access.ROX, "test") for p in paths),
        network=NetworkPolicy(mode, bind, connect),
        env=env,
        best_effort=best_effort,
        env_values=env_values,
    )


# --- gaps and refusals ------------------------------------------------------------


def test_every_gap_of_abi_1_word_for_word() -> None:
    assert gaps(make_rules(), 1) == (TRUNCATE, TCP, IOCTL, SCOPE, UDP, SOCKETS)
    assert gaps(make_rules(), 1, namespaces=True) == (
        TRUNCATE,
        TCP,
        IOCTL,
        SCOPE,
        UDP,
        SOCKETS_IN_NAMESPACES,
    )


@pytest.mark.parametrize(
    ("abi", "expected"),
    [
        (2, (TRUNCATE, TCP, IOCTL, SCOPE, UDP, SOCKETS)),
        (3, (TCP, IOCTL, SCOPE, UDP, SOCKETS)),
        (4, (IOCTL, SCOPE, UDP, SOCKETS)),
        (5, (SCOPE, UDP, SOCKETS)),
        (6, (UDP, SOCKETS)),
        (7, (UDP, SOCKETS)),
    ],
)
def test_the_gaps_close_at_their_abi(abi: int, expected: tuple[Gap, ...]) -> None:
    assert gaps(make_rules(NetworkMode.DENY), abi) == expected


def test_an_unrestricted_network_has_no_network_gaps() -> None:
    assert gaps(make_rules(NetworkMode.UNRESTRICTED), 3) == (IOCTL, SCOPE, SOCKETS)


def test_no_landlock_word_for_word() -> None:
    assert gaps(make_rules(), 0) == (
        Gap(
            "landlock",
            "the kernel offers no Landlock: no filesystem, network or IPC restriction",
            needs_abi=1,
            requested=True,
        ),
    )
    with pytest.raises(LandlockUnavailableError) as info:
        prepare(make_rules(), 0)
    assert str(info.value) == (
        "this kernel offers no Landlock (not built in, or not enabled with lsm=...), "
        "so sandboxed tools cannot run; set 'general.best_effort: true' in /p/t.yaml "
        "to run tools anyway (only no_new_privs is applied)"
    )


@pytest.mark.parametrize("abi", [1, 3])
def test_what_an_old_abi_cannot_enforce_word_for_word(abi: int) -> None:
    with pytest.raises(LandlockUnavailableError) as info:
        prepare(make_rules(), abi)
    assert str(info.value) == (
        f"profile 't' asks for what this kernel (Landlock ABI {abi}) cannot enforce: "
        "TCP bind/connect restrictions are not enforced (needs Landlock ABI 4); "
        "set 'general.best_effort: true' in /p/t.yaml to run tools anyway"
    )


def test_two_fatal_gaps_are_joined_by_semicolons() -> None:
    from registry_core.sandbox.apply import _refusal

    fatal = [Gap("a", "first", 4, True), Gap("b", "second", 5, True)]
    assert str(_refusal(make_rules(), 2, fatal)) == (
        "profile 't' asks for what this kernel (Landlock ABI 2) cannot enforce: "
        "first (needs Landlock ABI 4); second (needs Landlock ABI 5); "
        "set 'general.best_effort: true' in /p/t.yaml to run tools anyway"
    )


def test_best_effort_runs_with_what_the_abi_offers_and_reports_the_rest() -> None:
    sandbox = prepare(make_rules(best_effort=True), 0)
    assert (sandbox.enforcing, sandbox.report.abi) == (False, 0)
    assert sandbox.report.gaps == gaps(make_rules(), 0)
    if ABI >= 3:
        with prepare(make_rules(best_effort=True), 3) as old:
            assert old.enforcing
            assert old.report.gaps == (TCP, IOCTL, SCOPE, UDP, SOCKETS)


# --- prepared rulesets, enforced --------------------------------------------------


def _run(sandbox: PreparedSandbox, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, *args],
        preexec_fn=sandbox.preexec,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    """Two TCP ports on 127.0.0.1 that accept connections."""
    made = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    yield made[0].getsockname()[1], made[1].getsockname()[1]
    for server in made:
        server.close()


CONNECT = """
import socket, sys
for port in sys.argv[1:]:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()
        print(port, "connected")
    except OSError as exc:
        print(port, exc.errno)
"""

BIND = """
import socket, sys
for port in sys.argv[1:]:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", int(port)))
            print(port, "bound")
        except OSError as exc:
            print(port, exc.errno)
"""


def _free_ports() -> tuple[int, int]:
    found = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            found.append(s.getsockname()[1])
    return found[0], found[1]


@needs_landlock
def test_a_restricted_network_allows_exactly_its_ports(listeners: tuple[int, int]) -> None:
    if ABI < 4:
        pytest.skip("TCP rules need Landlock ABI 4")
    allowed, other = listeners
    free, taken = _free_ports()
    rules = make_rules(connect=(allowed,), bind=(free,), paths=tuple(RUN))
    with prepare(rules) as sandbox:
        assert sandbox.report.abi == ABI  # detected when not given
        done = _run(sandbox, CONNECT, str(allowed), str(other))
        assert done.stdout == f"{allowed} connected\n{other} {errno.EACCES}\n", done.stderr
        done = _run(sandbox, BIND, str(free), str(taken))
        assert done.stdout == f"{free} bound\n{taken} {errno.EACCES}\n", done.stderr


@needs_landlock
def test_a_denied_network_connects_nowhere(listeners: tuple[int, int]) -> None:
    if ABI < 4:
        pytest.skip("TCP rules need Landlock ABI 4")
    allowed, _ = listeners
    rules = make_rules(NetworkMode.DENY, connect=(allowed,), paths=tuple(RUN))
    with prepare(rules, ABI) as sandbox:
        done = _run(sandbox, CONNECT, str(allowed))
        assert done.stdout == f"{allowed} {errno.EACCES}\n", done.stderr


@needs_landlock
def test_an_unrestricted_network_is_not_handled(listeners: tuple[int, int]) -> None:
    allowed, other = listeners
    rules = make_rules(NetworkMode.UNRESTRICTED, paths=tuple(RUN))
    with prepare(rules, ABI) as sandbox:
        done = _run(sandbox, CONNECT, str(allowed), str(other))
        assert done.stdout == f"{allowed} connected\n{other} connected\n", done.stderr
        free, _ = _free_ports()
        done = _run(sandbox, BIND, str(free))
        assert done.stdout == f"{free} bound\n", done.stderr


@needs_landlock
def test_path_rules_are_added_with_their_access(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    rules = make_rules(NetworkMode.UNRESTRICTED, paths=(*RUN, str(tmp_path), "/nonexistent"))
    with prepare(rules, ABI) as sandbox:
        assert [(s.path, s.reason) for s in sandbox.report.skipped] == [
            ("/nonexistent", "does not exist")
        ]
        script = "import sys; print(open(sys.argv[1]).read()); open(sys.argv[1], 'w')"
        done = _run(sandbox, script, str(tmp_path / "f"))
        assert done.stdout == "x\n"
        assert "PermissionError" in done.stderr


@needs_landlock
def test_abi_1_builds_a_ruleset_that_denies_what_no_rule_allows(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    rules = make_rules(NetworkMode.UNRESTRICTED, paths=tuple(RUN))
    with prepare(rules, 1) as sandbox:
        assert (sandbox.enforcing, sandbox.report.abi) == (True, 1)
        script = "import sys; open(sys.argv[1])"
        done = _run(sandbox, script, str(tmp_path / "f"))
        assert "PermissionError" in done.stderr


@needs_landlock
def test_children_may_not_signal_processes_outside_the_sandbox() -> None:
    if ABI < 6:
        pytest.skip("scoping needs Landlock ABI 6")
    script = """
import os, sys
for pid in (int(sys.argv[1]), os.getpid()):
    try:
        os.kill(pid, 0)
        print("signalled")
    except OSError as exc:
        print(exc.errno)
"""
    outside = subprocess.Popen(["sleep", "60"])
    try:
        with prepare(make_rules(NetworkMode.UNRESTRICTED, paths=tuple(RUN)), ABI) as sandbox:
            done = _run(sandbox, script, str(outside.pid))
        assert done.stdout == f"{errno.EPERM}\nsignalled\n", done.stderr
    finally:
        outside.kill()
        outside.wait()


@needs_landlock
def test_prepare_reports_the_socket_gap_of_a_call_in_namespaces() -> None:
    if ABI < 6:
        pytest.skip("older ABIs have more gaps")
    rules = make_rules(NetworkMode.UNRESTRICTED)
    with prepare(rules, ABI, namespaces=True) as sandbox:
        assert sandbox.report.gaps == (SOCKETS_IN_NAMESPACES,)
    with prepare(rules, ABI) as sandbox:
        assert sandbox.report.gaps == (SOCKETS,)


@needs_landlock
def test_a_rule_the_kernel_refuses_is_an_error_word_for_word() -> None:
    # A namespace file lives on nsfs, which Landlock refuses to hold a rule for.
    rules = make_rules(NetworkMode.UNRESTRICTED, paths=("/proc/self/ns/net",))
    with pytest.raises(SandboxError) as info:
        prepare(rules, ABI)
    assert str(info.value) == (
        "cannot add a Landlock rule: [Errno 77] File descriptor in bad state"
    )
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EBADFD


def _lowest_free_descriptor() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


@needs_landlock
def test_a_ruleset_that_cannot_be_created_is_an_error_word_for_word() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (_lowest_free_descriptor(), hard))
    try:
        with pytest.raises(SandboxError) as info:
            prepare(make_rules(NetworkMode.UNRESTRICTED), ABI)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert str(info.value) == "cannot create the Landlock ruleset: [Errno 24] Too many open files"
    assert isinstance(info.value.__cause__, OSError)


# --- the environment ----------------------------------------------------------------


def test_only_a_trailing_star_is_a_pattern() -> None:
    base = {"LC_A": "1", "LC_?": "2", "AxB": "3", "A*B": "4", "X": "5", "XY": "6"}
    env = sandbox_env(make_rules(env=("LC_?", "A*B", "X")), base, always=())
    assert env == {"LC_?": "2", "A*B": "4", "X": "5"}


def test_set_values_win_over_the_base_environment() -> None:
    rules = make_rules(env=("LANG",), env_values=(("LANG", "C"), ("NEW", "v")))
    env = sandbox_env(rules, {"LANG": "de_DE.UTF-8", "OLLIE_TOOLS_PATH": "/t"})
    assert env == {"LANG": "C", "NEW": "v", "OLLIE_TOOLS_PATH": "/t"}


# --- the cache ------------------------------------------------------------------------


def test_the_cache_evicts_the_least_recently_used() -> None:
    cache = SandboxCache(max_entries=2, abi=0)
    one, two, three = (make_rules(best_effort=True, paths=(p,)) for p in ("/a", "/b", "/c"))
    first, second = cache.get(one), cache.get(two)
    assert cache.get(one) is first  # now the most recently used
    cache.get(three)
    assert len(cache) == 2
    assert second.closed and not first.closed
    assert cache.get(one) is first
    cache.close()
    assert first.closed


def test_the_cache_holds_32_by_default_and_at_least_one() -> None:
    cache = SandboxCache(abi=0)
    made = [cache.get(make_rules(best_effort=True, paths=(f"/{n}",))) for n in range(33)]
    assert len(cache) == 32
    assert [s.closed for s in made] == [True] + [False] * 32
    cache.close()
    single = SandboxCache(max_entries=1, abi=0)
    first = single.get(make_rules(best_effort=True, paths=("/a",)))
    assert single.get(make_rules(best_effort=True, paths=("/a",))) is first
    assert len(single) == 1
    with pytest.raises(ValueError, match=r"\Amax_entries must be at least 1\Z"):
        SandboxCache(max_entries=0)


def test_the_cache_detects_the_abi_once() -> None:
    cache = SandboxCache()
    assert cache.abi == ABI
    given = SandboxCache(abi=0)
    assert given.abi == 0
    with pytest.raises(LandlockUnavailableError):
        given.get(make_rules())  # the given ABI, not this kernel's, decides


def test_the_report_says_each_gap_as_feature_and_reason() -> None:
    sandbox = prepare(make_rules(NetworkMode.UNRESTRICTED, best_effort=True), 0)
    assert sandbox.report.unenforced == (
        "landlock: the kernel offers no Landlock: no filesystem, network or IPC restriction",
    )
    assert EnforcementReport(7, True, (UDP, SOCKETS)).unenforced == (
        "udp: UDP and other non-TCP sockets are not restricted by Landlock",
        "unix_sockets: connect() to named Unix sockets is not restricted; only the environment "
        "allowlist hides X11, D-Bus and ssh-agent",
    )
