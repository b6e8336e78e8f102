"""Pinning the working directory and the rule paths inside it (sandbox/pinning.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.errors import SandboxError
from registry_core.sandbox.mounts import plan_view, view_rows
from registry_core.sandbox.pinning import (
    OpenedPaths,
    open_inside,
    pin_directory,
    pinned,
    same_directory,
)
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def test_a_directory_is_pinned_at_its_real_path_with_its_identity(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pinned(str(tmp_path / "link")) as directory:  # resolved once, then held
        info = os.stat(tmp_path / "real")
        assert directory.path == str(tmp_path / "real")
        assert (directory.device, directory.inode) == (info.st_dev, info.st_ino)
        assert directory.identity == f"{info.st_dev}:{info.st_ino}"
        assert os.fstat(directory.fd).st_ino == info.st_ino
        # Renamed away and replaced by a symlink: the descriptor still is the directory.
        (tmp_path / "real").rename(tmp_path / "moved")
        (tmp_path / "real").symlink_to(tmp_path)
        assert os.fstat(directory.fd).st_ino == info.st_ino


def test_a_missing_directory_or_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"cannot open the working directory .*missing"):
        pin_directory(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SandboxError, match="file"):
        pin_directory(str(tmp_path / "file"))


def test_paths_inside_are_opened_without_following_symlinks(tmp_path: Path) -> None:
    (tmp_path / "work" / "build").mkdir(parents=True)
    (tmp_path / "work" / "out").symlink_to(tmp_path)
    (tmp_path / "work" / "build" / "f").write_text("")
    with pinned(str(tmp_path / "work")) as directory:
        build = open_inside(directory, str(tmp_path / "work" / "build"))
        assert build is not None
        assert os.fstat(build).st_ino == os.stat(tmp_path / "work" / "build").st_ino
        os.close(build)
        file = open_inside(directory, str(tmp_path / "work" / "build" / "f"))
        assert file is not None
        os.close(file)
        assert open_inside(directory, str(tmp_path / "work" / "out")) is None
        assert open_inside(directory, str(tmp_path / "work" / "out" / "work")) is None
        assert open_inside(directory, str(tmp_path / "work" / "nothing")) is None
        assert open_inside(directory, str(tmp_path)) is None  # not inside
        assert open_inside(directory, str(tmp_path / "work")) is None  # itself


def test_opened_paths_hold_the_rule_paths_inside_and_name_the_refused(tmp_path: Path) -> None:
    (tmp_path / "work" / "build").mkdir(parents=True)
    (tmp_path / "work" / "out").symlink_to(tmp_path)
    with pinned(str(tmp_path / "work")) as directory:
        rules = [str(tmp_path / "work" / n) for n in ("build", "out")] + ["/usr"]
        opened = OpenedPaths(directory, rules)
        assert set(opened.fds) == {directory.path, str(tmp_path / "work" / "build")}
        assert opened.refused == [str(tmp_path / "work" / "out")]
        assert opened.inside(str(tmp_path / "work" / "x")) and not opened.inside("/usr")
        build = opened.fds[str(tmp_path / "work" / "build")]
        opened.close()
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(build)
        os.fstat(directory.fd)  # the working directory stays the caller's


def test_same_directory_tells_the_pinned_directory_from_what_its_path_names_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    with pinned(str(tmp_path / "work")) as directory:
        monkeypatch.chdir(tmp_path / "work")
        same_directory(directory)
        (tmp_path / "work").rename(tmp_path / "gone")
        (tmp_path / "work").mkdir()
        monkeypatch.chdir(tmp_path / "work")
        with pytest.raises(OSError, match="not the directory that was checked"):
            same_directory(directory)


def test_the_view_binds_the_working_directory_and_paths_inside_it_by_descriptor(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / "out").symlink_to(tmp_path)
    rules = EffectiveRules(
        "t",
        "/t.yaml",
        (
            PathRule(str(work), Access.RW, "filesystem.rw"),
            PathRule(str(work / "build"), Access.RO, "filesystem.ro"),
            PathRule(str(work / "out"), Access.RW, "filesystem.rw"),
        ),
        NetworkPolicy(NetworkMode.DENY),
        (),
        False,
    )
    with pinned(str(work)) as directory:
        opened = OpenedPaths(directory, [rule.path for rule in rules.paths])
        try:
            view = plan_view(
                rules, cwd=str(work), private_tmp=str(tmp_path), broker_socket=None, opened=opened
            )
            args = list(view.args)
            assert ["--bind-fd", str(directory.fd), str(work)] == args[7:10]
            # build is beneath the writable working directory: Landlock makes it read-only.
            git = opened.fds[str(work / ".git")]
            assert ["--ro-bind-fd", str(git), str(work / ".git")] == args[10:13]
            # The symlink inside is neither bound (its target) nor granted.
            assert str(tmp_path) not in args[7:] and str(work / "out") not in args
            assert [r.path for r in view.landlock] == [str(work), str(work / "build")]
            assert view_rows(view.args)[3:] == [
                ("rw", str(work), ""),
                ("ro", str(work / ".git"), ""),
            ]
        finally:
            opened.close()
