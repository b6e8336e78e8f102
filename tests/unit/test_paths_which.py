"""``paths.which``: ``shutil.which`` for a bare name, never through the working directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from registry_core.paths import which


def _exe(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_the_first_executable_file_in_path_order(tmp_path: Path) -> None:
    _exe(tmp_path / "a" / "bwrap", 0o644)  # not executable
    (tmp_path / "b" / "bwrap").mkdir(parents=True)  # a directory
    wanted = _exe(tmp_path / "c" / "bwrap")
    _exe(tmp_path / "d" / "bwrap")
    search = ":".join(str(tmp_path / d) for d in ("missing", "a", "b", "c", "d"))
    assert which("bwrap", search) == str(wanted)
    assert which("bwrap", search) == shutil.which("bwrap", path=search)


def test_nothing_found_is_none(tmp_path: Path) -> None:
    assert which("bwrap", str(tmp_path)) is None
    assert which("bwrap", "") is None


def test_empty_and_relative_entries_are_never_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # shutil.which would answer ./bwrap for an empty entry or "bin": a file the
    # working directory's owner (a tool, an agent) chose.
    monkeypatch.chdir(tmp_path)
    _exe(tmp_path / "bwrap")
    _exe(tmp_path / "bin" / "bwrap")
    assert shutil.which("bwrap", path=":bin") is not None
    assert which("bwrap", ":bin:.") is None
    real = _exe(tmp_path / "real" / "bwrap")
    assert which("bwrap", f"::bin:{tmp_path / 'real'}") == str(real)
