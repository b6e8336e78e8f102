"""Trusted programs: found in the system directories only, and only when root alone
could have put them there (registry_core.trusted)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core import trusted
from registry_core.errors import UntrustedProgramError

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making root-owned test dirs")


@pytest.fixture
def system_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A root-owned 0755 directory outside /tmp standing in for /usr/bin."""
    base = Path(f"/run/ollie-trusted-test-{os.getpid()}")
    base.mkdir(mode=0o755)
    os.chmod(base, 0o755)
    monkeypatch.setattr(trusted, "SYSTEM_DIRS", (str(base),))
    try:
        yield base
    finally:
        shutil.rmtree(base)


def _program(path: Path, mode: int = 0o755) -> Path:
    path.write_text("#!/bin/sh\n")
    os.chmod(path, mode)
    return path


def test_a_system_program_is_found_by_its_absolute_path() -> None:
    found = trusted.trusted_program("sh")
    assert os.path.isabs(found)
    assert os.path.dirname(found) in trusted.SYSTEM_DIRS


def test_path_is_never_consulted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _program(tmp_path / "sh")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert trusted.trusted_program("sh") != str(tmp_path / "sh")


def test_a_missing_program_names_itself_and_its_package() -> None:
    with pytest.raises(UntrustedProgramError) as info:
        trusted.trusted_program("ollie-no-such-program", package="ollie-pkg")
    assert info.value.program == "ollie-no-such-program"
    assert info.value.package == "ollie-pkg"
    assert "ollie-pkg" in str(info.value)


def test_names_with_a_slash_are_refused() -> None:
    assert trusted.find_trusted("../bin/sh") is None
    assert trusted.find_trusted("") is None


def test_files_under_a_world_writable_directory_are_untrusted(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    program = _program(shared / "tool")
    reason = trusted.check_trusted(str(program))
    assert reason is not None
    assert "writable by others" in reason or "not owned by root" in reason


def test_relative_paths_are_untrusted() -> None:
    assert trusted.check_trusted("bin/sh") is not None


@needs_root
def test_a_root_owned_program_in_a_root_owned_directory_is_trusted(system_dir: Path) -> None:
    program = _program(system_dir / "helper")
    assert trusted.check_trusted(str(program)) is None
    assert trusted.trusted_program("helper") == str(program)


@needs_root
def test_a_group_or_world_writable_program_is_untrusted(system_dir: Path) -> None:
    _program(system_dir / "helper", 0o775)
    with pytest.raises(UntrustedProgramError, match="writable by others"):
        trusted.trusted_program("helper")
    _program(system_dir / "helper", 0o757)
    assert trusted.find_trusted("helper") is None


@needs_root
def test_a_program_owned_by_another_user_is_untrusted(system_dir: Path) -> None:
    program = _program(system_dir / "helper")
    os.chown(program, 65534, 65534)
    with pytest.raises(UntrustedProgramError, match="not owned by root"):
        trusted.trusted_program("helper")


@needs_root
def test_a_system_symlink_into_a_writable_place_is_untrusted(
    system_dir: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    target = _program(shared / "real")
    (system_dir / "helper").symlink_to(target)
    assert trusted.find_trusted("helper") is None


@needs_root
def test_a_symlink_to_a_trusted_file_is_followed(system_dir: Path) -> None:
    _program(system_dir / "helper-1.0")
    (system_dir / "helper").symlink_to("helper-1.0")
    assert trusted.trusted_program("helper") == str(system_dir / "helper")


@needs_root
def test_a_directory_writable_by_its_group_makes_its_files_untrusted(system_dir: Path) -> None:
    sub = system_dir / "sub"
    sub.mkdir()
    program = _program(sub / "helper")
    os.chmod(sub, 0o775)
    assert "writable by others" in (trusted.check_trusted(str(program)) or "")


@needs_root
def test_a_non_executable_file_is_untrusted(system_dir: Path) -> None:
    _program(system_dir / "helper", 0o644)
    assert trusted.find_trusted("helper") is None


@needs_root
def test_a_sticky_directory_does_not_make_roots_entries_in_it_untrusted(
    system_dir: Path,
) -> None:
    # /tmp's kind: writable by all, but nobody else may rename or remove root's entries.
    sticky = system_dir / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    inner = sticky / "tools"
    inner.mkdir(mode=0o755)
    assert trusted.check_trusted(str(_program(inner / "tool"))) is None
    os.chmod(sticky, 0o777)  # the same without the sticky bit: anyone can swap "tools"
    assert "writable by others" in (trusted.check_trusted(str(inner / "tool")) or "")
    os.chmod(sticky, 0o1777)
    os.chown(inner, 65534, 65534)  # an entry of another user's in the sticky directory
    assert "not owned by root" in (trusted.check_trusted(str(inner / "tool")) or "")
