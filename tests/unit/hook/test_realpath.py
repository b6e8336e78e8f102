"""The real path of an agent's file: links in any component, ``..``, loops, unreadable parts."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from registry_core.hook.realpath import (
    MAX_LINKS,
    MAX_PATH,
    Unresolvable,
    is_beneath,
    real_path,
    resolve,
)


def test_a_path_without_links_is_itself_existing_or_not(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert real_path(str(tmp_path / "a")) == str(tmp_path / "a")
    assert real_path(f"{tmp_path}/a/./new/deeper.txt") == str(tmp_path / "a/new/deeper.txt")
    assert real_path(f"{tmp_path}//a/") == str(tmp_path / "a")


def test_links_in_the_last_and_in_directory_components_are_followed(tmp_path: Path) -> None:
    (tmp_path / "home" / "deep").mkdir(parents=True)
    (tmp_path / "abs").symlink_to(tmp_path / "home")  # absolute target
    (tmp_path / "rel").symlink_to("home/deep")  # relative to the link's directory
    (tmp_path / "home" / "deep" / "up").symlink_to("..")
    assert real_path(f"{tmp_path}/abs/x") == str(tmp_path / "home" / "x")
    assert real_path(f"{tmp_path}/rel/new/x") == str(tmp_path / "home/deep/new/x")
    assert real_path(f"{tmp_path}/rel/up/deep/up/x") == str(tmp_path / "home" / "x")


def test_a_dangling_link_names_the_file_it_would_create(tmp_path: Path) -> None:
    (tmp_path / "NOTES.md").symlink_to(tmp_path / "elsewhere" / ".bashrc")
    assert real_path(str(tmp_path / "NOTES.md")) == str(tmp_path / "elsewhere" / ".bashrc")


def test_dotdot_is_read_as_the_kernel_does_and_an_ambiguous_one_refused(tmp_path: Path) -> None:
    (tmp_path / "home" / "deep").mkdir(parents=True)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "sub").symlink_to(tmp_path / "home" / "deep")
    with pytest.raises(Unresolvable) as caught:
        real_path(f"{tmp_path}/project/sub/../x")
    assert str(tmp_path / "home" / "x") in str(caught.value)  # the kernel's reading
    assert str(tmp_path / "project" / "x") in str(caught.value)  # the lexical one
    # Where both readings agree (no link before the ..), there is nothing to refuse.
    assert real_path(f"{tmp_path}/project/new/../x") == str(tmp_path / "project" / "x")
    assert real_path("/../../etc") == "/etc"


def test_a_loop_is_unresolvable_and_a_long_chain_is_not(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "self").symlink_to("self/x")
    for name in ("a", "b", "self"):
        with pytest.raises(Unresolvable, match="symbolic links"):
            real_path(str(tmp_path / name))
    (tmp_path / "end").write_text("")
    previous = "end"
    for index in range(MAX_LINKS):
        (tmp_path / f"l{index}").symlink_to(previous)
        previous = f"l{index}"
    assert real_path(str(tmp_path / previous)) == str(tmp_path / "end")
    (tmp_path / "one-more").symlink_to(previous)
    with pytest.raises(Unresolvable, match="symbolic links"):
        real_path(str(tmp_path / "one-more"))


def test_names_the_kernel_refuses_are_unresolvable(tmp_path: Path) -> None:
    with pytest.raises(Unresolvable, match="x" * 300):
        real_path(f"{tmp_path}/{'x' * 300}/a")
    with pytest.raises(Unresolvable):
        real_path(str(tmp_path) + "/y" * (MAX_PATH // 2))
    for bad in ("relative/a", "/a\x00b"):
        with pytest.raises(Unresolvable):
            real_path(bad)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_component_that_cannot_be_looked_at_is_unresolvable() -> None:
    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(mode=0o700)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child reports through the pipe)
            try:
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                try:
                    answer = "resolved " + real_path(str(locked / "file"))
                except Unresolvable as exc:
                    answer = "unresolvable " + str(exc)
                os.write(write_end, answer.encode())
            finally:
                os._exit(0)
        os.close(write_end)
        answer = os.read(read_end, 65536).decode()
        os.close(read_end)
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base)
    assert answer.startswith("unresolvable "), answer
    assert f"cannot look at {locked}/file" in answer


def test_resolve_counts_the_names_of_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "one").write_text("")
    os.link(tmp_path / "one", tmp_path / "two")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to("two")
    assert resolve("two", str(tmp_path)).names == 2
    linked = resolve("link", str(tmp_path))
    assert (linked.real, linked.names, linked.through_link) == (str(tmp_path / "two"), 2, True)
    assert resolve("dir", str(tmp_path)).names == 1
    assert resolve("new", str(tmp_path)).names == 1
    plain = resolve(f"{tmp_path}/dir/../one", str(tmp_path))
    assert (plain.real, plain.through_link) == (str(tmp_path / "one"), False)
    assert plain.named == f"{tmp_path}/dir/../one"  # the name as given, .. and all


def test_is_beneath_compares_whole_components() -> None:
    assert is_beneath("/p", "/p") and is_beneath("/p/a", "/p/")
    assert not is_beneath("/p2/a", "/p")
    assert is_beneath("/etc", "/")
