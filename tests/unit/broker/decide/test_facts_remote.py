"""Unit tests of what a remote host's dispatcher may run for a tool (``remote_programs``)
and of the facts of a request forwarded by ollie-remote (``gather_facts`` with
``remote_tools_dir``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.decide.facts import gather_facts, remote_programs
from registry_core.broker.wire import messages as m
from registry_core.pinned import display_argv, pinned_argv
from registry_core.registry import Registry, RegistryLoader
from registry_core.registry.meta import MAX_META_BYTES
from registry_core.registry.model import Status, Tool

REMOTE = "/home/alice/.config/ollie/tools"


def tool_at(meta: Path, name: str = "probe") -> Tool:
    return Tool(name=name, source_file=str(meta), status=Status.AVAILABLE)


def write_meta(directory: Path, obj: Any, name: str = "probe") -> Path:
    meta = directory / f"{name}.meta"
    meta.write_text(json.dumps(obj))
    return meta


def test_every_cmd_of_every_variant_is_a_remote_program(tmp_path: Path) -> None:
    (tmp_path / "probe").write_text("#!/bin/sh\n")
    (tmp_path / "helper").write_text("#!/bin/sh\n")
    meta = write_meta(
        tmp_path,
        {
            "description": "d",
            "cmd": "bin/run",
            "variants": [
                {"cmd": "/opt/abs/prog"},
                {"cmd": "helper"},  # a file of the tools directory: deployed there
                {"cmd": "onpath"},  # not in the tools directory: the remote PATH's
                {"cmd": ""},
                {"cmd": 5},
                {"match": {"os": "linux"}},
                "not a variant",
            ],
        },
    )
    assert remote_programs(tool_at(meta), REMOTE) == {
        f"{REMOTE}/probe",
        f"{REMOTE}/bin/run",
        "/opt/abs/prog",
        f"{REMOTE}/helper",
        "*/onpath",
    }


def test_a_cmd_path_is_normalised_under_the_remote_tools_dir(tmp_path: Path) -> None:
    meta = write_meta(tmp_path, {"cmd": "./bin/../run"})
    assert remote_programs(tool_at(meta), REMOTE) == {f"{REMOTE}/run", "*/probe"}


def test_the_tool_itself_found_on_the_remote_path_is_marked(tmp_path: Path) -> None:
    # No executable named like the tool in its directory and no cmd.
    meta = write_meta(tmp_path, {"description": "d"})
    assert remote_programs(tool_at(meta), REMOTE) == {"*/probe"}


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",  # ValueError
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError
        b'["cmd", "other"]',  # JSON, but not an object
        b'"other"',
    ],
    ids=["not-json", "nested-too-deep", "a-list", "a-string"],
)
def test_a_meta_that_is_no_longer_an_object_gives_only_the_tools_name(
    tmp_path: Path, content: bytes
) -> None:
    meta = tmp_path / "probe.meta"
    meta.write_bytes(content)
    assert remote_programs(tool_at(meta), REMOTE) == {"*/probe"}


def test_a_meta_removed_since_the_scan_gives_only_the_tools_name(tmp_path: Path) -> None:
    (tmp_path / "probe").write_text("#!/bin/sh\n")
    assert remote_programs(tool_at(tmp_path / "probe.meta"), REMOTE) == {f"{REMOTE}/probe"}


def test_a_meta_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    text = json.dumps({"cmd": "other"})
    meta = tmp_path / "probe.meta"
    meta.write_text(text + " " * (MAX_META_BYTES + 1 - len(text)))
    assert meta.stat().st_size == MAX_META_BYTES + 1
    assert remote_programs(tool_at(meta), REMOTE) == {"*/probe"}
    meta.write_text(text + " " * (MAX_META_BYTES - len(text)))  # at the limit: read
    assert remote_programs(tool_at(meta), REMOTE) == {"*/probe", "*/other"}


def test_a_symlinked_meta_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "real.meta"
    real.parent.mkdir()
    real.write_text(json.dumps({"cmd": "other"}))
    (tmp_path / "probe.meta").symlink_to(real)
    assert remote_programs(tool_at(tmp_path / "probe.meta"), REMOTE) == {"*/probe", "*/other"}


# --- gather_facts for a forwarded request ----------------------------------------------


@pytest.fixture
def remote_registry(tmp_path: Path) -> Registry:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, meta in (
        ("probe", {"description": "Probe.", "variants": [{"cmd": "probe_a"}, {"cmd": "lsblk"}]}),
        ("rooty", {"description": "Root.", "sudo": True}),
    ):
        (tools / f"{name}.meta").write_text(json.dumps(meta))
    for exe in ("probe_a", "rooty"):
        (tools / exe).write_text("#!/bin/sh\n")
        (tools / exe).chmod(0o755)
    return RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}).load()


def forwarded(
    registry: Registry, tool: str, argv: list[str], kind: m.Kind = m.Kind.SANDBOX
) -> tuple[str, ...]:
    req = m.ElevateRequest(id=1, tool=tool, kind=kind, argv=tuple(argv), args={}, cwd="/")
    return gather_facts(registry, req, remote_tools_dir=REMOTE).mismatches


SH_SHA = hashlib.sha256(b"#!/bin/sh\n").hexdigest()  # the deployed copies' bytes
PYTHON_THERE = "(/usr/bin, /bin, /usr/sbin, /sbin or /usr/local/bin)/python3"


def there(program: str, sha: str = SH_SHA, python: str = "/usr/bin/python3") -> list[str]:
    """The pinned exec argv the remote dispatcher sends for ``program``."""
    return pinned_argv(python, sha, program)


def would_run(tool: str, sudo: bool = False) -> list[str]:
    """How a mismatch shows what the registry would run over there."""
    where = f"{REMOTE}/({tool} or a cmd of its .meta)"
    pinned = pinned_argv(PYTHON_THERE, "<sha256>", where)
    sudo_there = "(/usr/bin, /bin, /usr/sbin, /sbin or /usr/local/bin)/sudo"
    return display_argv([sudo_there, "-A", "--", *pinned] if sudo else pinned)


def test_a_forwarded_request_may_run_any_deployed_program(remote_registry: Registry) -> None:
    assert forwarded(remote_registry, "probe", there(f"{REMOTE}/probe_a")) == ()
    # A program the remote PATH finds: any absolute path of that name (its bytes there
    # are not the broker's to know).
    assert forwarded(remote_registry, "probe", there("/usr/bin/lsblk")) == ()
    assert forwarded(remote_registry, "probe", there("/usr/local/sbin/lsblk")) == ()
    # The remote host's python3, by its absolute path in a system directory.
    assert (
        forwarded(remote_registry, "probe", there(f"{REMOTE}/probe_a", python="/bin/python3")) == ()
    )


def test_a_forwarded_request_for_another_program_is_flagged(remote_registry: Registry) -> None:
    expected = would_run("probe")
    for argv in (
        there("/tmp/probe_a"),
        # A PATH program must be named by an absolute path.
        there("lsblk"),
        [*there(f"{REMOTE}/probe_a"), "-x"],
        [f"{REMOTE}/probe_a"],  # not through the pinned exec
        there(f"{REMOTE}/probe_a", python="python3"),
        there(f"{REMOTE}/probe_a", python="/tmp/x/python3"),
        [],
    ):
        assert forwarded(remote_registry, "probe", argv) == (
            f"requested argv {display_argv(argv)!r}; the registry would run {expected!r}",
        ), argv


def test_a_forwarded_file_whose_sha256_is_not_the_deployed_copys_is_flagged(
    remote_registry: Registry,
) -> None:
    other = hashlib.sha256(b"#!/bin/sh\nrm -rf ~\n").hexdigest()
    assert forwarded(remote_registry, "probe", there(f"{REMOTE}/probe_a", other)) == (
        f"the remote file's sha256 {other} is not the deployed copy's {SH_SHA}",
    )


def test_a_forwarded_sudo_request_is_checked_in_the_dispatchers_form(
    remote_registry: Registry,
) -> None:
    program = f"{REMOTE}/rooty"
    pinned = there(program)
    # The remote host's own sudo, a file over there: a name in a system directory.
    for sudo in (
        "/usr/bin/sudo",
        "/bin/sudo",
        "/usr/sbin/sudo",
        "/sbin/sudo",
        "/usr/local/bin/sudo",
    ):
        assert forwarded(remote_registry, "rooty", [sudo, "-A", "--", *pinned], m.Kind.SUDO) == ()
    for argv in (
        ["doas", "-A", "--", *pinned],
        # A bare name runs what the remote requester's PATH finds; the others are
        # files a tool there may have written.
        ["sudo", "-A", "--", *pinned],
        ["/opt/remote/bin/sudo", "-A", "--", *pinned],
        ["/tmp/x/sudo", "-A", "--", *pinned],
        ["/usr/bin/../../tmp/sudo", "-A", "--", *pinned],
        ["/usr/bin/./sudo", "-A", "--", *pinned],
        ["/usr/bin/sudo", "-S", "--", *pinned],
        ["/usr/bin/sudo", "-A", "-E", *pinned],
        ["/usr/bin/sudo", "-A", "--", *there("/tmp/rooty")],
        ["/usr/bin/sudo", "-A", "--", *pinned, "-x"],
        ["/usr/bin/sudo", "-A", "--", program],
        ["/usr/bin/sudo", "-A", "--"],
    ):
        would = would_run("rooty", sudo=True)
        expected = f"requested argv {display_argv(argv)!r}; the registry would run {would!r}"
        assert forwarded(remote_registry, "rooty", argv, m.Kind.SUDO) == (expected,), argv
