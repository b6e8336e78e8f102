"""``contain``: finding bwrap, the private /tmp, the exec step's arguments, and real launches.

The launches run the real ``bwrap`` and the real exec step on this kernel; a
test skips only when bwrap or Landlock is missing.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from registry_core.errors import NamespacesUnavailableError, SandboxError
from registry_core.sandbox import execstep, landlock, seccomp
from registry_core.sandbox.apply import ACCESS_RIGHTS, gaps, prepare
from registry_core.sandbox.contain import (
    Launch,
    contain,
    exec_step,
    find_bwrap,
    interpreter,
    make_private_tmp,
    missing_bwrap_gap,
    remove_tree,
    unavailable_error,
)
from registry_core.sandbox.landlock import FILE_ONLY_ACCESS, PreparedSandbox
from registry_core.sandbox.mounts import View, plan_view
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.report import EnforcementReport, Gap
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule
from registry_core.trusted import find_trusted

BWRAP = find_trusted("bwrap")
ABI = landlock.abi_version()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="needs bubblewrap (apt-get install bwrap)")
needs_landlock = pytest.mark.skipif(ABI < 1, reason="needs Landlock")
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/etc")


def _rules(
    *paths: tuple[str, Access],
    mode: NetworkMode = NetworkMode.DENY,
    best_effort: bool = False,
) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source="/p/t.yaml",
        paths=tuple(PathRule(path, access, "test") for path, access in paths),
        network=NetworkPolicy(mode),
        env=(),
        best_effort=best_effort,
    )


def _system(*more: tuple[str, Access], mode: NetworkMode = NetworkMode.DENY) -> EffectiveRules:
    rules = [(p, Access.ROX) for p in SYSTEM if os.path.lexists(p)]
    return _rules(*rules, *more, mode=mode)


def _executable(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


# --- find_bwrap, the gap and the refusal ---------------------------------------------


@needs_bwrap
def test_find_bwrap_ignores_a_bwrap_first_on_the_dispatchers_path(tmp_path: Path) -> None:
    _executable(tmp_path / "bin", "bwrap")
    assert find_bwrap({"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}) == BWRAP


@needs_bwrap
@pytest.mark.parametrize("env", [{}, {"PATH": ""}, {"PATH": "/nonexistent"}])
def test_find_bwrap_finds_the_system_directories_whatever_the_path(env: dict[str, str]) -> None:
    assert find_bwrap(env) == BWRAP


@needs_bwrap
def test_find_bwrap_ignores_this_process_path_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _executable(tmp_path / "bin", "bwrap")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_bwrap({"PATH": str(tmp_path / "bin")}) == BWRAP


def test_the_missing_bwrap_gap_word_for_word() -> None:
    assert missing_bwrap_gap() == Gap(
        "namespaces",
        "bwrap (bubblewrap) is not installed in a system directory Ollie trusts: the "
        "session D-Bus, X11, ssh-agent, tmux and every other socket in /tmp and /run/user "
        "stay reachable, the real /tmp is shared, and processes may outlive the call",
        needs_abi=None,
        requested=True,
    )


def test_the_refusal_without_bwrap_word_for_word() -> None:
    error = unavailable_error(_rules())
    assert isinstance(error, NamespacesUnavailableError)
    assert str(error) == (
        "sandboxed tools run in namespaces built by bwrap, which is not installed in a "
        "system directory Ollie trusts (/usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin; "
        "the file and its directories root's, writable by root alone): "
        "install the 'bubblewrap' package (apt/dnf install bubblewrap); or set "
        "'general.best_effort: true' in /p/t.yaml to run with Landlock only"
    )


# --- the exec step -------------------------------------------------------------------


def test_the_python_exec_step_needs_its_interpreter_and_the_system_directories() -> None:
    exe, needs = interpreter()
    assert exe == os.path.realpath(sys.executable)
    expected = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", sys.base_prefix, exe]
    assert needs == tuple(dict.fromkeys(expected))
    assert needs[:6] == ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin")


def test_the_exec_step_is_the_python_source_under_an_isolated_interpreter() -> None:
    python, needs = interpreter()
    source = Path(execstep.__file__).read_text(encoding="utf-8")
    assert exec_step() == ([python, "-I", "-S", "-c", source, "-"], (), needs)


# --- the private /tmp ----------------------------------------------------------------


def test_the_private_tmp_base_is_made_0700_with_its_parents(tmp_path: Path) -> None:
    base = tmp_path / "a" / "b"
    old = os.umask(0)
    try:
        made = Path(make_private_tmp(base))
    finally:
        os.umask(old)
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    assert made.parent == base
    assert made.name.startswith("call-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_each_call_gets_its_own_private_tmp(tmp_path: Path) -> None:
    assert make_private_tmp(tmp_path) != make_private_tmp(tmp_path)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory to uid 1")
def test_a_base_of_another_user_is_refused_word_for_word(tmp_path: Path) -> None:
    base = tmp_path / "theirs"
    base.mkdir(mode=0o700)
    os.chown(base, 1, 1)
    with pytest.raises(SandboxError) as info:
        make_private_tmp(base)
    assert str(info.value) == (
        f"{base} is not a directory of this user; refusing to put private /tmp there"
    )
    assert list(base.iterdir()) == []


def test_a_base_that_cannot_be_made_is_refused_word_for_word(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    base = tmp_path / "file" / "sub"
    with pytest.raises(SandboxError) as info:
        make_private_tmp(base)
    assert str(info.value) == (
        f"cannot create the call's private /tmp under {base}: Not a directory"
    )
    assert isinstance(info.value.__cause__, NotADirectoryError)


def test_remove_tree_removes_what_the_tool_locked_itself_out_of(
    shared_dir: Path, unprivileged: Callable[[Callable[[], None]], None]
) -> None:
    tree = shared_dir / "call"

    def lock_and_remove() -> None:
        (tree / "a" / "b").mkdir(parents=True)
        (tree / "a" / "b" / "f").write_text("x")
        (tree / "a" / "b").chmod(0)
        (tree / "a").chmod(0)
        tree.chmod(0)
        remove_tree(str(tree))
        if os.path.lexists(tree):
            raise AssertionError("left behind")

    unprivileged(lock_and_remove)
    assert not tree.exists()
    remove_tree(str(shared_dir / "absent"))  # nothing there: no error


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to leave a directory of another user")
def test_remove_tree_goes_on_past_a_directory_it_may_not_chmod(
    shared_dir: Path, unprivileged: Callable[[Callable[[], None]], None]
) -> None:
    tree = shared_dir / "call"
    tree.mkdir()
    (tree / "theirs").mkdir(mode=0o755)  # root's: the unprivileged child may not chmod it
    os.chown(tree, 65534, 65534)

    def remove() -> None:
        (tree / "mine").mkdir()
        (tree / "mine" / "f").write_text("x")
        (tree / "mine").chmod(0)
        remove_tree(str(tree))
        if os.path.lexists(tree):
            raise AssertionError("left behind")

    unprivileged(remove)


def test_remove_tree_leaves_a_symlinked_directory_and_its_mode_alone(tmp_path: Path) -> None:
    # A tool may leave a symlink to any directory in its /tmp; removing the
    # tree must neither fail on it nor chmod (or empty) its target.
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    (target / "keep").write_text("x")
    target.chmod(0o555)
    tree = Path(make_private_tmp(tmp_path / "base"))
    (tree / "sub").mkdir()
    (tree / "sub" / "link").symlink_to(target)
    (tree / "link").symlink_to(target)
    remove_tree(str(tree))
    assert not os.path.lexists(tree)
    assert stat.S_IMODE(target.stat().st_mode) == 0o555
    assert (target / "keep").read_text() == "x"


# --- Launch.check and Launch.close ---------------------------------------------------


def _launch(tmp_path: Path, sandbox: PreparedSandbox | None = None) -> tuple[Launch, int]:
    read, write = os.pipe2(os.O_CLOEXEC)
    private = make_private_tmp(tmp_path / "base")
    view = View((), (), (), ())
    if sandbox is None:
        sandbox = PreparedSandbox(None, EnforcementReport(0, False))
    return Launch(["x"], (), sandbox, view, private, read, write), write


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_check_passes_on_the_status_byte(tmp_path: Path) -> None:
    launch, write = _launch(tmp_path)
    os.write(write, b"1")
    launch.check(b"anything")
    launch.close()


@pytest.mark.parametrize(
    ("status", "stderr", "message"),
    [
        (
            b"",
            b"  bwrap: No permissions to create new namespace\n",
            "bwrap: No permissions to create new namespace",
        ),
        (b"0", b"bad \xff byte\n", "bad \ufffd byte"),
        (b"", b" \n", "no message"),
        (b"01", b"", "no message"),
    ],
)
def test_check_refuses_without_the_status_byte_word_for_word(
    tmp_path: Path, status: bytes, stderr: bytes, message: str
) -> None:
    launch, write = _launch(tmp_path)
    if status:
        os.write(write, status)
    with pytest.raises(SandboxError) as info:
        launch.check(stderr)
    assert str(info.value) == f"the sandbox could not be set up (bwrap): {message}"
    launch.close()


def test_check_does_not_wait_for_a_writer_still_open(tmp_path: Path) -> None:
    # The write end stays open here (a child could hold it): check must not block.
    launch, _ = _launch(tmp_path)
    with pytest.raises(SandboxError):
        launch.check(b"")
    launch.close()


@needs_landlock
def test_close_closes_everything_once(tmp_path: Path) -> None:
    sandbox = prepare(_rules((str(tmp_path), Access.RO)), ABI)
    launch, write = _launch(tmp_path, sandbox)
    read = launch._status_read
    launch.close()
    assert not _open(read) and not _open(write)
    assert sandbox.closed
    assert not os.path.exists(launch.private_tmp)
    # A second close closes nothing again (the numbers may belong to new files now).
    spare = os.open(os.devnull, os.O_RDONLY)
    os.dup2(spare, read)
    os.dup2(spare, write)
    try:
        launch.close()
        assert _open(read) and _open(write)
    finally:
        for fd in {spare, read, write}:
            os.close(fd)


def test_close_ignores_a_descriptor_already_closed(tmp_path: Path) -> None:
    launch, write = _launch(tmp_path)
    read = launch._status_read
    os.close(write)
    launch.close()  # EBADF on the write end is not an error
    assert not _open(read)
    assert not os.path.exists(launch.private_tmp)


def test_close_closes_a_status_pipe_on_descriptor_0(tmp_path: Path) -> None:
    # A dispatcher started without stdin gets descriptor 0 from pipe2().
    saved = os.dup(0)
    read, write = os.pipe()
    try:
        os.dup2(read, 0)
        os.close(read)
        launch = Launch(
            ["x"],
            (),
            PreparedSandbox(None, EnforcementReport(0, False)),
            View((), (), (), ()),
            make_private_tmp(tmp_path / "base"),
            0,
            write,
        )
        launch.close()
        assert not _open(0) and not _open(write)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def test_close_skips_descriptors_it_never_had(tmp_path: Path) -> None:
    private = make_private_tmp(tmp_path / "base")
    sandbox = PreparedSandbox(None, EnforcementReport(0, False))
    launch = Launch(["x"], (), sandbox, View((), (), (), ()), private, -1, -1)
    launch.close()
    assert not os.path.exists(private)


# --- the exec step's arguments and real launches --------------------------------------


def _run(launch: Launch, *tool_args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*launch.argv, *tool_args],
        pass_fds=launch.pass_fds,
        capture_output=True,
        cwd=cwd,
        check=False,
        timeout=60,
    )


@needs_bwrap
@needs_landlock
def test_a_launch_has_exactly_these_arguments(tmp_path: Path) -> None:
    rules = _system(
        ("/proc", Access.RO),
        ("/proc/self/status", Access.RO),
        ("/proc/no-such-entry", Access.RO),
        ("/proc/sys", Access.RW),
        ("/tmp", Access.RW),
    )
    base = tmp_path / "base"
    with socket.socket(socket.AF_UNIX) as listening:
        sock = tmp_path / "elevate.sock"
        listening.bind(str(sock))
        launch = contain(
            rules,
            bwrap=str(BWRAP),
            executable="/usr/bin/true",
            cwd=str(tmp_path),
            private_tmp_base=base,
            broker_socket=str(sock),
        )
    try:
        assert launch.private_tmp.startswith(f"{base}/call-")
        step, step_fds, needs = exec_step()
        view = plan_view(
            rules,
            cwd=str(tmp_path),
            private_tmp=launch.private_tmp,
            broker_socket=str(sock),
            helper_paths=needs,
        )
        assert launch.view == view
        assert (str(sock), str(sock)) in zip(view.args[1:], view.args[2:], strict=False)
        # Landlock holds the view's rules on host paths: /tmp is the private one.
        assert (launch.private_tmp, Access.RW) in [(r.path, r.access) for r in view.landlock]
        assert launch.sandbox.enforcing and launch.sandbox.abi == ABI
        assert launch.sandbox.report.gaps == gaps(rules, ABI, namespaces=True)
        ruleset = launch.sandbox.fd
        assert ruleset is not None
        status = launch._status_write
        handled = landlock.fs_access_for_abi(min(ABI, landlock.MAX_KNOWN_ABI))
        read = int((landlock.FsAccess.READ_FILE | landlock.FsAccess.READ_DIR) & handled)
        write_all = int(ACCESS_RIGHTS[Access.RW] & handled)
        assert launch.argv == [
            str(BWRAP),
            "--unshare-user",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--disable-userns",
            "--unshare-net",
            "--seccomp",
            str(launch._filter),
            *view.args,
            "--",
            *step[:-1],
            f"keyctl={seccomp.keyctl_number()}",  # the exec step's options
            str(status),
            str(ruleset),
            "3",
            str(read),
            "/proc",
            str(write_all),
            "/proc/sys",
            str(int(landlock.FsAccess.READ_FILE & FILE_ONLY_ACCESS)),
            "/proc/self/status",
            "/usr/bin/true",
        ]
        assert launch.pass_fds == (*step_fds, status, ruleset, launch._filter)
        assert [r.path for r in view.proc_rules] == [
            "/proc",
            "/proc/sys",
            "/proc/no-such-entry",
            "/proc/self/status",
        ]
    finally:
        launch.close()


@needs_bwrap
def test_the_python_exec_step_gets_its_interpreter_in_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = _rules(best_effort=True)  # no rule names the interpreter
    launch = contain(
        rules,
        bwrap=str(BWRAP),
        executable="/usr/bin/true",
        cwd=str(tmp_path),
        private_tmp_base=tmp_path / "base",
        broker_socket=None,
        abi=0,
    )
    try:
        _, needs = interpreter()
        expected = plan_view(
            rules,
            cwd=str(tmp_path),
            private_tmp=launch.private_tmp,
            broker_socket=None,
            helper_paths=needs,
        )
        assert launch.view == expected
        assert (
            os.path.realpath(sys.base_prefix) in expected.args or sys.base_prefix in expected.args
        )
        if "mutmut" in Path(execstep.__file__).read_text(encoding="utf-8"):
            return  # mutmut's rewritten exec step cannot run under -I -S
        done = _run(launch, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, b"")
        launch.check(done.stderr)
    finally:
        launch.close()


@needs_bwrap
def test_a_best_effort_launch_without_landlock_passes_no_ruleset(tmp_path: Path) -> None:
    rules = _rules(*((p, Access.ROX) for p in SYSTEM if os.path.lexists(p)), best_effort=True)
    launch = contain(
        rules,
        bwrap=str(BWRAP),
        executable="/bin/sh",
        cwd=str(tmp_path),
        private_tmp_base=tmp_path / "base",
        broker_socket=None,
        abi=0,
    )
    try:
        _, step_fds, _ = exec_step()
        status = launch._status_write
        assert not launch.sandbox.enforcing and launch.sandbox.abi == 0
        assert launch.argv[-4:] == [str(status), "-1", "0", "/bin/sh"]
        assert launch.pass_fds == (*step_fds, status, launch._filter)
        done = _run(launch, "-c", "echo $$; echo hi > /tmp/f; cat /tmp/f", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"2\nhi\n"  # pid 2: bwrap is init of a fresh PID namespace
        launch.check(done.stderr)
    finally:
        launch.close()


@needs_bwrap
@needs_landlock
@pytest.mark.parametrize(
    ("mode", "unshared"),
    [(NetworkMode.DENY, True), (NetworkMode.RESTRICTED, False), (NetworkMode.UNRESTRICTED, False)],
)
def test_only_a_denied_network_gets_its_own_namespace(
    tmp_path: Path, mode: NetworkMode, unshared: bool
) -> None:
    launch = contain(
        _system(mode=mode),
        bwrap=str(BWRAP),
        executable="/usr/bin/true",
        cwd=str(tmp_path),
        private_tmp_base=tmp_path / "base",
        broker_socket=None,
    )
    try:
        assert ("--unshare-net" in launch.argv) is unshared
    finally:
        launch.close()


@needs_bwrap
@needs_landlock
def test_a_contained_tool_runs_under_its_ruleset_and_proc_rules(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret").write_text("no")
    rules = _system(
        (str(work), Access.RW),
        ("/tmp", Access.RW),
        ("/dev/null", Access.RW),
        ("/proc/self/status", Access.RO),
    )
    launch = contain(
        rules,
        bwrap=str(BWRAP),
        executable="/bin/sh",
        cwd=str(work),
        private_tmp_base=tmp_path / "base",
        broker_socket=None,
        abi=ABI,
    )
    script = (
        # Builtins only: /proc/self is the shell itself, the process the exec step became.
        'while IFS= read -r l; do case $l in NoNewPrivs*) echo "$l";; esac; done'
        " < /proc/self/status; "
        "cat /proc/$$/cmdline >/dev/null 2>&1 || echo cmdline-denied; "
        f"cat {tmp_path / 'secret'} 2>/dev/null || echo secret-hidden; "
        "echo made > out; echo tmp > /tmp/t && echo tmp-ok"
    )
    try:
        done = _run(launch, "-c", script, cwd=work)
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"NoNewPrivs:\t1\ncmdline-denied\nsecret-hidden\ntmp-ok\n"
        launch.check(done.stderr)
        assert (work / "out").read_text() == "made\n"
        private = Path(launch.private_tmp)
        assert (private / "t").read_text() == "tmp\n"
    finally:
        launch.close()
    assert not private.exists()


@needs_landlock
def test_a_refused_plan_removes_the_private_tmp(tmp_path: Path) -> None:
    base = tmp_path / "base"
    rules = _rules(mode=NetworkMode.RESTRICTED)
    with pytest.raises(SandboxError):
        contain(
            rules,
            bwrap="/nonexistent/bwrap",
            executable="/usr/bin/true",
            cwd=str(tmp_path),
            private_tmp_base=base,
            broker_socket=None,
            abi=3,  # TCP rules need ABI 4: refused without best effort
        )
    assert list(base.iterdir()) == []
