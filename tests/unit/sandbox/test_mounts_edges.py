"""The whole mount plan of a namespaced call, argument by argument (registry_core.sandbox.mounts).

Real host paths in ``tmp_path``.  Each bubblewrap argument decides what the
tool sees and whether it may write there, so the plans are compared whole:
a ``--bind`` where a ``--ro-bind`` belongs, a missing ``--remount-ro`` or a
``.git`` left writable is exactly what an attacker would use.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.sandbox.mounts import View, beneath, plan_view, view_rows
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy, PathRule


def rules(*entries: tuple[str | Path, Access]) -> EffectiveRules:
    return EffectiveRules(
        profile="t",
        source="t.yaml",
        paths=tuple(PathRule(str(p), a, f"o{i}") for i, (p, a) in enumerate(entries)),
        network=NetworkPolicy(NetworkMode.DENY),
        env=(),
        best_effort=False,
    )


def plan(
    entries: EffectiveRules,
    cwd: Path | str,
    private: Path | str = "/nonexistent-private",
    socket: Path | str | None = None,
    helpers: tuple[str | Path, ...] = (),
) -> View:
    return plan_view(
        entries,
        cwd=str(cwd),
        private_tmp=str(private),
        broker_socket=None if socket is None else str(socket),
        helper_paths=[str(h) for h in helpers],
    )


START = ("--proc", "/proc", "--dev", "/dev")


def test_a_whole_plan_argument_by_argument(tmp_path: Path) -> None:
    t = str(tmp_path)
    (tmp_path / "work" / ".git").mkdir(parents=True)
    (tmp_path / "work" / "sub").mkdir()
    (tmp_path / "ro" / "inner").mkdir(parents=True)
    (tmp_path / "usr-lib").mkdir()
    (tmp_path / "lib").symlink_to("usr-lib")
    (tmp_path / "helper").write_text("")
    (tmp_path / "helper-link").symlink_to("helper")
    (tmp_path / "sock").write_text("")
    (tmp_path / "priv").mkdir()
    entries = rules(
        ("/usr", Access.ROX),
        (tmp_path / "work", Access.RW),
        ("/tmp", Access.RW),
        (tmp_path / "ro", Access.RO),
        (tmp_path / "ro" / "inner", Access.RWX),
        (tmp_path / "missing", Access.RO),
        ("/dev/null", Access.RW),
        ("/dev/shm", Access.RW),
        ("/proc/self", Access.RO),
        (tmp_path / "lib", Access.ROX),
    )
    view = plan(
        entries,
        tmp_path / "work" / "sub",
        tmp_path / "priv",
        tmp_path / "sock",
        (tmp_path / "helper", tmp_path / "helper-link", "/usr/bin/env"),
    )
    assert view.args == (
        *START,
        *("--bind", f"{t}/priv", "/tmp"),
        *("--ro-bind", "/usr", "/usr"),
        *("--dev-bind", "/dev/shm", "/dev/shm"),
        *("--bind", f"{t}/work", f"{t}/work"),
        *("--ro-bind", f"{t}/ro", f"{t}/ro"),
        *("--symlink", "usr-lib", f"{t}/lib"),
        *("--ro-bind", f"{t}/usr-lib", f"{t}/usr-lib"),
        *("--bind", f"{t}/ro/inner", f"{t}/ro/inner"),
        *("--ro-bind", f"{t}/helper", f"{t}/helper"),
        *("--symlink", "helper", f"{t}/helper-link"),
        *("--ro-bind", f"{t}/sock", f"{t}/sock"),
        *("--ro-bind", f"{t}/work/.git", f"{t}/work/.git"),
        *("--remount-ro", "/", "--chdir", f"{t}/work/sub"),
    )
    # Landlock rules on host paths, parents first, /tmp as the private directory.
    assert [(r.path, r.access, r.origin) for r in view.landlock] == [
        (f"{t}/priv", Access.RW, "o2"),
        ("/usr", Access.ROX, "o0"),
        ("/dev/null", Access.RW, "o6"),
        ("/dev/shm", Access.RW, "o7"),
        (f"{t}/work", Access.RW, "o1"),
        (f"{t}/ro", Access.RO, "o3"),
        (f"{t}/lib", Access.ROX, "o9"),
        (f"{t}/ro/inner", Access.RWX, "o4"),
    ]
    assert view.proc_rules == (PathRule("/proc/self", Access.RO, "o8"),)
    assert view.hidden_git == (f"{t}/work/.git",)


def test_for_one_path_the_writable_rule_is_bound_and_the_read_only_one_adds_nothing(
    tmp_path: Path,
) -> None:
    view = plan(rules((tmp_path, Access.RO), (tmp_path, Access.RW)), tmp_path)
    assert view.args[len(START) + 3 :] == (
        *("--bind", str(tmp_path), str(tmp_path)),
        *("--remount-ro", "/", "--chdir", str(tmp_path)),
    )
    assert [r.access for r in view.landlock] == [Access.RW, Access.RO]


def test_a_writable_rule_under_a_read_only_one_is_bound_and_not_the_reverse(
    tmp_path: Path,
) -> None:
    (tmp_path / "in").mkdir()
    view = plan(rules((tmp_path / "in", Access.RW), (tmp_path, Access.RO)), tmp_path)
    assert view.args[len(START) + 3 :] == (
        *("--ro-bind", str(tmp_path), str(tmp_path)),
        *("--bind", f"{tmp_path}/in", f"{tmp_path}/in"),
        *("--remount-ro", "/", "--chdir", str(tmp_path)),
    )
    # A read-only rule under a writable one needs no mount of its own (Landlock narrows).
    view = plan(rules((tmp_path / "in", Access.RO), (tmp_path, Access.RWX)), tmp_path)
    assert [a for a in view.args if a.endswith("bind")] == ["--bind", "--bind"]
    assert (str(tmp_path), str(tmp_path)) in list(zip(view.args[1:], view.args[2:], strict=False))


def test_naming_dev_replaces_the_minimal_dev(tmp_path: Path) -> None:
    view = plan(rules(("/dev", Access.RO), ("/dev/null", Access.RW)), tmp_path)
    assert view.args[:2] == ("--proc", "/proc")
    assert "--dev" not in view.args
    assert view.args[2:13] == (
        *("--bind", "/nonexistent-private", "/tmp"),
        *("--dev-bind", "/dev", "/dev", "--remount-ro", "/dev"),
        *("--dev-bind", "/dev/null", "/dev/null"),
    )


def test_a_read_only_device_below_the_minimal_dev_is_not_bound_again(tmp_path: Path) -> None:
    view = plan(rules(("/dev/shm", Access.RO), ("/dev/zero", Access.RO)), tmp_path)
    assert "--dev-bind" not in view.args
    assert [r.path for r in view.landlock] == ["/dev/shm", "/dev/zero"]


def test_a_cwd_no_rule_names_is_an_empty_directory(tmp_path: Path) -> None:
    view = plan(rules(("/usr", Access.RO)), tmp_path / "nowhere")
    assert view.args[-6:] == (
        "--dir",
        f"{tmp_path}/nowhere",
        "--remount-ro",
        "/",
        "--chdir",
        f"{tmp_path}/nowhere",
    )
    named = plan(rules((tmp_path, Access.RO)), tmp_path / "nowhere")
    assert "--dir" not in named.args


def test_git_above_the_cwd_is_hidden_up_to_the_writable_rule_only(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "src").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / ".git").write_text("gitdir: ../.git/modules/pkg\n")
    view = plan(rules((tmp_path / "repo", Access.RW)), tmp_path / "repo" / "pkg" / "src")
    # The submodule's .git file and the repository's .git; not the one above the rule.
    assert view.hidden_git == (f"{tmp_path}/repo/pkg/.git", f"{tmp_path}/repo/.git")
    assert view.args.count("--ro-bind") == 2
    read_only = plan(rules((tmp_path / "repo", Access.RO)), tmp_path / "repo" / "pkg" / "src")
    assert read_only.hidden_git == ()


def test_git_of_a_writable_root_rule_is_hidden() -> None:
    view = plan(rules(("/", Access.RW)), "/")
    assert view.hidden_git == (("/.git",) if os.path.isdir("/.git") else ())
    assert view.args[-4:] == ("--remount-ro", "/", "--chdir", "/")


def test_a_helper_or_socket_already_in_the_view_is_not_bound_again(tmp_path: Path) -> None:
    (tmp_path / "helper").write_text("")
    (tmp_path / "sock").write_text("")
    view = plan(
        rules((tmp_path, Access.RO)),
        tmp_path,
        socket=tmp_path / "sock",
        helpers=(tmp_path / "helper", tmp_path / "gone"),
    )
    assert view.args.count("--ro-bind") == 1
    gone = plan(rules(("/usr", Access.RO)), tmp_path, socket=tmp_path / "no.sock")
    assert str(tmp_path / "no.sock") not in gone.args


def test_a_symlink_rule_to_a_missing_target_is_only_the_link(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    view = plan(rules((tmp_path / "dangling", Access.RW)), tmp_path)
    assert view.args[len(START) + 3 : -4] == (
        *("--symlink", str(tmp_path / "gone"), str(tmp_path / "dangling")),
        *("--dir", str(tmp_path)),
    )


def test_a_writable_symlink_rule_binds_its_target_writable(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to("data")
    view = plan(rules((tmp_path / "link", Access.RW)), tmp_path)
    assert ("--bind", f"{tmp_path}/data", f"{tmp_path}/data") == view.args[
        len(START) + 6 : len(START) + 9
    ]


def test_mount_rows_for_a_person() -> None:
    args = (
        *START,
        *("--bind", "/host/priv", "/tmp"),
        *("--bind", "/w", "/w"),
        *("--ro-bind", "/src", "/elsewhere"),
        *("--dev-bind", "/dev/shm", "/dev/shm", "--remount-ro", "/dev/shm"),
        *("--symlink", "usr/lib", "/lib"),
        *("--dir", "/cwd"),
        *("--remount-ro", "/", "--chdir", "/cwd"),
    )
    assert view_rows(args) == [
        ("proc", "/proc", "fresh procfs: this call's processes only"),
        ("dev", "/dev", "minimal: null zero full random urandom tty pts shm"),
        ("rw", "/tmp", "private, removed after the call"),
        ("rw", "/w", ""),
        ("ro", "/elsewhere", "from /src"),
        ("device", "/dev/shm", ""),
        ("symlink", "/lib", "-> usr/lib"),
        ("dir", "/cwd", "empty (named by no rule)"),
    ]
    assert view_rows(("--bind", "/tmp", "/tmp")) == [
        ("rw", "/tmp", "private, removed after the call")
    ]


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a", "/a", True),
        ("/a/b", "/a", True),
        ("/a/b", "/a/", True),
        ("/ab", "/a", False),
        ("/a", "/a/b", False),
        ("/x", "/", True),
        ("/a/b", "/aX", False),
    ],
)
def test_beneath_is_lexical_and_whole_components(path: str, root: str, inside: bool) -> None:
    assert beneath(path, root) is inside


def test_git_of_every_writable_ancestor_is_hidden_past_nested_mounts(tmp_path: Path) -> None:
    # docs/security.md: .git in the cwd and in *each* ancestor writable in the view.
    # Here the cwd is its own writable mount (the target of a symlink rule, bound
    # before the rule above it): git run in the cwd still finds the outer .git.
    outer, inner = tmp_path / "a" / "b", tmp_path / "a" / "b" / "c" / "d"
    inner.mkdir(parents=True)
    (outer / ".git").mkdir()
    (tmp_path / "l").symlink_to(inner)
    view = plan(rules((tmp_path / "l", Access.RW), (outer, Access.RW)), inner)
    assert ("--bind", str(inner), str(inner)) == view.args[len(START) + 6 : len(START) + 9]
    assert ("--bind", str(outer), str(outer)) == view.args[len(START) + 9 : len(START) + 12]
    assert view.hidden_git == (f"{outer}/.git",)
    read_only = plan(rules((tmp_path / "l", Access.RW), (outer, Access.RO)), inner)
    assert read_only.hidden_git == ()


def test_symlinks_inside_a_read_only_mount_are_not_made_again(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "lib").symlink_to("real")
    view = plan(rules((tmp_path, Access.RO), (tmp_path / "lib", Access.ROX)), tmp_path)
    assert view.args[len(START) + 3 :] == (
        *("--ro-bind", str(tmp_path), str(tmp_path)),
        *("--remount-ro", "/", "--chdir", str(tmp_path)),
    )


def test_a_writable_symlink_target_inside_a_read_only_mount_is_bound_writable(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to("data")
    view = plan(rules((tmp_path, Access.RO), (tmp_path / "link", Access.RW)), tmp_path)
    assert view.args[len(START) + 3 : -4] == (
        *("--ro-bind", str(tmp_path), str(tmp_path)),
        *("--bind", f"{tmp_path}/data", f"{tmp_path}/data"),
    )


def test_a_writable_rule_beneath_a_symlink_rule_is_still_bound(tmp_path: Path) -> None:
    (tmp_path / "target" / "x").mkdir(parents=True)
    (tmp_path / "link").symlink_to("target")
    view = plan(
        rules((tmp_path / "link", Access.RO), (tmp_path / "link" / "x", Access.RW)), tmp_path
    )
    assert ("--bind", f"{tmp_path}/link/x", f"{tmp_path}/link/x") in {
        view.args[i : i + 3] for i in range(len(view.args) - 2)
    }


def test_a_helper_symlink_is_not_a_writable_place(tmp_path: Path) -> None:
    (tmp_path / "real" / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "helper").symlink_to("real")
    view = plan(
        rules(("/usr", Access.RO)), tmp_path / "helper" / "sub", helpers=(tmp_path / "helper",)
    )
    assert view.hidden_git == ()
    assert ("--symlink", "real", f"{tmp_path}/helper") == view.args[len(START) + 6 : len(START) + 9]
