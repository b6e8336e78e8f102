"""Sandboxed tool calls through the real Dispatcher, enforced by this kernel's Landlock.

Each test builds an isolated environment (``HOME``, ``XDG_CONFIG_HOME``,
``XDG_RUNTIME_DIR``, ``TMPDIR`` in ``tmp_path``), lets the dispatcher install
the default profile there, and calls small tools that try to cross the
sandbox's edges.  Skipped on a kernel without Landlock, except under CI=true
where that fails.
"""

from __future__ import annotations

import json
import platform
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry_core.dispatch import CallOptions, CallResult, Dispatcher
from registry_core.errors import (
    NamespacesUnavailableError,
    ProfileError,
    UnsafeWorkingDirectoryError,
)
from registry_core.paths import resources_dir
from registry_core.registry import RegistryLoader
from registry_core.sandbox import abi_version, load_profile

pytestmark = [pytest.mark.realstack, pytest.mark.usefixtures("landlock_abi")]

ABI = abi_version()
EXAMPLES = resources_dir() / "examples" / "tools"
SHIPPED_PROFILE = resources_dir() / "sandbox" / "default.yaml"
SECRET = "the cake is a lie"

# The example profile of the ollie-core runtime, exactly in its shape.
OLLIE_CORE_PROFILE = """\
filesystem:
  rwx: ["{CWD}", "{TMPDIR}"]
  ro: ["/usr", "/etc", "/lib", "/lib64", "/bin"]
env: [PATH, HOME]
network:
  enabled: true
  unrestricted: true
"""

CONNECT = """#!/usr/bin/python3
import json, socket, sys
result = {}
for port in json.load(sys.stdin)["ports"]:
    sock = socket.socket()
    sock.settimeout(10)
    try:
        sock.connect(("127.0.0.1", port))
        result[str(port)] = "connected"
    except OSError as exc:
        result[str(port)] = exc.errno
    finally:
        sock.close()
print(json.dumps(result))
"""


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("home", "config", "runtime", "tmp", "tools", "work"):
            (root / sub).mkdir()
        self.home = root / "home"
        self.tools = root / "tools"
        self.cwd = root / "work"
        (self.home / "secret.txt").write_text(SECRET + "\n")
        self.env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TMPDIR": str(root / "tmp"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_RUNTIME_DIR": str(root / "runtime"),
        }

    def profile_path(self, name: str) -> Path:
        return self.root / "config" / "ollie" / "sandbox" / f"{name}.yaml"

    def write_profile(self, name: str, text: str) -> None:
        self.profile_path(name).parent.mkdir(parents=True, exist_ok=True)
        self.profile_path(name).write_text(text)

    def tool(self, name: str, content: str | bytes) -> Path:
        (self.tools / f"{name}.meta").write_text(json.dumps({"description": name}))
        exe = self.tools / name
        if isinstance(content, bytes):
            exe.write_bytes(content)
        else:
            exe.write_text(content)
        exe.chmod(0o755)
        return exe

    def call(
        self,
        name: str,
        args: Any = None,
        directory: Path | None = None,
        *,
        no_bwrap: bool = False,
        **options: Any,
    ) -> CallResult:
        registry = RegistryLoader([directory or self.tools], self.env).load()
        dispatcher = Dispatcher(registry=lambda: registry, env=self.env)
        if no_bwrap:
            dispatcher.find_bwrap = lambda env: None
        return dispatcher.call(
            name, {} if args is None else args, CallOptions(cwd=str(self.cwd), **options)
        )

    def sh(self, script: str, **options: Any) -> CallResult:
        self.tool("probe", "#!/bin/sh\ncat >/dev/null\n" + script)
        return self.call("probe", **options)


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    return Stack(tmp_path)


@pytest.fixture
def listeners() -> Iterator[list[int]]:
    """Two local TCP listeners; yields their ports."""
    socks = []
    for _ in range(2):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        socks.append(sock)
    yield [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()


def static_cat() -> bytes:
    """A 175-byte static x86-64 ELF that copies stdin to stdout: no ld.so, no libc.

    A tool that needs nothing beyond its own file, for profiles (like
    ollie-core's example) that grant no execute right on the system's
    libraries.
    """
    code = bytes.fromhex(
        "4881ec00100000"  # sub rsp, 4096
        "31c0"  # loop: xor eax, eax  (read)
        "31ff"  # xor edi, edi        (fd 0)
        "4889e6"  # mov rsi, rsp
        "ba00100000"  # mov edx, 4096
        "0f05"  # syscall
        "4885c0"  # test rax, rax
        "7e14"  # jle done
        "4889c2"  # mov rdx, rax
        "b801000000"  # mov eax, 1  (write)
        "bf01000000"  # mov edi, 1  (fd 1)
        "4889e6"  # mov rsi, rsp
        "0f05"  # syscall
        "ebd9"  # jmp loop
        "b83c000000"  # done: mov eax, 60  (exit)
        "31ff"  # xor edi, edi
        "0f05"  # syscall
    )
    base, ehdr_size, phdr_size = 0x400000, 64, 56
    size = ehdr_size + phdr_size + len(code)
    ehdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr += struct.pack(
        "<HHIQQQIHHHHHH",
        2,  # ET_EXEC
        0x3E,  # x86-64
        1,
        base + ehdr_size + phdr_size,  # entry: right after the headers
        ehdr_size,
        0,
        0,
        ehdr_size,
        phdr_size,
        1,
        0,
        0,
        0,
    )
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)  # PT_LOAD, R+X
    return ehdr + phdr + code


# --- filesystem ----------------------------------------------------------------


def test_default_profile_is_installed_and_enforced(stack: Stack) -> None:
    result = stack.sh("echo hi\n")
    assert result.ok, result.error
    assert result.sandboxed is True
    assert stack.profile_path("default").read_bytes() == SHIPPED_PROFILE.read_bytes()


def test_cannot_write_outside_rw(stack: Stack) -> None:
    result = stack.sh('echo pwned > "$HOME/pwned.txt"\n')
    assert result.exit_code != 0
    # The home is not even in the mount view (it would be denied by Landlock).
    assert "Directory nonexistent" in result.stderr
    assert not (stack.home / "pwned.txt").exists()
    result = stack.sh('echo pwned >> "$HOME/secret.txt"\n')
    assert result.exit_code != 0
    assert (stack.home / "secret.txt").read_text() == SECRET + "\n"
    # Nor beside the tools, nor in the config (where the profile lives).
    result = stack.sh(f'echo x > "{stack.tools}/new" || echo x > "{stack.profile_path("x")}"\n')
    assert result.exit_code != 0
    assert not (stack.tools / "new").exists()


def test_a_profile_opening_ollies_configuration_is_refused_before_the_tool_runs(
    stack: Stack,
) -> None:
    # Containment II, finding 5: with rw on {XDG_CONFIG_HOME} this tool wrote a tool and
    # an allow rule into Ollie's configuration, which then ran unsandboxed, no dialog.
    data = yaml.safe_load(SHIPPED_PROFILE.read_text())
    data["filesystem"]["rw"] = ["{CWD}", "{TMPDIR}", "{XDG_CONFIG_HOME}"]
    stack.write_profile("open", yaml.safe_dump(data))
    planted = stack.root / "config" / "ollie" / "tools" / "planted.meta"
    script = f'mkdir -p "{planted.parent}" && echo {{}} > "{planted}"\necho ran > ran\n'
    with pytest.raises(ProfileError) as caught:
        stack.sh(script, profile="open")
    line = next(
        n
        for n, text in enumerate(stack.profile_path("open").read_text().splitlines(), 1)
        if "{XDG_CONFIG_HOME}" in text
    )
    assert f"'{{XDG_CONFIG_HOME}}' (filesystem.rw, line {line}, {stack.root / 'config'})" in str(
        caught.value
    )
    assert f"Ollie's configuration directory ({stack.root / 'config' / 'ollie'})" in str(
        caught.value
    )
    assert not planted.exists()
    assert not (stack.cwd / "ran").exists()


def test_a_working_directory_holding_ollies_installation_is_refused(stack: Stack) -> None:
    # The checkout's .venv is sys.prefix here: a .pth planted there runs in the next
    # ollie-tools with the user's full rights.
    prefix = Path(sys.prefix).resolve()
    stack.tool("probe", "#!/bin/sh\ncat >/dev/null\ntouch ran\n")
    registry = RegistryLoader([stack.tools], stack.env).load()
    dispatcher = Dispatcher(registry=lambda: registry, env=stack.env)
    for cwd in (prefix.parent, prefix / "lib"):
        with pytest.raises(UnsafeWorkingDirectoryError) as caught:
            dispatcher.call("probe", {}, CallOptions(cwd=str(cwd)))
        assert f"Ollie's Python installation (sys.prefix) ({prefix})" in caught.value.reason
        assert not (cwd / "ran").exists()


def test_can_write_in_its_cwd_and_its_private_tmpdir(stack: Stack) -> None:
    (stack.root / "tmp" / "host.txt").write_text("the dispatcher's own temporary file\n")
    result = stack.sh(
        "set -e\necho made > made.txt\nmkdir -p sub/dir\nmv made.txt sub/dir/\n"
        'echo temp > "$TMPDIR/t.txt"\ncat "$TMPDIR/t.txt"\necho "$TMPDIR"\nls -A /tmp\n'
    )
    assert result.ok, result.error
    assert (stack.cwd / "sub" / "dir" / "made.txt").read_text() == "made\n"
    # $TMPDIR is the call's own /tmp: it worked, shows nothing of the host's
    # temporary directories, and is gone after the call.
    temp, tmpdir, *listing = result.stdout.splitlines()
    assert (temp, tmpdir) == ("temp", "/tmp")
    assert "host.txt" not in listing
    assert not (stack.root / "tmp" / "t.txt").exists()
    assert list((stack.root / "runtime" / "ollie-tmp").iterdir()) == []


def test_cannot_read_home(stack: Stack) -> None:
    result = stack.sh('cat "$HOME/secret.txt"\n')
    assert result.exit_code != 0
    assert "No such file or directory" in result.stderr  # absent from the mount view
    assert SECRET not in result.stdout
    assert stack.sh('ls "$HOME"\n').exit_code != 0


def test_cannot_execute_what_it_wrote(stack: Stack) -> None:
    result = stack.sh("cp /bin/true ./mytrue && chmod +x ./mytrue && ./mytrue\n")
    assert result.exit_code == 126
    assert (stack.cwd / "mytrue").exists()  # writing was allowed, running is not


def test_without_bubblewrap_calls_are_refused_naming_the_package(stack: Stack) -> None:
    stack.tool("probe", "#!/bin/sh\necho ran\n")
    with pytest.raises(NamespacesUnavailableError, match=r"install the 'bubblewrap' package"):
        stack.call("probe", no_bwrap=True)


def test_best_effort_without_bubblewrap_runs_and_says_what_is_missing(stack: Stack) -> None:
    data = yaml.safe_load(SHIPPED_PROFILE.read_text())
    data["general"]["best_effort"] = True
    stack.write_profile("lenient", yaml.safe_dump(data))
    stack.tool("probe", "#!/bin/sh\ncat >/dev/null\necho ran\n")
    result = stack.call("probe", profile="lenient", no_bwrap=True)
    assert result.ok, result.error
    assert result.stdout == "ran\n"
    assert result.sandboxed is True  # Landlock still applies
    (note,) = [n for n in result.unenforced if n.startswith("namespaces:")]
    assert "bubblewrap" in note and "D-Bus" in note


FD_LISTER = """#!/usr/bin/python3
import json, os, sys
sys.stdin.read()
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        pass
print(json.dumps(fds))
"""


def test_the_exec_step_enforces_and_hands_the_tool_no_extra_fd(stack: Stack) -> None:
    result = stack.sh('echo pwned > "$HOME/pwned.txt" || echo refused\necho ok > here.txt\n')
    assert result.ok and result.stdout == "refused\n", result
    assert (stack.cwd / "here.txt").read_text() == "ok\n"
    assert not (stack.home / "pwned.txt").exists()
    stack.tool("fds", FD_LISTER)
    result = stack.call("fds")
    assert result.ok, result.error
    fds = json.loads(result.stdout)
    # stdin, stdout, stderr (the listing's own handle is gone when it is read):
    # no ruleset, status pipe or memfd.
    assert sorted(fds) == ["0", "1", "2"], fds


# --- network -------------------------------------------------------------------


def test_tcp_connect_only_to_ports_the_profile_allows(stack: Stack, listeners: list[int]) -> None:
    allowed, denied = listeners
    data = yaml.safe_load(SHIPPED_PROFILE.read_text())
    data["network"]["connect_tcp"] = [allowed]
    stack.write_profile("oneport", yaml.safe_dump(data))
    stack.tool("connect", CONNECT)
    # Outside the sandbox both listeners accept connections.
    for port in listeners:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    result = stack.call("connect", {"ports": [allowed, denied]}, profile="oneport")
    assert result.ok, result.error
    assert json.loads(result.stdout) == {str(allowed): "connected", str(denied): 13}  # EACCES


def test_default_profile_refuses_local_ports(stack: Stack, listeners: list[int]) -> None:
    stack.tool("connect", CONNECT)
    result = stack.call("connect", {"ports": listeners})
    assert result.ok, result.error
    assert set(json.loads(result.stdout).values()) == {13}


def test_no_network_profile_gets_its_own_network_namespace(stack: Stack) -> None:
    data = yaml.safe_load(SHIPPED_PROFILE.read_text())
    data["network"] = {"enabled": False}
    stack.write_profile("offline", yaml.safe_dump(data))
    script = (
        "#!/usr/bin/python3\nimport socket\nprint(sorted(n for _, n in socket.if_nameindex()))\n"
    )
    stack.tool("interfaces", script)
    assert [name for _, name in socket.if_nameindex()] != ["lo"]  # the host has more
    result = stack.call("interfaces", profile="offline")
    assert result.ok, result.error
    assert result.stdout == "['lo']\n"
    assert stack.call("interfaces").stdout != "['lo']\n"  # the default profile shares it


def test_cannot_signal_processes_outside_the_sandbox(stack: Stack) -> None:
    if ABI < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    victim = subprocess.Popen(["sleep", "60"])
    try:
        result = stack.sh(f"kill -TERM {victim.pid}\n")
        assert result.exit_code != 0
        # Invisible in the call's PID namespace (and Landlock scoping would refuse it).
        assert "No such process" in result.stderr
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


# --- ollie-core profiles ---------------------------------------------------------


def test_ollie_core_example_profile_loads_and_runs_a_tool(stack: Stack) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the static probe tool is x86-64 machine code")
    stack.write_profile("ollie-core", OLLIE_CORE_PROFILE)
    profile = load_profile(stack.env, "ollie-core")
    assert profile.warnings == ()
    assert profile.filesystem.rwx == ("{CWD}", "{TMPDIR}")
    assert profile.env == ("PATH", "HOME")
    stack.tool("static_cat", static_cat())
    args = {"message": "hello", "n": [1, 2]}
    result = stack.call("static_cat", args, profile="ollie-core")
    assert result.ok, result.error
    assert result.sandboxed is True
    assert json.loads(result.stdout) == args


# --- the bundled demo tools ------------------------------------------------------


@pytest.fixture
def demo(stack: Stack) -> Path:
    """The bundled example tools, copied so the test never depends on the checkout's modes."""
    target = stack.root / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


def test_demo_greet(stack: Stack, demo: Path) -> None:
    result = stack.call("greet", {"name": "Ann"}, directory=demo)
    assert (result.exit_code, result.sandboxed) == (0, True), result.error
    assert result.stdout == "Hello, Ann\n"


def test_demo_file_info(stack: Stack, demo: Path) -> None:
    (stack.cwd / "notes.txt").write_text("twelve bytes")
    result = stack.call("file_info", {"path": "notes.txt"}, directory=demo)
    assert (result.exit_code, result.sandboxed) == (0, True), result.error
    assert result.structured is True
    (block,) = result.content
    assert f"path:     {stack.cwd / 'notes.txt'}" in block["text"]
    assert "size:     12 bytes" in block["text"]


def test_demo_uname(stack: Stack, demo: Path) -> None:
    result = stack.call("uname", {"flags": "-s"}, directory=demo)
    assert (result.exit_code, result.sandboxed) == (0, True), result.error
    assert result.stdout == "Linux\n"


def test_demo_echo_args(stack: Stack, demo: Path) -> None:
    args = {"message": "hello", "count": 3}
    result = stack.call("echo_args", args, directory=demo)
    assert (result.exit_code, result.sandboxed) == (0, True), result.error
    assert json.loads(result.stdout) == args
