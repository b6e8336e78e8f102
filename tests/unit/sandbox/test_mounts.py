"""Tests of the mount view planner (registry_core.sandbox.mounts) on real host paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.sandbox.mounts import plan_view
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def _rules(*paths: tuple[str, Access]) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source="t.yaml",
        paths=tuple(PathRule(p, a, "test") for p, a in paths),
        network=NetworkPolicy(NetworkMode.DENY),
        env=(),
        best_effort=False,
    )


def _triples(args: tuple[str, ...], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_only_named_paths_are_bound_and_tmp_is_private(tmp_path: Path) -> None:
    work, private = tmp_path / "work", tmp_path / "private"
    work.mkdir()
    private.mkdir()
    rules = _rules(
        ("/usr", Access.ROX),
        ("/etc", Access.RO),
        (str(work), Access.RW),
        ("/tmp", Access.RW),
        (str(tmp_path / "missing"), Access.RO),
    )
    view = plan_view(rules, cwd=str(work), private_tmp=str(private), broker_socket=None)
    assert {("/etc", "/etc"), ("/usr", "/usr")} <= set(_triples(view.args, "--ro-bind"))
    assert (str(private), "/tmp") in _triples(view.args, "--bind")
    assert (str(work), str(work)) in _triples(view.args, "--bind")
    assert str(tmp_path / "missing") not in view.args
    assert list(view.args[:4]) == ["--proc", "/proc", "--dev", "/dev"]
    assert view.args[-4:] == ("--remount-ro", "/", "--chdir", str(work))
    # Landlock gets host paths: the private directory stands for /tmp.
    assert {r.path for r in view.landlock} == {"/usr", "/etc", str(work), str(private)}


def test_a_narrower_writable_rule_inside_a_read_only_one_is_bound_after_it(
    tmp_path: Path,
) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    rules = _rules((str(inner), Access.RW), (str(tmp_path), Access.RO))
    view = plan_view(rules, cwd=str(inner), private_tmp=str(tmp_path), broker_socket=None)
    binds = [(a, view.args[i + 2]) for i, a in enumerate(view.args) if a.endswith("bind")]
    assert binds.index(("--ro-bind", str(tmp_path))) < binds.index(("--bind", str(inner)))


def test_git_is_read_only_unless_a_writable_rule_names_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    rules = _rules((str(tmp_path), Access.RW))
    view = plan_view(
        rules, cwd=str(tmp_path / "sub"), private_tmp="/nonexistent", broker_socket=None
    )
    assert view.hidden_git == (str(tmp_path / ".git"),)
    assert (str(tmp_path / ".git"), str(tmp_path / ".git")) in _triples(view.args, "--ro-bind")
    opted = _rules((str(tmp_path), Access.RW), (str(tmp_path / ".git"), Access.RW))
    view = plan_view(opted, cwd=str(tmp_path), private_tmp="/nonexistent", broker_socket=None)
    assert view.hidden_git == ()


def test_proc_rules_go_to_the_exec_step_and_the_broker_socket_is_bound(tmp_path: Path) -> None:
    sock = tmp_path / "elevate.sock"
    sock.write_text("")
    rules = _rules(("/proc", Access.RO))
    view = plan_view(rules, cwd=str(tmp_path), private_tmp="/x", broker_socket=str(sock))
    assert [r.path for r in view.proc_rules] == ["/proc"]
    assert "/proc" not in {r.path for r in view.landlock}
    assert (str(sock), str(sock)) in _triples(view.args, "--ro-bind")
    # A working directory no rule names exists (empty) so chdir works.
    assert ("--dir", str(tmp_path)) == view.args[-6:-4]


def test_symlinked_system_directories_stay_symlinks(tmp_path: Path) -> None:
    link = tmp_path / "lib"
    (tmp_path / "usr-lib").mkdir()
    link.symlink_to("usr-lib")
    rules = _rules((str(link), Access.ROX))
    view = plan_view(rules, cwd=str(tmp_path), private_tmp="/x", broker_socket=None)
    assert ("usr-lib", str(link)) in _triples(view.args, "--symlink")
    assert (str(tmp_path / "usr-lib"),) * 2 in _triples(view.args, "--ro-bind")


def test_the_private_tmp_base_must_be_a_directory_of_this_user(tmp_path: Path) -> None:
    from registry_core.errors import SandboxError
    from registry_core.sandbox.contain import make_private_tmp, remove_tree

    made = Path(make_private_tmp(tmp_path / "base"))
    assert made.parent == tmp_path / "base" and (made.stat().st_mode & 0o777) == 0o700
    (made / "locked").mkdir()
    (made / "locked" / "f").write_text("x")
    (made / "locked").chmod(0)  # a tool may take its own permissions away
    remove_tree(str(made))
    assert not made.exists()
    (tmp_path / "link").symlink_to(tmp_path / "base")
    with pytest.raises(SandboxError, match="not a directory of this user"):
        make_private_tmp(tmp_path / "link")
    (tmp_path / "file").write_text("")
    with pytest.raises(SandboxError, match="cannot create the call's private /tmp"):
        make_private_tmp(tmp_path / "file" / "sub")


def test_a_symlinked_git_is_never_bound_through(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / ".git").symlink_to(tmp_path / "elsewhere")
    rules = _rules((str(tmp_path / "work"), Access.RW))
    view = plan_view(rules, cwd=str(tmp_path / "work"), private_tmp="/x", broker_socket=None)
    assert view.hidden_git == ()
    assert str(tmp_path / "elsewhere") not in view.args
