"""The native exec step: its bytes are the assembled source, and it behaves like the Python one."""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from registry_core.sandbox import native
from registry_core.sandbox.native import EXECSTEP_X86_64, native_execstep

SOURCE = Path(native.__file__).with_name("execstep_x86_64.S")
X86_64 = platform.machine() == "x86_64"


def test_the_embedded_bytes_are_the_assembled_source(tmp_path: Path) -> None:
    if not X86_64:
        pytest.skip("the native exec step is x86-64 code")
    if not (shutil.which("as") and shutil.which("ld")):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must check the embedded exec step against its source: install binutils")
        pytest.skip("needs binutils (as, ld) to rebuild the exec step: apt-get install -y binutils")
    obj, exe = tmp_path / "execstep.o", tmp_path / "execstep"
    subprocess.run(["as", "--64", "-o", str(obj), str(SOURCE)], check=True)
    flags = ["-static", "-nostdlib", "-n", "-s", "--build-id=none", "-z", "noexecstack"]
    subprocess.run(["ld", *flags, "-o", str(exe), str(obj)], check=True)
    assert exe.read_bytes() == EXECSTEP_X86_64


@pytest.fixture
def memfd() -> int:
    fd = native_execstep()
    if fd is None:
        pytest.skip("no native exec step on this machine")
    return fd


def _run(memfd: int, *args: str) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [f"/proc/self/fd/{memfd}", str(memfd), str(write), *args],
            pass_fds=(memfd, write),
            capture_output=True,
            check=False,
            timeout=30,
        )
        os.close(write)
        write = -1
        os.set_blocking(read, False)
        try:
            status = os.read(read, 8)
        except BlockingIOError:
            status = b""
        return done, status
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_it_is_sealed(memfd: int) -> None:
    with pytest.raises(PermissionError):  # EPERM: F_SEAL_WRITE
        os.pwrite(memfd, b"x", 0)


def test_it_execs_the_tool_after_the_status_byte_and_closes_what_it_was_given(
    memfd: int,
) -> None:
    script = "import os; print(sorted(os.listdir('/proc/self/fd')))"
    done, status = _run(memfd, "-1", "0", "/usr/bin/python3", "-c", script)
    assert done.returncode == 0, done.stderr
    assert status == b"1"
    # Only stdin, stdout, stderr and the listing's own handle: no memfd, no status pipe.
    assert done.stdout == b"['0', '1', '2', '3']\n"


def test_it_fails_closed_on_a_bad_ruleset_and_never_runs_the_tool(
    memfd: int, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    done, status = _run(memfd, "99", "0", "/usr/bin/touch", str(marker))
    assert done.returncode == 125
    assert b"cannot apply the sandbox" in done.stderr
    assert status == b""
    assert not marker.exists()


def test_a_missing_tool_is_127(memfd: int) -> None:
    done, status = _run(memfd, "-1", "0", "/nonexistent/tool")
    assert (done.returncode, status) == (127, b"1")


def test_garbage_arguments_fail_closed(memfd: int) -> None:
    done, status = _run(memfd, "-1", "x", "/usr/bin/true")
    assert (done.returncode, status) == (125, b"")


def _memfd_noexec() -> str | None:
    try:
        return Path("/proc/sys/vm/memfd_noexec").read_text().strip()
    except OSError:
        return None


def test_it_is_made_on_x86_64_unless_executable_memfds_are_forbidden() -> None:
    expected = X86_64 and _memfd_noexec() != "2"
    assert native._memfd_exec_allowed() is (_memfd_noexec() != "2")
    assert (native_execstep() is not None) is expected


def test_it_holds_exactly_the_program_sealed_close_on_exec_and_made_once(memfd: int) -> None:
    assert native_execstep() == memfd
    assert os.pread(memfd, len(EXECSTEP_X86_64) + 1, 0) == EXECSTEP_X86_64
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    assert fcntl.fcntl(memfd, fcntl.F_GET_SEALS) == seals
    assert fcntl.fcntl(memfd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    assert os.readlink(f"/proc/self/fd/{memfd}") == "/memfd:ollie-execstep (deleted)"


def test_a_sealed_memfd_holds_all_of_a_large_payload() -> None:
    data = bytes(range(256)) * 12289  # 3 MiB and a bit: more than one write may take
    fd = native._sealed_memfd(data)
    try:
        assert os.fstat(fd).st_size == len(data)
        assert os.pread(fd, len(data) + 1, 0) == data
    finally:
        os.close(fd)


def _lowest_free_descriptor() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


def test_a_failed_memfd_is_closed() -> None:
    before = _lowest_free_descriptor()
    with pytest.raises(TypeError):
        native._sealed_memfd("not bytes")  # type: ignore[arg-type]
    assert _lowest_free_descriptor() == before


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap to show another sysctl")
@pytest.mark.parametrize(
    ("sysctl", "expected"),
    [(" 2\n", "False None"), ("1\n", "True made"), (None, "True made")],
)
def test_what_vm_memfd_noexec_says_decides(
    tmp_path: Path, sysctl: str | None, expected: str
) -> None:
    # A private mount view shows this process another vm.memfd_noexec (or none at
    # all, as before Linux 6.3) without touching the machine's.
    if sysctl is None:
        view = ["--tmpfs", "/proc/sys"]
    else:
        (tmp_path / "memfd_noexec").write_text(sysctl)
        view = ["--ro-bind", str(tmp_path / "memfd_noexec"), "/proc/sys/vm/memfd_noexec"]
    code = (
        "from registry_core.sandbox import native\n"
        "fd = native.native_execstep()\n"
        "print(native._memfd_exec_allowed(), 'None' if fd is None else 'made')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", *view, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    if not X86_64:
        expected = expected.replace("made", "None")
    assert done.stdout == expected + "\n"


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("unshare") is None or _memfd_noexec() is None,
    reason="needs root, unshare and a kernel with vm.memfd_noexec (6.3+)",
)
def test_a_kernel_refusing_executable_memfds_still_gets_a_sealed_one(tmp_path: Path) -> None:
    # vm.memfd_noexec is per PID namespace: 2 in a fresh one refuses MFD_EXEC
    # (as a kernel before 6.3 refuses the unknown flag), so the plain memfd is made.
    code = (
        "import fcntl, os\n"
        "from registry_core.sandbox import native\n"
        "fd = native._sealed_memfd(b'payload')\n"
        "print(os.readlink(f'/proc/self/fd/{fd}'), os.pread(fd, 99, 0),\n"
        "      fcntl.fcntl(fd, fcntl.F_GET_SEALS) & native._SEALS == native._SEALS,\n"
        "      bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(code)
    before = _memfd_noexec()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "sh",
            "-c",
            'echo 2 > /proc/sys/vm/memfd_noexec && exec "$0" "$1"',
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "/memfd:ollie-execstep (deleted) b'payload' True True\n"
    assert _memfd_noexec() == before  # the machine's own setting is untouched
