"""Real Landlock enforcement: sandboxed child processes on this kernel.

Every test builds rules through the public chain (profile -> effective rules
-> prepare) and runs real programs with ``preexec_fn=sandbox.preexec``.
Skipped on a kernel without Landlock, except under CI=true where that fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.sandbox import (
    PreparedSandbox,
    abi_version,
    effective_rules,
    load_profile,
    parse_profile,
    prepare,
    sandbox_env,
)

pytestmark = [pytest.mark.realstack, pytest.mark.usefixtures("landlock_abi")]

ABI = abi_version()
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
# Where the programs the tests run live (merged /usr or not).
SYSTEM_ROX = [p for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64") if os.path.exists(p)]
# The Python running the tests, for the socket probes.
PYTHON_ROX = sorted(
    {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
)


def make_sandbox(
    tmp_path: Path,
    filesystem: dict[str, list[str]] | None = None,
    network: dict[str, object] | None = None,
    env: list[str] | None = None,
) -> PreparedSandbox:
    fs = {key: list(value) for key, value in (filesystem or {}).items()}
    fs["rox"] = [*fs.get("rox", []), *SYSTEM_ROX, *PYTHON_ROX]
    fs["ro"] = [*fs.get("ro", []), "/etc"]
    data = {
        "filesystem": fs,
        "network": {"enabled": True, **(network or {"unrestricted": True})},
        "env": env or [],
    }
    profile = parse_profile(data, name="test", source=str(tmp_path / "test.yaml"))
    return prepare(effective_rules(profile, {"HOME": str(tmp_path)}, str(tmp_path)))


@pytest.fixture
def sandboxes() -> Iterator[list[PreparedSandbox]]:
    """Collects sandboxes to close after the test."""
    made: list[PreparedSandbox] = []
    yield made
    for sandbox in made:
        sandbox.close()


def run(
    sandbox: PreparedSandbox, *argv: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        preexec_fn=sandbox.preexec,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=CHILD_ENV,
        timeout=60,
        check=False,
    )


def sh(
    sandbox: PreparedSandbox, script: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run(sandbox, "/bin/sh", "-c", script, "sh", *args, cwd=cwd)


def dirs(tmp_path: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        path = tmp_path / name
        path.mkdir()
        (path / "file.txt").write_text(f"content of {name}\n")
        made.append(path)
    return made


def test_kernel_reports_an_abi() -> None:
    assert ABI >= 1


def test_cannot_write_outside_rw(tmp_path: Path, sandboxes: list[PreparedSandbox]) -> None:
    rw, ro, other = dirs(tmp_path, "rw", "ro", "other")
    sandbox = make_sandbox(tmp_path, {"rw": [str(rw)], "ro": [str(ro)]})
    sandboxes.append(sandbox)
    assert sh(sandbox, 'echo new > "$1"', str(rw / "new.txt")).returncode == 0
    assert (rw / "new.txt").read_text() == "new\n"
    for target in (ro / "new.txt", other / "new.txt", tmp_path / "new.txt"):
        result = sh(sandbox, 'echo new > "$1"', str(target))
        assert result.returncode != 0
        assert "Permission denied" in result.stderr
        assert not target.exists()
    assert sh(sandbox, 'echo more >> "$1"', str(ro / "file.txt")).returncode != 0
    assert (ro / "file.txt").read_text() == "content of ro\n"


def test_cannot_read_outside_allowed_paths(
    tmp_path: Path, sandboxes: list[PreparedSandbox]
) -> None:
    ro, secret = dirs(tmp_path, "ro", "secret")
    sandbox = make_sandbox(tmp_path, {"ro": [str(ro)]})
    sandboxes.append(sandbox)
    allowed = run(sandbox, "cat", str(ro / "file.txt"))
    assert allowed.returncode == 0
    assert allowed.stdout == "content of ro\n"
    denied = run(sandbox, "cat", str(secret / "file.txt"))
    assert denied.returncode != 0
    assert "Permission denied" in denied.stderr
    assert run(sandbox, "ls", str(secret)).returncode != 0
    assert run(sandbox, "ls", str(ro)).stdout == "file.txt\n"


def test_cannot_execute_outside_rox(tmp_path: Path, sandboxes: list[PreparedSandbox]) -> None:
    rox, ro, rw = dirs(tmp_path, "rox", "ro", "rw")
    for directory in (rox, ro, rw):
        shutil.copy2("/bin/true", directory / "true")
    sandbox = make_sandbox(tmp_path, {"rox": [str(rox)], "ro": [str(ro)], "rw": [str(rw)]})
    sandboxes.append(sandbox)
    assert run(sandbox, str(rox / "true")).returncode == 0
    for directory in (ro, rw):
        with pytest.raises(PermissionError):
            run(sandbox, str(directory / "true"))
    # Writing an executable into rw and running it is denied too.
    assert sh(sandbox, '"$1"', str(rw / "true")).returncode == 126


def test_rwx_allows_executing(tmp_path: Path, sandboxes: list[PreparedSandbox]) -> None:
    (rwx,) = dirs(tmp_path, "rwx")
    sandbox = make_sandbox(tmp_path, {"rwx": [str(rwx)]})
    sandboxes.append(sandbox)
    assert sh(sandbox, 'cp /bin/true "$1" && "$1"', str(rwx / "mine")).returncode == 0


def test_rw_directory_allows_create_and_remove_beneath(
    tmp_path: Path, sandboxes: list[PreparedSandbox]
) -> None:
    (rw,) = dirs(tmp_path, "rw")
    sandbox = make_sandbox(tmp_path, {"rw": [str(rw)]})
    sandboxes.append(sandbox)
    script = """
        set -e
        cd "$1"
        mkdir -p a/b/c
        echo x > a/b/c/f
        mv a/b/c/f a/g
        ln -s g a/link
        truncate -s 0 a/g
        rm a/g a/link file.txt
        rmdir a/b/c a/b a
    """
    result = sh(sandbox, script, str(rw))
    assert result.returncode == 0, result.stderr
    assert list(rw.iterdir()) == []


def test_file_level_rules(tmp_path: Path, sandboxes: list[PreparedSandbox]) -> None:
    (files,) = dirs(tmp_path, "files")
    writable = files / "writable.txt"
    readable = files / "readable.txt"
    writable.write_text("w\n")
    readable.write_text("r\n")
    sandbox = make_sandbox(tmp_path, {"rw": [str(writable)], "ro": [str(readable)]})
    sandboxes.append(sandbox)
    assert sh(sandbox, 'echo more >> "$1"', str(writable)).returncode == 0
    assert writable.read_text() == "w\nmore\n"
    assert run(sandbox, "cat", str(readable)).stdout == "r\n"
    assert sh(sandbox, 'echo more >> "$1"', str(readable)).returncode != 0
    assert run(sandbox, "cat", str(files / "file.txt")).returncode != 0
    assert run(sandbox, "ls", str(files)).returncode != 0  # no READ_DIR on the parent
    assert sh(sandbox, 'echo x > "$1"', str(files / "new.txt")).returncode != 0


def test_missing_paths_are_skipped_and_reported(tmp_path: Path) -> None:
    (ro,) = dirs(tmp_path, "ro")
    missing = tmp_path / "not-there"
    with make_sandbox(tmp_path, {"ro": [str(ro), str(missing)]}) as sandbox:
        assert [(s.path, s.reason) for s in sandbox.report.skipped] == [
            (str(missing), "does not exist")
        ]
        assert run(sandbox, "cat", str(ro / "file.txt")).returncode == 0


def test_prepared_sandbox_is_reusable(tmp_path: Path) -> None:
    (ro,) = dirs(tmp_path, "ro")
    with make_sandbox(tmp_path, {"ro": [str(ro)]}) as sandbox:
        for _ in range(3):
            assert run(sandbox, "cat", str(ro / "file.txt")).returncode == 0
            assert run(sandbox, "ls", str(tmp_path)).returncode != 0


def test_closed_sandbox_fails_closed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    sandbox = make_sandbox(tmp_path, {"rw": [str(tmp_path)]})
    sandbox.close()
    with pytest.raises(subprocess.SubprocessError):
        sh(sandbox, 'touch "$1"', str(marker))
    assert not marker.exists()


FD_PROBE = """
import os
names = []
for fd in os.listdir("/proc/self/fd"):
    try:
        names.append(os.readlink("/proc/self/fd/" + fd))
    except FileNotFoundError:  # the fd of the listing itself
        pass
print("LEAKED" if any("landlock" in name for name in names) else "closed")
"""


def test_ruleset_fd_never_reaches_the_tool(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, {"ro": ["/proc"]}) as sandbox:
        fd = sandbox.fd
        assert fd is not None
        assert "landlock" in os.readlink(f"/proc/self/fd/{fd}")
        for kwargs in ({}, {"pass_fds": (fd,)}, {"close_fds": False}):
            result = subprocess.run(
                [sys.executable, "-I", "-S", "-c", FD_PROBE],
                preexec_fn=sandbox.preexec,
                capture_output=True,
                text=True,
                env=CHILD_ENV,
                check=False,
                **kwargs,
            )
            assert result.stdout == "closed\n", (kwargs, result.stderr)


def test_restriction_survives_in_grandchildren(tmp_path: Path) -> None:
    (secret,) = dirs(tmp_path, "secret")
    with make_sandbox(tmp_path) as sandbox:
        result = sh(sandbox, 'sh -c "cat \\"$1\\""', str(secret / "file.txt"))
        assert result.returncode != 0


# --- network -----------------------------------------------------------------

CONNECT = """
import errno, socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("ok")
except OSError as exc:
    print(errno.errorcode.get(exc.errno, exc.errno))
"""

BIND = """
import errno, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    print("ok")
except OSError as exc:
    print(errno.errorcode.get(exc.errno, exc.errno))
"""


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    """Two listening TCP ports on 127.0.0.1."""
    sockets = []
    for _ in range(2):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        sockets.append(server)
    yield sockets[0].getsockname()[1], sockets[1].getsockname()[1]
    for server in sockets:
        server.close()


def python(sandbox: PreparedSandbox, code: str, *args: object) -> str:
    result = run(sandbox, sys.executable, "-I", "-S", "-c", code, *map(str, args))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


needs_abi4 = pytest.mark.skipif(0 < ABI < 4, reason="TCP rules need Landlock ABI 4")


@needs_abi4
def test_tcp_connect_only_to_allowed_ports(
    tmp_path: Path, listeners: tuple[int, int], sandboxes: list[PreparedSandbox]
) -> None:
    allowed, other = listeners
    sandbox = make_sandbox(tmp_path, network={"connect_tcp": [allowed]})
    sandboxes.append(sandbox)
    assert python(sandbox, CONNECT, allowed) == "ok"
    assert python(sandbox, CONNECT, other) == "EACCES"


@needs_abi4
def test_tcp_bind_only_to_allowed_ports(tmp_path: Path, sandboxes: list[PreparedSandbox]) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    free = probe.getsockname()[1]
    probe.close()
    sandbox = make_sandbox(tmp_path, network={"bind_tcp": [str(free)]})
    sandboxes.append(sandbox)
    assert python(sandbox, BIND, free) == "ok"
    assert python(sandbox, BIND, free + 1 if free < 65535 else free - 1) == "EACCES"


@needs_abi4
def test_network_disabled_means_no_tcp_at_all(
    tmp_path: Path, listeners: tuple[int, int], sandboxes: list[PreparedSandbox]
) -> None:
    allowed, other = listeners
    sandbox = make_sandbox(tmp_path, network={"enabled": False, "connect_tcp": [allowed]})
    sandboxes.append(sandbox)
    assert python(sandbox, CONNECT, allowed) == "EACCES"
    assert python(sandbox, CONNECT, other) == "EACCES"


def test_unrestricted_network_allows_anything(
    tmp_path: Path, listeners: tuple[int, int], sandboxes: list[PreparedSandbox]
) -> None:
    sandbox = make_sandbox(tmp_path, network={"unrestricted": True})
    sandboxes.append(sandbox)
    for port in listeners:
        assert python(sandbox, CONNECT, port) == "ok"


# --- scoping (ABI 6) -------------------------------------------------------------

needs_abi6 = pytest.mark.skipif(0 < ABI < 6, reason="scoping needs Landlock ABI 6")


@needs_abi6
def test_no_signals_to_processes_outside(tmp_path: Path) -> None:
    outside = subprocess.Popen(["/bin/sh", "-c", "read line"], stdin=subprocess.PIPE)
    try:
        with make_sandbox(tmp_path) as sandbox:
            result = sh(sandbox, 'kill -TERM "$1"', str(outside.pid))
            assert result.returncode != 0
            assert outside.poll() is None
            # Its own children are in the same domain: signalling them works.
            assert sh(sandbox, 'sleep 30 & kill "$!"').returncode == 0
    finally:
        outside.communicate(b"\n", timeout=30)


@needs_abi6
def test_no_abstract_unix_socket_outside(tmp_path: Path) -> None:
    name = f"\0ollie-test-{os.getpid()}-{tmp_path.name}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen(1)
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect(sys.argv[1].replace('@', chr(0), 1)); print('ok')\n"
        "except OSError as exc: print(exc.errno)\n"
    )
    try:
        with make_sandbox(tmp_path) as sandbox:
            assert python(sandbox, code, "@" + name[1:]) == str(1)  # EPERM
        unsandboxed = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code, "@" + name[1:]],
            capture_output=True,
            text=True,
            check=True,
        )
        assert unsandboxed.stdout.strip() == "ok"
    finally:
        server.close()


# --- environment and the shipped default -------------------------------------------


def test_sandbox_env_in_a_real_child(tmp_path: Path) -> None:
    data = {"filesystem": {"rox": SYSTEM_ROX}, "env": ["PATH", "LANG"]}
    profile = parse_profile(data, name="env", source="/p/env.yaml")
    rules = effective_rules(profile, {"HOME": str(tmp_path)}, str(tmp_path))
    base = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C",
        "DISPLAY": ":0",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "OLLIE_TOOLS_PATH": "/tools",
    }
    with prepare(rules) as sandbox:
        result = subprocess.run(
            ["env"],
            preexec_fn=sandbox.preexec,
            env=sandbox_env(rules, base),
            capture_output=True,
            text=True,
            check=True,
        )
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == {"PATH": "/usr/bin:/bin", "LANG": "C", "OLLIE_TOOLS_PATH": "/tools"}


def test_shipped_default_profile_enforces(tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    tools = home / ".config" / "ollie" / "tools"
    for directory in (home, work, tools):
        directory.mkdir(parents=True, exist_ok=True)
    (home / "secret").write_text("s\n")
    env = {"HOME": str(home), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    rules = effective_rules(load_profile(env), env, str(work))
    with prepare(rules) as sandbox:
        script = 'ls /usr/bin > /dev/null && cat /etc/passwd > /dev/null && echo hi > "$1"'
        ok = sh(sandbox, script, "out", cwd=work)
        assert ok.returncode == 0, ok.stderr
        assert (work / "out").read_text() == "hi\n"
        assert run(sandbox, "cat", str(home / "secret")).returncode != 0
        assert run(sandbox, "ls", str(tools)).returncode == 0
        assert run(sandbox, "touch", str(tools / "x")).returncode != 0
