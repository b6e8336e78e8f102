"""Tests of the kernel-independent parts of registry_core.sandbox.landlock.

Real enforcement is in tests/integration/test_landlock.py; here: rights per
ABI, struct layouts, and the best-effort stand-in (only no_new_privs).
"""

from __future__ import annotations

import ctypes
import subprocess

import pytest

from registry_core.sandbox import landlock
from registry_core.sandbox.landlock import (
    FILE_ONLY_ACCESS,
    FsAccess,
    NetAccess,
    RulesetBuilder,
    Scope,
    fs_access_for_abi,
    net_access_for_abi,
    no_landlock_sandbox,
    scopes_for_abi,
)


def test_no_rights_without_landlock() -> None:
    assert fs_access_for_abi(0) == FsAccess(0)
    assert net_access_for_abi(0) == NetAccess(0)
    assert scopes_for_abi(0) == Scope(0)


@pytest.mark.parametrize(
    ("abi", "value"),
    [(1, 0x1FFF), (2, 0x3FFF), (3, 0x7FFF), (4, 0x7FFF), (5, 0xFFFF), (6, 0xFFFF), (7, 0xFFFF)],
)
def test_filesystem_rights_per_abi(abi: int, value: int) -> None:
    assert int(fs_access_for_abi(abi)) == value


def test_network_and_scopes_per_abi() -> None:
    assert net_access_for_abi(3) == NetAccess(0)
    assert int(net_access_for_abi(4)) == 0b11
    assert scopes_for_abi(5) == Scope(0)
    assert int(scopes_for_abi(6)) == 0b11
    assert scopes_for_abi(7) == scopes_for_abi(6)


def test_file_only_rights() -> None:
    assert FILE_ONLY_ACCESS == (
        FsAccess.EXECUTE
        | FsAccess.WRITE_FILE
        | FsAccess.READ_FILE
        | FsAccess.TRUNCATE
        | FsAccess.IOCTL_DEV
    )
    assert not FILE_ONLY_ACCESS & FsAccess.READ_DIR


def test_struct_layouts_match_the_kernel_uapi() -> None:
    assert ctypes.sizeof(landlock._RulesetAttr) == 24
    assert ctypes.sizeof(landlock._PathBeneathAttr) == 12  # packed
    assert ctypes.sizeof(landlock._NetPortAttr) == 16


def test_builder_refuses_without_landlock() -> None:
    with pytest.raises(OSError, match="not available"):
        RulesetBuilder(0, fs_access_for_abi(7))


def test_best_effort_stand_in_sets_only_no_new_privs() -> None:
    sandbox = no_landlock_sandbox()
    assert not sandbox.enforcing
    assert sandbox.report.enforced is False
    result = subprocess.run(
        ["grep", "NoNewPrivs", "/proc/self/status"],
        preexec_fn=sandbox.preexec,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["NoNewPrivs:", "1"]


def test_closed_stand_in_fails_closed() -> None:
    sandbox = no_landlock_sandbox()
    sandbox.close()
    assert sandbox.closed
    with pytest.raises(subprocess.SubprocessError):
        subprocess.run(["true"], preexec_fn=sandbox.preexec, check=False)
