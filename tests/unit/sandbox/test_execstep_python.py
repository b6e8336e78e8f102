"""The Python exec step (registry_core.sandbox.execstep), run as a real child as bwrap would.

Every contained call runs it: ``python -I -S -c <source> -1 STATUS RULESET N [MASK PATH]... TOOL``.
The rules it adds and the restriction it applies are checked with real
Landlock on this kernel.

mutmut rewrites the module into one that imports mutmut, which ``-I -S``
cannot, so these tests skip on a rewritten copy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from registry_core.sandbox import execstep
from registry_core.sandbox.landlock import (
    FsAccess,
    PreparedSandbox,
    RulesetBuilder,
    abi_version,
    fs_access_for_abi,
)

SOURCE = Path(execstep.__file__).read_text(encoding="utf-8")
ABI = abi_version()
SYSTEM = [p for p in ("/usr", "/bin", "/lib", "/lib64", "/etc") if os.path.exists(p)]
PYTHON = sorted({sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))})
READ = FsAccess.READ_FILE | FsAccess.READ_DIR
RUN = READ | FsAccess.EXECUTE
STEP = (sys.executable, "-I", "-S", "-c", SOURCE, "-")

pytestmark = pytest.mark.skipif(
    "mutmut" in SOURCE, reason="mutmut's rewritten copy cannot run under -I -S"
)
needs_landlock = pytest.mark.skipif(ABI < 1, reason="this kernel offers no Landlock")


def _step(
    *args: str, pass_fds: tuple[int, ...] = ()
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run the exec step with a status pipe; its result and what it wrote to the pipe."""
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [*STEP, str(write), *args],
            pass_fds=(write, *pass_fds),
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            capture_output=True,
            check=False,
            timeout=60,
        )
        os.close(write)
        write = -1
        return done, os.read(read, 8)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


@pytest.fixture
def sandbox() -> Iterator[PreparedSandbox]:
    if ABI < 1:
        pytest.skip("this kernel offers no Landlock")
    builder = RulesetBuilder(ABI, fs_access_for_abi(ABI))
    for path in (*SYSTEM, *PYTHON):
        builder.add_path(path, RUN)
    prepared = builder.finish()
    builder.close()
    yield prepared
    prepared.close()


def test_without_a_ruleset_it_sets_no_new_privs_and_execs_the_tool() -> None:
    script = (
        "import os, sys; "
        "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')]); "
        "print(sorted(os.listdir('/proc/self/fd'))); print(sys.argv[1:])"
    )
    done, status = _step("-1", "0", "/usr/bin/python3", "-c", script, "a b", "")
    assert (done.returncode, status, done.stderr) == (0, b"1", b"")
    # No status pipe left in the tool: only stdin, stdout, stderr and the listing's own.
    assert done.stdout == b"['NoNewPrivs:\\t1\\n']\n['0', '1', '2', '3']\n['a b', '']\n"


def test_the_rules_it_is_given_are_added_before_it_restricts_itself(
    sandbox: PreparedSandbox, tmp_path: Path
) -> None:
    for name in ("granted", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text(name)
    fd = sandbox.fd
    assert fd is not None
    script = (
        "import os, sys\n"
        "print(sorted(os.listdir('/proc/self/fd')))\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        print(open(p).read())\n"
        "    except PermissionError:\n"
        "        print('denied')\n"
        "    try:\n"
        "        open(p, 'a').close()\n"
        "    except PermissionError:\n"
        "        print('no write')\n"
    )
    done, status = _step(
        str(fd),
        "3",
        str(int(READ)),
        str(tmp_path / "missing"),  # absent: skipped, the next rules still added
        str(int(READ)),
        str(tmp_path / "granted"),
        str(int(READ)),
        "/proc",
        "/usr/bin/python3",
        "-c",
        script,
        str(tmp_path / "granted" / "f"),
        str(tmp_path / "other" / "f"),
        pass_fds=(fd,),
    )
    assert (done.returncode, status, done.stderr) == (0, b"1", b"")
    # The ruleset is closed before the tool runs.
    assert done.stdout == b"['0', '1', '2', '3']\ngranted\nno write\ndenied\nno write\n"


def test_a_file_rule_takes_a_file_mask(sandbox: PreparedSandbox, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("file")
    fd = sandbox.fd
    assert fd is not None
    script = "import sys; print(open(sys.argv[1]).read())"
    done, status = _step(
        str(fd),
        "1",
        str(int(FsAccess.READ_FILE)),
        str(tmp_path / "f"),
        "/usr/bin/python3",
        "-c",
        script,
        str(tmp_path / "f"),
        pass_fds=(fd,),
    )
    assert (done.returncode, status, done.stdout) == (0, b"1", b"file\n")


@needs_landlock
def test_a_directory_mask_on_a_file_fails_closed_word_for_word(
    sandbox: PreparedSandbox, tmp_path: Path
) -> None:
    (tmp_path / "f").write_text("")
    fd = sandbox.fd
    assert fd is not None
    done, status = _step(
        str(fd),
        "1",
        str(int(READ)),
        str(tmp_path / "f"),
        "/usr/bin/touch",
        str(tmp_path / "ran"),
        pass_fds=(fd,),
    )
    assert (done.returncode, status) == (125, b"")
    assert done.stderr == b"ollie sandbox: cannot apply the sandbox: [Errno 22] Invalid argument\n"
    assert not (tmp_path / "ran").exists()


def test_a_bad_ruleset_fails_closed_and_never_runs_the_tool(tmp_path: Path) -> None:
    done, status = _step("99", "0", "/usr/bin/touch", str(tmp_path / "ran"))
    assert (done.returncode, status) == (125, b"")
    assert (
        done.stderr == b"ollie sandbox: cannot apply the sandbox: [Errno 9] Bad file descriptor\n"
    )
    assert not (tmp_path / "ran").exists()


@needs_landlock
def test_a_rule_without_its_path_fails_closed(sandbox: PreparedSandbox, tmp_path: Path) -> None:
    fd = sandbox.fd
    assert fd is not None
    done, status = _step(str(fd), "1", str(int(READ)), pass_fds=(fd,))
    assert (done.returncode, status) == (125, b"")
    assert done.stderr == (
        b"ollie sandbox: cannot apply the sandbox: zip() argument 2 is shorter than argument 1\n"
    )


def test_garbage_arguments_fail_closed_word_for_word() -> None:
    done, status = _step("-1", "x", "/usr/bin/true")
    assert (done.returncode, status) == (125, b"")
    assert done.stderr == (
        b"ollie sandbox: cannot apply the sandbox: invalid literal for int() with base 10: 'x'\n"
    )


def test_no_tool_fails_after_the_status_byte() -> None:
    done, status = _step("-1", "0")
    assert (done.returncode, status) == (125, b"1")
    assert done.stderr == b"ollie sandbox: cannot apply the sandbox: no tool to run\n"


def test_a_missing_tool_is_127_with_its_name() -> None:
    done, status = _step("-1", "0", "/nonexistent/tool", "arg")
    assert (done.returncode, status) == (127, b"1")
    assert done.stderr == b"/nonexistent/tool: No such file or directory\n"


def test_a_tool_that_cannot_run_is_126_with_its_name(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o644)
    done, status = _step("-1", "0", str(tool))
    assert (done.returncode, status) == (126, b"1")
    assert done.stderr == f"{tool}: Permission denied\n".encode()


def test_a_ruleset_on_descriptor_0_is_applied(sandbox: PreparedSandbox, tmp_path: Path) -> None:
    # Descriptor 0 is a valid ruleset (bwrap could be started without stdin):
    # skipping it would run the tool unrestricted, after the status byte.
    (tmp_path / "f").write_text("secret")
    fd = sandbox.fd
    assert fd is not None
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [*STEP, str(write), "0", "0", "/bin/cat", str(tmp_path / "f")],
            stdin=fd,
            pass_fds=(write,),
            capture_output=True,
            check=False,
            timeout=60,
        )
        os.close(write)
        write = -1
        status = os.read(read, 8)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    assert (done.returncode, status, done.stdout) == (1, b"1", b"")
    assert done.stderr == f"/bin/cat: {tmp_path / 'f'}: Permission denied\n".encode()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user may enter (``tmp_path`` is 0700)."""
    made = Path(os.path.realpath(os.environ.get("TMPDIR", "/tmp"))) / f"execstep-{os.getpid()}"
    made.mkdir(mode=0o755)
    made.chmod(0o755)
    yield made
    for entry in made.iterdir():
        entry.unlink()
    made.rmdir()


def test_a_rule_on_a_path_it_may_not_read_is_still_added(
    sandbox: PreparedSandbox, shared_dir: Path
) -> None:
    # Rules name paths opened O_PATH, which needs no read permission.
    locked = shared_dir / "locked"
    locked.write_text("")
    locked.chmod(0)
    fd = sandbox.fd
    assert fd is not None
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [
                "/usr/bin/python3",  # the system's: another user may not reach this one
                *STEP[1:],
                str(write),
                str(fd),
                "1",
                str(int(FsAccess.READ_FILE)),
                str(locked),
                "/bin/true",
            ],
            pass_fds=(write, fd),
            user=65534 if os.getuid() == 0 else None,
            capture_output=True,
            check=False,
            timeout=60,
        )
        os.close(write)
        write = -1
        status = os.read(read, 8)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    assert (done.returncode, status, done.stderr) == (0, b"1", b"")


def test_a_tool_name_that_is_not_utf8_is_reported_not_fatal() -> None:
    name = os.fsdecode(b"/nonexistent/t\xffol")
    done, status = _step("-1", "0", name)
    assert (done.returncode, status) == (127, b"1")
    assert done.stderr == b"/nonexistent/t?ol: No such file or directory\n"


@pytest.mark.parametrize("token", ["x", "unknown=1", "=", ""])
def test_unknown_or_malformed_options_fail_closed_before_the_tool_runs(token: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", SOURCE, token, "1", "-1", "0", "/usr/bin/true"],
        capture_output=True,
        check=False,
        pass_fds=(1,),
    )
    assert done.returncode == 125
    assert b"option" in done.stderr


def test_no_options_is_a_dash() -> None:
    assert execstep.parse_options("-") == {}


def _limits_seen(options: str, preexec: Callable[[], None] | None = None) -> tuple[int, str]:
    """Run the exec step with ``options``; the rlimits (NPROC, DATA, CPU) the tool sees."""
    probe = "import resource as r; print([r.getrlimit(x) for x in (6, 2, 0)])"
    probe_argv = (sys.executable, "-I", "-S", "-c", probe)
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", SOURCE, options, str(write), "-1", "0", *probe_argv],
            capture_output=True,
            check=False,
            pass_fds=(write,),
            preexec_fn=preexec,
        )
    finally:
        os.close(read)
        os.close(write)
    return done.returncode, done.stdout.decode().strip()


def test_limit_options_become_the_tools_rlimits() -> None:
    code, seen = _limits_seen("nproc=77,data=123456789,cpu=42")
    assert code == 0
    # CPU: SIGXCPU at 42 s, SIGKILL one second later; the others soft = hard.
    assert seen == "[(77, 77), (123456789, 123456789), (42, 43)]"


@pytest.mark.parametrize("options", ["nproc=0", "data=-1", "cpu=x", "nproc=1,nproc=2"])
def test_a_bad_limit_option_fails_closed(options: str) -> None:
    code, seen = _limits_seen(options)
    assert (code, seen) == (125, "")


def test_a_lower_hard_limit_already_in_place_is_never_raised() -> None:
    import resource

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (30, 30))
        resource.setrlimit(resource.RLIMIT_NPROC, (5000, 5000))

    code, seen = _limits_seen("cpu=100,nproc=9000", lower)
    assert (code, seen.endswith(", (30, 30)]"), seen.startswith("[(5000, 5000),")) == (
        0,
        True,
        True,
    )


def _keyring_seen(options: str) -> tuple[int, str]:
    """Run the exec step with ``options``; the session keyring id the tool sees."""
    probe = (
        "import ctypes; l = ctypes.CDLL(None); c = ctypes.c_long; l.syscall.restype = c; "
        "print(l.syscall(c(250), c(0), c(-3), c(0)))"
    )
    probe_argv = (sys.executable, "-I", "-S", "-c", probe)
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", SOURCE, options, str(write), "-1", "0", *probe_argv],
            capture_output=True,
            check=False,
            pass_fds=(write,),
        )
    finally:
        os.close(read)
        os.close(write)
    return done.returncode, done.stdout.decode().strip()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 keyctl number")
def test_the_keyctl_option_gives_the_tool_a_new_anonymous_session_keyring() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.syscall.restype = ctypes.c_long
    mine = libc.syscall(ctypes.c_long(250), ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(1))
    if mine == -1:
        pytest.skip("no session keyring here")
    assert _keyring_seen("-") == (0, str(mine))  # inherited without the option
    code, seen = _keyring_seen("keyctl=250")
    assert code == 0 and int(seen) not in (mine, -1)
    # A failure other than ENOSYS fails closed: fstat(1, NULL) answers EFAULT.
    assert _keyring_seen("keyctl=5") == (125, "")
    assert _keyring_seen("keyctl=x")[0] == 125


def test_the_cwd_option_refuses_any_directory_but_the_pinned_one(tmp_path: Path) -> None:
    info = os.stat(tmp_path)

    def run(options: str) -> subprocess.CompletedProcess[bytes]:
        read, write = os.pipe()
        try:
            return subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    SOURCE,
                    options,
                    str(write),
                    "-1",
                    "0",
                    "/bin/echo",
                    "ran",
                ],
                capture_output=True,
                check=False,
                pass_fds=(write,),
                cwd=tmp_path,
            )
        finally:
            os.close(read)
            os.close(write)

    same = run(f"cwd={info.st_dev}:{info.st_ino}")
    assert (same.returncode, same.stdout) == (0, b"ran\n")
    other = run(f"cwd={info.st_dev}:{info.st_ino + 1}")
    assert (other.returncode, other.stdout) == (125, b"")
    assert b"not the one that was checked" in other.stderr
