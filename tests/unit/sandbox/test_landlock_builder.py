"""The Landlock binding itself, driven directly on this kernel (registry_core.sandbox.landlock).

``RulesetBuilder`` and ``PreparedSandbox`` with real rulesets and real child
processes: which rights a rule really grants (a read-only rule that let a
child write would be the sandbox failing open), what is skipped and why,
TCP port rules, and that a closed or finished ruleset fails closed.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.errors import SandboxError
from registry_core.sandbox import landlock
from registry_core.sandbox.landlock import (
    FILE_ONLY_ACCESS,
    MAX_KNOWN_ABI,
    FsAccess,
    NetAccess,
    PreparedSandbox,
    RulesetBuilder,
    Scope,
    abi_version,
    fs_access_for_abi,
    net_access_for_abi,
    no_landlock_sandbox,
    scopes_for_abi,
)
from registry_core.sandbox.report import Gap, SkippedPath

ABI = abi_version()
SYSTEM = [p for p in ("/usr", "/bin", "/lib", "/lib64", "/etc") if os.path.exists(p)]
PYTHON = sorted({sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))})
READ = FsAccess.READ_FILE | FsAccess.READ_DIR
RUN = READ | FsAccess.EXECUTE


@pytest.fixture(autouse=True)
def _needs_landlock() -> None:
    if ABI < 1:
        if os.environ.get("CI") == "true":
            pytest.fail("this kernel offers no Landlock, but CI must test it for real")
        pytest.skip("this kernel offers no Landlock")


@pytest.fixture
def builder() -> Iterator[RulesetBuilder]:
    made = RulesetBuilder(ABI, fs_access_for_abi(ABI), net_access_for_abi(ABI))
    for path in (*SYSTEM, *PYTHON):
        made.add_path(path, RUN)
    yield made
    made.close()


def run(sandbox: PreparedSandbox, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", script, "sh", *args],
        preexec_fn=sandbox.preexec,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_read_only_directory_rule_grants_reading_only(
    builder: RulesetBuilder, tmp_path: Path
) -> None:
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "f").write_text("inside\n")
    assert builder.add_path(str(tmp_path / "ro"), READ) == READ
    with builder.finish() as sandbox:
        done = run(sandbox, 'cat "$1/f" && ls "$1" && echo x > "$1/new"', str(tmp_path / "ro"))
    assert done.stdout == "inside\nf\n"
    assert "Permission denied" in done.stderr
    assert not (tmp_path / "ro" / "new").exists()


def test_a_file_rule_carries_only_file_rights(builder: RulesetBuilder, tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("old\n")
    granted = builder.add_path(str(target), fs_access_for_abi(ABI))
    assert granted == fs_access_for_abi(ABI) & FILE_ONLY_ACCESS
    with builder.finish() as sandbox:
        done = run(sandbox, 'echo new >> "$1" && cat "$1"', str(target))
    assert done.stdout == "old\nnew\n"


def test_a_rule_with_no_right_for_its_file_is_skipped_with_the_reason(
    builder: RulesetBuilder, tmp_path: Path
) -> None:
    target = tmp_path / "f"
    target.write_text("")
    assert builder.add_path(str(target), FsAccess.READ_DIR | FsAccess.MAKE_REG) is None
    assert builder.add_path(str(tmp_path / "gone"), READ) is None
    assert builder.add_path(str(target / "below"), READ) is None
    with builder.finish((Gap("udp", "not filtered"),)) as sandbox:
        assert sandbox.report.skipped == (
            SkippedPath(str(target), "no applicable rights for this path"),
            SkippedPath(str(tmp_path / "gone"), "does not exist"),
            SkippedPath(str(target / "below"), os.strerror(errno.ENOTDIR)),
        )
        assert sandbox.report.gaps == (Gap("udp", "not filtered"),)
        assert (sandbox.report.abi, sandbox.report.enforced, sandbox.abi) == (ABI, True, ABI)


def test_rights_the_ruleset_does_not_handle_are_not_granted(tmp_path: Path) -> None:
    with RulesetBuilder(ABI, READ | FsAccess.EXECUTE) as narrow:
        assert narrow.add_path(str(tmp_path), fs_access_for_abi(ABI)) == READ | FsAccess.EXECUTE
        assert narrow.add_path(str(tmp_path), FsAccess.WRITE_FILE) is None


def test_what_a_ruleset_handles_is_masked_to_the_abi() -> None:
    everything_fs = FsAccess((1 << 16) - 1)
    with RulesetBuilder(1, everything_fs, NetAccess(3), Scope(3)) as old:
        assert old.abi == 1
        assert old.handled_fs == fs_access_for_abi(1)
        assert (old.handled_net, old.scoped) == (NetAccess(0), Scope(0))
    if ABI < MAX_KNOWN_ABI:
        return  # an older kernel would refuse the newer rights
    newest = ABI + 5
    with RulesetBuilder(newest, everything_fs, NetAccess(3), Scope(3)) as future:
        # A newer kernel than this module knows: rights up to MAX_KNOWN_ABI.
        assert future.abi == newest
        assert future.handled_fs == fs_access_for_abi(MAX_KNOWN_ABI) & everything_fs
        assert future.handled_net == net_access_for_abi(MAX_KNOWN_ABI)
        assert future.scoped == scopes_for_abi(MAX_KNOWN_ABI)


@pytest.mark.skipif(ABI < 4, reason="TCP rules need Landlock ABI 4")
def test_tcp_ports_are_checked_and_enforced(builder: RulesetBuilder) -> None:
    with pytest.raises(ValueError, match=r"^TCP port out of range: 65536$"):
        builder.add_port(65536, NetAccess.CONNECT_TCP)
    with pytest.raises(ValueError, match=r"^TCP port out of range: -1$"):
        builder.add_port(-1, NetAccess.CONNECT_TCP)
    with pytest.raises(
        ValueError, match=r"^TCP rules need network rights handled by the ruleset \(ABI 4\)$"
    ):
        builder.add_port(443, NetAccess(0))
    servers = []
    for _ in range(2):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        servers.append(server)
    allowed, other = (s.getsockname()[1] for s in servers)
    try:
        builder.add_port(allowed, NetAccess.CONNECT_TCP)
        builder.add_port(65535, NetAccess.BIND_TCP)
        builder.add_port(0, NetAccess.BIND_TCP)  # the lowest port accepted: "any free one"
        probe = (
            "import socket, sys\n"
            "for port in sys.argv[1:]:\n"
            "    s = socket.socket()\n"
            "    try:\n"
            "        s.connect(('127.0.0.1', int(port))); print('ok')\n"
            "    except OSError as exc:\n"
            "        print(exc.errno)\n"
        )
        with builder.finish() as sandbox:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", probe, str(allowed), str(other)],
                preexec_fn=sandbox.preexec,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        assert done.stdout.split() == ["ok", str(errno.EACCES)], done.stderr
    finally:
        for server in servers:
            server.close()


def test_tcp_rules_need_a_ruleset_handling_the_network() -> None:
    with RulesetBuilder(ABI, READ) as builder, pytest.raises(ValueError, match="ABI 4"):
        builder.add_port(443, NetAccess.CONNECT_TCP | NetAccess.BIND_TCP)


def test_a_finished_or_closed_builder_refuses_more_rules(tmp_path: Path) -> None:
    builder = RulesetBuilder(ABI, READ)
    sandbox = builder.finish()
    for use in (
        lambda: builder.add_path(str(tmp_path), READ),
        lambda: builder.add_port(1, NetAccess.CONNECT_TCP),
        builder.finish,
    ):
        with pytest.raises(OSError, match="already finished or closed") as caught:
            use()
        assert caught.value.errno == errno.EBADF
        assert caught.value.strerror == "ruleset builder already finished or closed"
    builder.close()  # nothing left to close; the sandbox keeps its descriptor
    assert sandbox.fd is not None
    assert os.fstat(sandbox.fd)
    sandbox.close()
    closed = RulesetBuilder(ABI, READ)
    fd = closed._fd
    closed.close()
    closed.close()
    assert fd is not None
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_a_closed_sandbox_fails_closed_and_says_so(builder: RulesetBuilder) -> None:
    sandbox = builder.finish()
    fd = sandbox.fd
    assert sandbox.enforcing
    assert sandbox.closed is False
    assert repr(sandbox) == f"<PreparedSandbox abi={ABI} fd={fd}>"
    sandbox.close()
    sandbox.close()
    assert sandbox.closed
    assert repr(sandbox) == f"<PreparedSandbox abi={ABI} closed>"
    with pytest.raises(OSError, match="sandbox ruleset was closed") as caught:
        sandbox.preexec()
    assert (caught.value.errno, caught.value.strerror) == (
        errno.EBADF,
        "sandbox ruleset was closed",
    )
    assert fd is not None
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_the_stand_in_has_no_ruleset_and_says_so() -> None:
    sandbox = no_landlock_sandbox((Gap("landlock", "missing"),))
    assert (sandbox.fd, sandbox.enforcing, sandbox.abi) == (None, False, 0)
    assert sandbox.report.gaps == (Gap("landlock", "missing"),)
    assert repr(sandbox) == "<PreparedSandbox abi=0 fd=None>"
    sandbox.close()
    assert sandbox.closed


def test_a_failing_system_call_raises_its_errno() -> None:
    with pytest.raises(OSError, match="Bad file descriptor") as caught:
        landlock._libc().call(landlock._SYS_LANDLOCK_RESTRICT_SELF, -1, 0)
    assert (caught.value.errno, caught.value.strerror) == (
        errno.EBADF,
        os.strerror(errno.EBADF),
    )


def test_the_abi_is_the_kernels_and_other_errors_are_sandbox_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert abi_version() == ABI >= 1

    class Refusing:
        def __init__(self, code: int) -> None:
            self.code = code

        def call(self, number: int, *args: int) -> int:
            assert (number, args) == (444, (0, 0, 1))
            raise OSError(self.code, os.strerror(self.code))

    for code in (errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        monkeypatch.setattr(landlock, "_libc", lambda c=code: Refusing(c))
        assert abi_version() == 0
    monkeypatch.setattr(landlock, "_libc", lambda: Refusing(errno.EINVAL))
    with pytest.raises(SandboxError) as caught:
        abi_version()
    assert str(caught.value) == (
        f"cannot query the Landlock ABI version: [Errno {errno.EINVAL}] {os.strerror(errno.EINVAL)}"
    )


def test_the_ruleset_descriptor_never_reaches_the_tool(builder: RulesetBuilder) -> None:
    # Even handed over on purpose, the child closes it before the tool runs:
    # a tool holding it could add rules to every later call's ruleset.
    with builder.finish() as sandbox:
        assert sandbox.fd is not None
        probe = (
            "import os, sys\n"
            "try:\n"
            "    os.fstat(int(sys.argv[1])); print('open')\n"
            "except OSError:\n"
            "    print('closed')\n"
        )
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", probe, str(sandbox.fd)],
            preexec_fn=sandbox.preexec,
            pass_fds=(sandbox.fd,),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.stdout == "closed\n", done.stderr


def test_preexec_restricts_the_child_and_refuses_once_closed(
    builder: RulesetBuilder, tmp_path: Path
) -> None:
    # Called here in-process only on a closed stand-in (it raises before any
    # system call), then for real in children: no_new_privs, the Landlock
    # domain, and the ruleset descriptor closed before the tool runs.
    stand_in = no_landlock_sandbox()
    stand_in.close()
    with pytest.raises(OSError, match="sandbox ruleset was closed"):
        stand_in.preexec()
    (tmp_path / "rw").mkdir()
    builder.add_path("/proc", READ)
    builder.add_path(str(tmp_path / "rw"), fs_access_for_abi(ABI))
    with builder.finish() as sandbox:
        fd = sandbox.fd
        assert fd is not None
        done = subprocess.run(
            [
                "/bin/sh",
                "-c",
                'grep NoNewPrivs /proc/self/status; echo a > "$1/ok"; echo b > "$2";'
                ' [ -e /proc/self/fd/"$3" ] && echo fd-open || echo fd-closed',
                "sh",
                str(tmp_path / "rw"),
                str(tmp_path / "outside"),
                str(fd),
            ],
            preexec_fn=sandbox.preexec,
            pass_fds=(fd,),
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.stdout.split() == ["NoNewPrivs:", "1", "fd-closed"], done.stderr
        assert (tmp_path / "rw" / "ok").read_text() == "a\n"
        assert not (tmp_path / "outside").exists()
        # The parent keeps its descriptor: the sandbox serves the next call too.
        again = run(sandbox, 'cat "$1/ok"', str(tmp_path / "rw"))
        assert again.stdout == "a\n"


def test_without_landlock_the_builder_refuses_by_errno() -> None:
    with pytest.raises(OSError, match="not available") as caught:
        RulesetBuilder(0, READ)
    assert (caught.value.errno, caught.value.strerror) == (
        errno.EOPNOTSUPP,
        "Landlock is not available in this kernel",
    )


def test_a_fifo_rule_is_added_without_blocking(builder: RulesetBuilder, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert builder.add_path(str(fifo), READ) == FsAccess.READ_FILE


@pytest.mark.skipif(ABI < 6, reason="IPC scopes need Landlock ABI 6")
def test_a_signal_scope_keeps_the_child_from_signalling_outside(builder: RulesetBuilder) -> None:
    outside = subprocess.Popen(["sleep", "60"])
    try:
        scoped = RulesetBuilder(ABI, fs_access_for_abi(ABI), scoped=Scope.SIGNAL)
        for path in (*SYSTEM, *PYTHON):
            scoped.add_path(path, RUN)
        with scoped.finish() as sandbox:
            done = run(sandbox, 'kill -0 "$1" && echo reached', str(outside.pid))
        assert "reached" not in done.stdout
        assert done.returncode != 0
        with builder.finish() as open_sandbox:
            assert run(open_sandbox, 'kill -0 "$1" && echo reached', str(outside.pid)).stdout == (
                "reached\n"
            )
    finally:
        outside.kill()
        outside.wait()
