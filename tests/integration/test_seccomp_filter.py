"""The seccomp filter, attacked for real: a tool probes the kernel surface in bwrap.

Each probe succeeded on the code before the filter (an MPTCP socket reached a
port Landlock's TCP rules did not allow, an unbound ``listen()`` got a port,
the dispatcher's session keyring, io_uring, userfaultfd and new user and
network namespaces were there, sock_diag listed the host's sockets); now each
answers an errno and the ordinary sockets a tool needs still work.  The
probe is x86-64 specific (raw system call numbers).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sudo_user
from test_dispatch_sandboxed import SHIPPED_PROFILE, Stack

from registry_core.sandbox import seccomp

pytestmark = [
    pytest.mark.realstack,
    pytest.mark.usefixtures("landlock_abi"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe is x86-64 specific"),
]

PROBE = (Path(__file__).parent / "kernel_probe.py").read_text()


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bwrap is not installed")
        pytest.skip("bwrap is not installed")
    stack = Stack(tmp_path)
    stack.tool("probe", PROBE)
    return stack


def _probe(stack: Stack, profile: str = "default") -> dict[str, str]:
    result = stack.call("probe", profile=profile, timeout=30)
    assert result.exit_code == 0, result.stderr
    answers: dict[str, str] = json.loads(result.stdout)
    return answers


def _profile(stack: Stack, name: str, **replace: str) -> None:
    text = SHIPPED_PROFILE.read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    stack.write_profile(name, text)


def test_the_kernel_surface_a_tool_reached_is_refused_with_the_network_on(stack: Stack) -> None:
    answers = _probe(stack)  # the shipped profile: network restricted to ports, no bind_tcp
    assert {
        k: answers[k] for k in ("tcp", "tcp6", "udp", "unix", "netlink_route")
    } == dict.fromkeys(("tcp", "tcp6", "udp", "unix", "netlink_route"), "ok")
    refused = {
        "mptcp": "EPROTONOSUPPORT",
        "sctp": "EPROTONOSUPPORT",
        "ping": "EPROTONOSUPPORT",
        "raw": "EPROTONOSUPPORT",
        "packet": "EAFNOSUPPORT",
        "high_family": "EAFNOSUPPORT",
        "sock_diag": "EPROTONOSUPPORT",
        "listen_unbound": "EPERM",
        "keyctl": "EPERM",
        "add_key": "EPERM",
        "io_uring_setup": "EPERM",
        "userfaultfd": "EPERM",
        "unshare_user": "EPERM",
        "unshare_net": "EPERM",
        "clone3": "ENOSYS",
        "ptrace": "EPERM",
        "bpf": "EPERM",
        "perf_event_open": "EPERM",
        "mount": "EPERM",
        "tiocsti": "EPERM",
    }
    assert {name: answers[name] for name in refused} == refused
    # Another ABI's system call (x32 here) never reaches the rules: the process is killed.
    assert answers["x32_socket"] == "signal 31"


def test_without_network_no_inet_socket_exists_and_unix_listeners_work(stack: Stack) -> None:
    _profile(stack, "offline", **{"enabled: true": "enabled: false"})
    answers = _probe(stack, "offline")
    assert answers["tcp"] == answers["udp"] == answers["tcp6"] == "EAFNOSUPPORT"
    assert answers["unix"] == answers["netlink_route"] == "ok"
    assert answers["sock_diag"] == "EPROTONOSUPPORT"
    assert (
        stack.sh(
            'python3 -c \'import socket; s = socket.socket(socket.AF_UNIX); s.bind("/tmp/s"); '
            's.listen(); print("listening")\'',
            profile="offline",
        ).stdout
        == "listening\n"
    )


def test_a_profile_that_names_a_bind_port_may_listen(stack: Stack) -> None:
    _profile(stack, "server", **{"bind_tcp: []": 'bind_tcp: ["8765"]'})
    assert _probe(stack, "server")["listen_unbound"] == "ok"


@pytest.fixture
def dev_server() -> Iterator[int]:
    """A local "dev server" on a port the shipped profile does not allow."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_mptcp_does_not_go_around_landlocks_port_rules(stack: Stack, dev_server: int) -> None:
    stack.tool(
        "reach",
        "#!/usr/bin/python3\nimport json, socket, sys\nsys.stdin.read()\nout = {}\n"
        "for name, proto in (('tcp', 0), ('mptcp', 262)):\n"
        "    try:\n"
        "        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)\n"
        f"        s.connect(('127.0.0.1', {dev_server}))\n"
        "        out[name] = 'connected'\n"
        "    except OSError as exc:\n"
        "        out[name] = exc.errno\n"
        "print(json.dumps(out))\n",
    )
    result = stack.call("reach", timeout=30)
    answers = json.loads(result.stdout)
    assert answers["tcp"] != "connected"  # Landlock: the port is not in connect_tcp
    assert answers["mptcp"] != "connected"  # before the filter, MPTCP connected


KEYRING_ID = (
    "#!/usr/bin/python3\nimport ctypes, sys\nsys.stdin.read()\n"
    "l = ctypes.CDLL(None); c = ctypes.c_long; l.syscall.restype = c\n"
    # KEYCTL_GET_KEYRING_ID(KEY_SPEC_SESSION_KEYRING, create=0)
    "print(l.syscall(c(250), c(0), c(-3), c(0)))\n"
)


def _session_keyring() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found = libc.syscall(ctypes.c_long(250), ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(1))
    if found == -1:
        pytest.skip(f"no session keyring here ({os.strerror(ctypes.get_errno())})")
    return int(found)


def test_a_tool_never_possesses_the_dispatchers_session_keyring(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even without the filter (best effort), the exec step joined a new keyring."""
    mine = _session_keyring()
    _profile(stack, "lenient", **{"best_effort: false": "best_effort: true"})

    def missing(_rules: object, _cache: object) -> bytes:
        raise seccomp.FilterUnavailable("libseccomp cannot be loaded (test)")

    monkeypatch.setattr(seccomp, "program_for", missing)
    stack.tool("keyring", KEYRING_ID)
    result = stack.call("keyring", profile="lenient", timeout=30)
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout) not in (mine, -1)
    assert any(line.startswith("seccomp: ") for line in result.unenforced)


def test_with_the_filter_keyctl_only_joins_a_new_anonymous_keyring(stack: Stack) -> None:
    stack.tool(
        "join",
        "#!/usr/bin/python3\nimport ctypes, json, sys\nsys.stdin.read()\n"
        "l = ctypes.CDLL(None, use_errno=True); c = ctypes.c_long; l.syscall.restype = c\n"
        "anonymous = l.syscall(c(250), c(1), c(0))\n"
        "named = l.syscall(c(250), c(1), ctypes.c_char_p(b'_ses'))\n"
        "print(json.dumps([anonymous > 0, named, ctypes.get_errno()]))\n",
    )
    result = stack.call("join", timeout=30)
    assert json.loads(result.stdout) == [True, -1, errno.EPERM]


# --- the same probe through the installed ollie-tools, as a throwaway user ------------


@pytest.fixture(scope="module")
def person() -> Iterator[sudo_user.SudoUser]:
    with sudo_user.throwaway() as created:
        yield created


def test_as_a_person_the_filter_holds_through_the_installed_ollie_tools(
    person: sudo_user.SudoUser,
) -> None:
    """Root hides permission problems: the probe runs as a non-root user, through
    the ``ollie-tools`` installed for them, with the shipped profile."""
    dirs = sudo_user.UserDirs(person, f"seccomp-{secrets.token_hex(3)}")
    work = dirs.root / "work"
    work.mkdir(mode=0o755)
    os.chown(work, person.uid, person.gid)
    tools = dirs.root / "probe-tools"
    tools.mkdir(mode=0o755)
    (tools / "probe").write_text(PROBE)
    os.chmod(tools / "probe", 0o755)
    (tools / "probe.meta").write_text(json.dumps({"description": "kernel probe"}))
    env = {**dirs.env(), "OLLIE_TOOLS_PATH": f"{tools}:{person.tools}"}
    done = person.run(
        [str(person.bin / "ollie-tools"), "call", "probe", "--timeout", "30"],
        env,
        work,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert answers["tcp"] == answers["unix"] == "ok"
    for name in ("mptcp", "sock_diag", "listen_unbound", "keyctl", "io_uring_setup"):
        assert answers[name] != "ok", (name, answers)
    assert answers["userfaultfd"] == answers["unshare_user"] == "EPERM"
