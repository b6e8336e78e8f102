"""``sandbox show`` exactly: the whole JSON description and the whole text, both variants.

Complements test_describe.py (which checks selected facts) with complete
expected values, so a changed word, column or section shows.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from registry_core.sandbox import landlock, seccomp
from registry_core.sandbox.describe import describe, format_text
from registry_core.sandbox.profiles import Access, LogLevel, NetworkMode
from registry_core.sandbox.report import SkippedPath
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule

WRITE_RIGHTS = [
    "write_file",
    "read_file",
    "read_dir",
    "remove_dir",
    "remove_file",
    "make_char",
    "make_dir",
    "make_reg",
    "make_sock",
    "make_fifo",
    "make_block",
    "make_sym",
    "refer",
    "truncate",
    "ioctl_dev",
]
UDP = {
    "feature": "udp",
    "reason": "UDP and other non-TCP sockets are not restricted by Landlock",
    "needs_abi": None,
    "requested": False,
}


def _rules(tmp_path: Path, mode: NetworkMode = NetworkMode.RESTRICTED) -> EffectiveRules:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "work").mkdir()
    return EffectiveRules(
        profile="demo",
        source="/p/demo.yaml",
        paths=(
            PathRule(str(tmp_path / "dir"), Access.RW, "filesystem.rw"),
            PathRule(str(tmp_path / "file"), Access.ROX, "filesystem.rox"),
            PathRule(str(tmp_path / "missing"), Access.RO, "filesystem.ro"),
        ),
        network=NetworkPolicy(mode, (8080,), (443, 80)),
        env=("PATH", "LC_*"),
        best_effort=True,
        log_level=LogLevel.DEBUG,
        warnings=("w1", "w2"),
        skipped=(SkippedPath("{X}/y", "variable X is not set"),),
        ldd=True,
        add_exec=True,
        env_values=(("TOKEN", "s3cret"),),
    )


def _calls(mode: NetworkMode, bind: tuple[int, ...], *, enforced: bool = True) -> str:
    state = "refused with an errno" if enforced else "NOT ENFORCED"
    refused = "".join(f"  {rule.what}\n" for rule in seccomp.plan(mode, bind))
    return f"System calls ({state}):\n{refused}\n"


def test_the_whole_description_with_namespaces(tmp_path: Path) -> None:
    rules = _rules(tmp_path)
    data = describe(rules, 7, bwrap="/usr/bin/bwrap", cwd=str(tmp_path / "work"))
    t = str(tmp_path)
    expected: dict[str, Any] = {
        "profile": "demo",
        "source": "/p/demo.yaml",
        "kernel_abi": 7,
        "landlock": True,
        "best_effort": True,
        "log_level": "debug",
        "filesystem": [
            {
                "path": f"{t}/dir",
                "access": "rw",
                "kind": "dir",
                "origin": "filesystem.rw",
                "rights": WRITE_RIGHTS,
            },
            {
                "path": f"{t}/file",
                "access": "rox",
                "kind": "file",
                "origin": "filesystem.rox",
                "rights": ["execute", "read_file"],
            },
            {
                "path": f"{t}/missing",
                "access": "ro",
                "kind": "missing",
                "origin": "filesystem.ro",
                "rights": [],
            },
        ],
        "network": {"mode": "restricted", "bind_tcp": [8080], "connect_tcp": [443, 80]},
        "scoped": ["abstract_unix_socket", "signal"],
        "env": ["PATH", "LC_*"],
        "env_set": ["TOKEN"],
        "advanced": {"ldd": True, "add_exec": True},
        "limits": {"tasks": 256, "memory": 4 << 30, "cpu": None, "enforced_by": "rlimits"},
        "seccomp": {
            "enforced": True,
            "refused": [r.what for r in seccomp.plan(NetworkMode.RESTRICTED, (8080,))],
        },
        "namespaces": {
            "builder": "/usr/bin/bwrap",
            "enforced": True,
            "unshared": ["user", "mount", "pid", "ipc", "uts", "cgroup"],
            "view": [
                {
                    "kind": "proc",
                    "path": "/proc",
                    "detail": "fresh procfs: this call's processes only",
                },
                {
                    "kind": "dev",
                    "path": "/dev",
                    "detail": "minimal: null zero full random urandom tty pts shm",
                },
                {"kind": "rw", "path": "/tmp", "detail": "private, removed after the call"},
                {"kind": "rw", "path": f"{t}/dir", "detail": ""},
                {"kind": "ro", "path": f"{t}/file", "detail": ""},
                {"kind": "dir", "path": f"{t}/work", "detail": "empty (named by no rule)"},
            ],
            "read_only_git": [],
        },
        "unenforced": [
            UDP,
            {
                "feature": "unix_sockets",
                "reason": "connect() to named Unix sockets inside paths the profile names is "
                "not restricted (every other socket is absent from the mount view)",
                "needs_abi": None,
                "requested": False,
            },
        ],
        "warnings": ["w1", "w2"],
        "skipped": [{"path": "{X}/y", "reason": "variable X is not set"}],
    }
    assert data == expected


def test_the_whole_text_with_namespaces(tmp_path: Path) -> None:
    rules = _rules(tmp_path)
    text = format_text(describe(rules, 7, bwrap="/usr/bin/bwrap", cwd=str(tmp_path / "work")))
    t = str(tmp_path)
    pad = " " * len(t)
    assert text == (
        "Profile:      demo (/p/demo.yaml)\n"
        "Landlock:     ABI 7\n"
        "Best effort:  yes\n"
        "\n"
        "Filesystem:\n"
        f"  rw   {t}/dir      dir      filesystem.rw\n"
        f"  rox  {t}/file     file     filesystem.rox\n"
        f"  ro   {t}/missing  missing  filesystem.ro\n"
        "\n"
        "Network:\n"
        "  mode         restricted\n"
        "  connect tcp  443, 80\n"
        "  bind tcp     8080\n"
        "\n"
        "Scoped:\n"
        "  abstract_unix_socket\n"
        "  signal\n"
        "\n"
        "Namespaces: user, mount, pid, ipc, uts, cgroup (built by /usr/bin/bwrap)\n"
        "Mount view (everything else is absent):\n"
        f"  proc  /proc{pad}  fresh procfs: this call's processes only\n"
        f"  dev   /dev{pad}   minimal: null zero full random urandom tty pts shm\n"
        f"  rw    /tmp{pad}   private, removed after the call\n"
        f"  rw    {t}/dir\n"
        f"  ro    {t}/file\n"
        f"  dir   {t}/work  empty (named by no rule)\n"
        "\n"
        f"{_calls(NetworkMode.RESTRICTED, (8080,))}"
        "Limits per call (rlimits):\n"
        "  tasks   256\n"
        "  memory  4G data per process\n"
        "  cpu     call timeout x CPUs, per process\n"
        "\n"
        "Environment passed:\n"
        "  PATH\n"
        "  LC_*\n"
        "\n"
        "Environment set:\n"
        "  TOKEN\n"
        "\n"
        "Libraries: each call's executable gets its shared libraries (ldd)\n"
        "\n"
        "Not enforced:\n"
        "  udp           UDP and other non-TCP sockets are not restricted by Landlock\n"
        "  unix_sockets  connect() to named Unix sockets inside paths the profile names is not "
        "restricted (every other socket is absent from the mount view)\n"
        "\n"
        "Skipped paths:\n"
        "  {X}/y  variable X is not set\n"
        "\n"
        "Warnings:\n"
        "  w1\n"
        "  w2\n"
    )
    assert "s3cret" not in text


def test_the_whole_text_without_namespaces_on_an_old_kernel(tmp_path: Path) -> None:
    rules = _rules(tmp_path, NetworkMode.DENY)
    data = describe(rules, 2, cwd=str(tmp_path / "work"))
    assert data["namespaces"]["enforced"] is False
    assert data["namespaces"]["unshared"] == []
    assert data["namespaces"]["builder"] is None
    text = format_text(data)
    before, _, after = text.partition("\nNetwork:\n")
    assert after.split("\nEnvironment passed:\n")[0] == (
        "  mode  deny (no TCP bind or connect)\n"
        "\n"
        "Scoped:\n"
        "  (none)\n"
        "\n"
        "Namespaces: NOT ENFORCED (bwrap from the bubblewrap package is missing)\n"
        "\n"
        f"{_calls(NetworkMode.DENY, (), enforced=False)}"
        "Limits per call (rlimits (memory and cpu only)):\n"
        "  tasks   256\n"
        "  memory  4G data per process\n"
        "  cpu     call timeout x CPUs, per process\n"
    )
    assert before.startswith("Profile:      demo (/p/demo.yaml)\nLandlock:     ABI 2\n")
    assert text.split("\nNot enforced:\n")[1].split("\n\n")[0] == (
        "  namespaces    bwrap (bubblewrap) is not installed in a system directory Ollie "
        "trusts: the session D-Bus, X11, ssh-agent, tmux and every other socket in /tmp and "
        "/run/user stay reachable, the real /tmp is shared, and processes may outlive the "
        "call\n"
        "  truncate      truncate(2) of files is not restricted (needs ABI 3)\n"
        "  tcp           TCP bind/connect restrictions are not enforced (needs ABI 4)\n"
        "  ioctl_dev     ioctl(2) on device files is not restricted (needs ABI 5)\n"
        "  scope         signals and abstract Unix sockets outside the sandbox are not "
        "restricted (needs ABI 6)\n"
        "  udp           UDP and other non-TCP sockets are not restricted by Landlock\n"
        "  unix_sockets  connect() to named Unix sockets is not restricted; only the environment "
        "allowlist hides X11, D-Bus and ssh-agent"
    )
    assert data["unenforced"][0] == {
        "feature": "namespaces",
        "reason": data["unenforced"][0]["reason"],
        "needs_abi": None,
        "requested": True,
    }
    # ABI 2 handles no truncate or ioctl right: the directory gets fewer rights.
    assert data["filesystem"][0]["rights"] == [
        r for r in WRITE_RIGHTS if r not in ("truncate", "ioctl_dev")
    ]


def test_a_denied_network_is_unshared_and_an_open_one_is_not(tmp_path: Path) -> None:
    rules = _rules(tmp_path, NetworkMode.DENY)
    data = describe(rules, 7, bwrap="/b", cwd=str(tmp_path))
    assert data["namespaces"]["unshared"] == ["user", "mount", "pid", "ipc", "uts", "cgroup", "net"]
    assert "Namespaces: user, mount, pid, ipc, uts, cgroup, net (built by /b)\n" in format_text(
        data
    )
    data = describe(
        EffectiveRules("o", "/o.yaml", (), NetworkPolicy(NetworkMode.UNRESTRICTED), (), False), 7
    )
    text = format_text(data)
    assert "\nNetwork:\n  mode  unrestricted\n\nScoped:\n" in text
    assert "\nFilesystem:\n  (none)\n" in text
    assert "\nEnvironment passed:\n  (none)\n\nNot enforced:\n" in text
    assert "Best effort:  no\n" in text
    for absent in ("Environment set:", "Libraries:", "Skipped paths:", "Warnings:"):
        assert absent not in text
    # An open network has no UDP gap: only the Unix socket one is left at ABI 7.
    assert [gap["feature"] for gap in data["unenforced"]] == ["namespaces", "unix_sockets"]


def test_the_kernel_abi_is_detected_and_newer_abis_are_masked_to_what_is_known(
    tmp_path: Path,
) -> None:
    rules = _rules(tmp_path)
    assert describe(rules)["kernel_abi"] == landlock.abi_version()
    newer = describe(rules, landlock.MAX_KNOWN_ABI + 2)
    assert newer["kernel_abi"] == landlock.MAX_KNOWN_ABI + 2
    assert newer["filesystem"][0]["rights"] == WRITE_RIGHTS
    assert newer["scoped"] == ["abstract_unix_socket", "signal"]
    assert describe(rules, 0)["landlock"] is False
    assert describe(rules, 1)["landlock"] is True


def test_read_only_git_entries_are_listed(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    rules = EffectiveRules(
        "g",
        "/g.yaml",
        (PathRule(str(tmp_path / "repo"), Access.RW, "filesystem.rw"),),
        NetworkPolicy(NetworkMode.DENY),
        (),
        False,
    )
    data = describe(rules, 7, bwrap="/b", cwd=str(tmp_path / "repo"))
    assert data["namespaces"]["read_only_git"] == [str(tmp_path / "repo" / ".git")]
    text = format_text(data)
    assert f"\nRead-only .git:\n  {tmp_path / 'repo' / '.git'}\n" in text
    # after the mount view, which stays, like everything before it
    assert text.startswith("Profile:      g (/g.yaml)\n")
    assert text.index("Mount view (everything else is absent):\n") < text.index("Read-only .git:")


def test_the_working_directory_defaults_to_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = EffectiveRules("c", "/c.yaml", (), NetworkPolicy(NetworkMode.DENY), (), False)
    monkeypatch.chdir(tmp_path)
    view = describe(rules, 7, bwrap="/b")["namespaces"]["view"]
    assert view[-1] == {"kind": "dir", "path": str(tmp_path), "detail": "empty (named by no rule)"}


def test_the_broker_socket_in_the_view_and_a_restricted_network_without_ports(
    tmp_path: Path,
) -> None:
    (tmp_path / "run").mkdir()
    sock = tmp_path / "run" / "elevate.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(sock))
        rules = EffectiveRules("c", "/c.yaml", (), NetworkPolicy(NetworkMode.RESTRICTED), (), False)
        data = describe(rules, 7, bwrap="/b", cwd=str(tmp_path), broker_socket=str(sock))
    finally:
        server.close()
    assert data["namespaces"]["view"][3:] == [
        {"kind": "ro", "path": str(sock), "detail": ""},
        {"kind": "dir", "path": str(tmp_path), "detail": "empty (named by no rule)"},
    ]
    width = len(str(sock))
    assert format_text(data) == (
        "Profile:      c (/c.yaml)\n"
        "Landlock:     ABI 7\n"
        "Best effort:  no\n"
        "\n"
        "Filesystem:\n"
        "  (none)\n"
        "\n"
        "Network:\n"
        "  mode         restricted\n"
        "  connect tcp  none\n"
        "  bind tcp     none\n"
        "\n"
        "Scoped:\n"
        "  abstract_unix_socket\n"
        "  signal\n"
        "\n"
        "Namespaces: user, mount, pid, ipc, uts, cgroup (built by /b)\n"
        "Mount view (everything else is absent):\n"
        f"  proc  {'/proc'.ljust(width)}  fresh procfs: this call's processes only\n"
        f"  dev   {'/dev'.ljust(width)}  minimal: null zero full random urandom tty pts shm\n"
        f"  rw    {'/tmp'.ljust(width)}  private, removed after the call\n"
        f"  ro    {sock}\n"
        f"  dir   {str(tmp_path).ljust(width)}  empty (named by no rule)\n"
        "\n"
        f"{_calls(NetworkMode.RESTRICTED, ())}"
        "Limits per call (rlimits):\n"
        "  tasks   256\n"
        "  memory  4G data per process\n"
        "  cpu     call timeout x CPUs, per process\n"
        "\n"
        "Environment passed:\n"
        "  (none)\n"
        "\n"
        "Not enforced:\n"
        "  udp           UDP and other non-TCP sockets are not restricted by Landlock\n"
        "  unix_sockets  connect() to named Unix sockets inside paths the profile names is not "
        "restricted (every other socket is absent from the mount view)\n"
    )


def test_a_rule_naming_tmp_is_the_calls_private_tmp_in_the_view(tmp_path: Path) -> None:
    # With namespaces `sandbox show` expands {TMPDIR} to /tmp (as the dispatcher does): the
    # rule names the call's private /tmp, which the view already has, never the host's.
    rules = EffectiveRules(
        "t",
        "/t.yaml",
        (PathRule("/tmp", Access.RW, "filesystem.rw"),),
        NetworkPolicy(NetworkMode.DENY),
        (),
        False,
    )
    data = describe(rules, 7, bwrap="/b", cwd=str(tmp_path))
    assert data["filesystem"] == [
        {
            "path": "/tmp",
            "access": "rw",
            "kind": "dir",
            "origin": "filesystem.rw",
            "rights": WRITE_RIGHTS,
        }
    ]
    assert data["namespaces"]["view"][2:] == [
        {"kind": "rw", "path": "/tmp", "detail": "private, removed after the call"},
        {"kind": "dir", "path": str(tmp_path), "detail": "empty (named by no rule)"},
    ]


def test_with_a_user_manager_the_limits_are_the_cgroup_scopes_and_the_rlimits(
    tmp_path: Path,
) -> None:
    rules = _rules(tmp_path)
    data = describe(rules, 7, bwrap="/usr/bin/bwrap", cwd=str(tmp_path / "work"), cgroup=True)
    assert data["limits"]["enforced_by"] == "cgroup (systemd scope) + rlimits"
    text = format_text(data)
    assert text.split("\nLimits per call ")[1].split("\n\n")[0] == (
        "(cgroup (systemd scope) + rlimits):\n"
        "  tasks   256\n"
        "  memory  4G data per process, 4G for the whole call\n"
        "  cpu     call timeout x CPUs, per process"
    )
    # Without namespaces no scope is used (the Landlock-only path runs the tool directly).
    bare = describe(rules, 7, cwd=str(tmp_path / "work"), cgroup=True)
    assert bare["limits"]["enforced_by"] == "rlimits (memory and cpu only)"
