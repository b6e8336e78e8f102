"""ssh command lines: the safety options first, the forward spec, host checks, rsync quoting."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from registry_core.errors import HostKeyError, RemoteError, SshAuthError, SshError
from registry_core.remote.ssh import (
    SAFE_OPTIONS,
    SshTarget,
    check_host,
    classify_failure,
    extra_options,
    last_words,
    sh_quote_path,
)
from registry_core.trusted import find_trusted, trusted_program

LOCAL = "/run/user/1000/ollie/elevate.sock"
REMOTE = "/run/user/1001/ollie/elevate.sock"


needs_system_ssh = pytest.mark.skipif(
    find_trusted("ssh") is None, reason="no OpenSSH client in a system directory"
)


def option_values(argv: list[str], name: str) -> list[str]:
    return [
        argv[i + 1].split("=", 1)[1]
        for i, a in enumerate(argv[:-1])
        if a == "-o" and argv[i + 1].startswith(name + "=")
    ]


@needs_system_ssh
def test_every_command_starts_with_batch_mode_and_strict_host_keys() -> None:
    target = SshTarget("build-server", ("-o", "BatchMode=no", "-p", "2222"))
    for argv in (target.command("true"), target.forward(REMOTE, LOCAL), target.base()):
        assert argv[0] == trusted_program("ssh")  # the system's, never PATH's
        assert argv[1:5] == list(SAFE_OPTIONS)
        # ssh keeps the first value: the extra "BatchMode=no" comes later and loses.
        assert option_values(argv, "BatchMode")[0] == "yes"
        assert option_values(argv, "StrictHostKeyChecking") == ["yes"]


def test_command_runs_a_script_without_tty_or_forwardings() -> None:
    argv = SshTarget("host", ("-p", "2222")).command("echo hi")
    assert argv[-3:] == ["--", "host", "echo hi"]
    assert "-T" in argv
    assert "ClearAllForwardings=yes" in argv
    assert argv.index("-p") > argv.index("StrictHostKeyChecking=yes")


def test_forward_spec_and_options() -> None:
    argv = SshTarget("laptop").forward(REMOTE, LOCAL)
    i = argv.index("-R")
    assert argv[i + 1] == f"{REMOTE}:{LOCAL}"
    assert argv[-2:] == ["--", "laptop"]
    assert "-N" in argv
    for option in (
        "ExitOnForwardFailure=yes",
        "StreamLocalBindUnlink=yes",
        "ServerAliveInterval=15",
        "ServerAliveCountMax=3",
        "ControlMaster=no",
        "ControlPath=none",
    ):
        assert option in argv, option
    # The forward options cannot be overridden by extras: they precede them.
    extra = SshTarget("laptop", ("-o", "ControlMaster=auto")).forward(REMOTE, LOCAL)
    assert option_values(extra, "ControlMaster")[0] == "no"


@pytest.mark.parametrize("bad", ["relative/x.sock", "/a:b.sock", "/with space.sock"])
def test_forward_refuses_unusable_socket_paths(bad: str) -> None:
    with pytest.raises(RemoteError):
        SshTarget("laptop").forward(bad, LOCAL)


@pytest.mark.parametrize("host", ["laptop", "build-server.example.com", "alice@10.0.0.2", "h_1"])
def test_usable_hosts(host: str) -> None:
    assert check_host(host) == host


@pytest.mark.parametrize(
    "host", ["", "-oProxyCommand=x", "a b", "a/b", "..", "x;rm", "a@-b", "h\n", "x" * 300]
)
def test_unusable_hosts_are_refused(host: str) -> None:
    with pytest.raises(RemoteError):
        check_host(host)
    with pytest.raises(RemoteError):
        SshTarget(host)


def test_extra_options_come_from_env_then_cli_shell_split() -> None:
    env = {"OLLIE_REMOTE_SSH_OPTIONS": "-p 2222 -o 'UserKnownHostsFile=/tmp/k h'"}
    assert extra_options(env, ["-i /k/id"]) == (
        "-p",
        "2222",
        "-o",
        "UserKnownHostsFile=/tmp/k h",
        "-i",
        "/k/id",
    )
    with pytest.raises(RemoteError):
        extra_options({"OLLIE_REMOTE_SSH_OPTIONS": "'unclosed"})


@needs_system_ssh
def test_rsync_shell_quotes_like_rsync_reads_it() -> None:
    shell = SshTarget("h", ("-F", "/tmp/my config", "-o", "X='y'")).rsync_shell()
    ssh = trusted_program("ssh")
    assert shell.startswith(f"{ssh} -o BatchMode=yes -o StrictHostKeyChecking=yes ")
    assert "'/tmp/my config'" in shell
    assert "'X=''y'''" in shell  # a doubled quote inside quotes is a literal quote


def test_remote_paths_for_the_shell() -> None:
    assert sh_quote_path("~/.config/ollie/tools") == '"$HOME"/.config/ollie/tools'
    assert sh_quote_path("~") == '"$HOME"'
    assert sh_quote_path("/opt/my tools") == "'/opt/my tools'"


def test_failures_are_classified_with_advice() -> None:
    unknown = classify_failure(
        "box",
        255,
        "No ED25519 host key is known for [127.0.0.1]:22 and you have requested strict "
        "checking.\r\nHost key verification failed.\r\n",
        "deploy",
    )
    assert isinstance(unknown, HostKeyError)
    assert "connect once with plain `ssh box`" in str(unknown)
    denied = classify_failure("box", 255, "alice@box: Permission denied (publickey).\n", "x")
    assert isinstance(denied, SshAuthError)
    assert "never asks for passwords" in str(denied)
    other = classify_failure("box", 255, "debug1: x\nssh: connect to host box: refused\n", "x")
    assert type(other) is SshError
    assert "refused" in str(other) and "debug1" not in str(other)
    assert last_words("debug1: a\nreal problem\n") == "real problem"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")
def test_openssh_itself_keeps_the_first_value() -> None:
    """The ordering argument above, checked against the real ssh (``ssh -G`` prints the
    configuration it would use, without connecting)."""
    target = SshTarget("example.invalid", ("-o", "BatchMode=no", "-o", "StrictHostKeyChecking=no"))
    argv = [a for a in target.command("true") if a not in ("-T",)][:-1]
    argv.insert(1, "-G")
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    config = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert config["batchmode"] == "yes"
    assert config["stricthostkeychecking"] == "true"


@needs_system_ssh
def test_ssh_is_the_systems_even_with_one_planted_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandboxed tool can write <cwd>/.venv/bin/ssh; agents often put it first on PATH.
    planted = tmp_path / "ssh"
    planted.write_text("#!/bin/sh\nexit 0\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    target = SshTarget("host")
    for argv in (target.command("true"), target.forward(REMOTE, LOCAL), target.base()):
        assert argv[0] != str(planted) and argv[0].startswith("/")
