"""Differential test: our Landlock binding against the PyPI ``landlock`` package.

For a matrix of (rule set, filesystem probe) both implementations sandbox a
real child process with the same rules on a fresh copy of the same directory
tree; they must agree on whether each probe is allowed.  The oracle is only
a test dependency: it covers filesystem rules and is applied in the child
(after ``fork``) through its own ``Ruleset.apply()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import landlock as oracle
import pytest

from registry_core.sandbox import Access, abi_version, effective_rules, parse_profile, prepare

pytestmark = [pytest.mark.realstack, pytest.mark.usefixtures("landlock_abi")]

ABI = abi_version()
SYSTEM_ROX = [p for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64") if os.path.exists(p)]
SYSTEM_RO = ["/etc"]
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def build_tree(root: Path) -> None:
    """d/{f.txt, true, sub/g.txt}, other/{h.txt, true}, alone.txt"""
    (root / "d" / "sub").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "d" / "f.txt").write_text("f\n")
    (root / "d" / "sub" / "g.txt").write_text("g\n")
    (root / "other" / "h.txt").write_text("h\n")
    (root / "alone.txt").write_text("a\n")
    shutil.copy2("/bin/true", root / "d" / "true")
    shutil.copy2("/bin/true", root / "other" / "true")


# Rule sets over the tree: (relative path, access class).
RULE_SETS: dict[str, list[tuple[str, Access]]] = {
    "nothing": [],
    "dir-ro": [("d", Access.RO)],
    "dir-rox": [("d", Access.ROX)],
    "dir-rw": [("d", Access.RW)],
    "dir-rwx": [("d", Access.RWX)],
    "file-ro": [("d/f.txt", Access.RO)],
    "file-rw": [("d/f.txt", Access.RW)],
    "file-rox": [("d/true", Access.ROX)],
    "sub-rw-in-ro": [("d", Access.RO), ("d/sub", Access.RW)],
    "root-ro-d-rwx": [(".", Access.RO), ("d", Access.RWX)],
}

# Probes: argv with {root} placeholders; allowed means exit status 0.
PROBES: dict[str, list[str]] = {
    "read-file": ["cat", "{root}/d/f.txt"],
    "read-nested": ["cat", "{root}/d/sub/g.txt"],
    "read-other": ["cat", "{root}/other/h.txt"],
    "read-alone": ["cat", "{root}/alone.txt"],
    "list-dir": ["ls", "{root}/d"],
    "list-root": ["ls", "{root}"],
    "append-file": ["sh", "-c", 'echo x >> "$0"', "{root}/d/f.txt"],
    "truncate-file": ["truncate", "-s", "0", "{root}/d/f.txt"],
    "create-file": ["touch", "{root}/d/new.txt"],
    "create-nested": ["touch", "{root}/d/sub/new.txt"],
    "make-dir": ["mkdir", "{root}/d/newdir"],
    "remove-file": ["rm", "{root}/d/sub/g.txt"],
    "rename-same-dir": ["mv", "{root}/d/f.txt", "{root}/d/f2.txt"],
    "rename-across": ["mv", "{root}/d/f.txt", "{root}/d/sub/f.txt"],
    "symlink": ["ln", "-s", "f.txt", "{root}/d/link"],
    # mv falls back to copy+unlink on EXDEV; a hard link does not (REFER).
    "hardlink-across": ["ln", "{root}/d/f.txt", "{root}/d/sub/hard"],
    "exec-allowed-dir": ["{root}/d/true"],
    "exec-other": ["{root}/other/true"],
}


def oracle_rights(access: Access, is_dir: bool) -> oracle.FSAccess:
    """The same access classes, computed from the oracle's own flag definitions."""
    everything = oracle.FSAccess.all()
    read = oracle.FSAccess.READ_FILE | oracle.FSAccess.READ_DIR
    rights = {
        Access.RO: read,
        Access.ROX: read | oracle.FSAccess.EXECUTE,
        Access.RW: everything & ~oracle.FSAccess.EXECUTE,
        Access.RWX: everything,
    }[access]
    return rights if is_dir else rights & oracle.FSAccess.all_file()


@contextlib.contextmanager
def ours(root: Path, rules: list[tuple[str, Access]]) -> Iterator[Callable[[], None]]:
    filesystem: dict[str, list[str]] = {"rox": list(SYSTEM_ROX), "ro": list(SYSTEM_RO)}
    for relative, access in rules:
        filesystem.setdefault(access.value, []).append(str(root / relative))
    profile = parse_profile(
        {"filesystem": filesystem, "network": {"enabled": True, "unrestricted": True}},
        name="diff",
        source="/diff.yaml",
    )
    with prepare(effective_rules(profile, {"HOME": str(root)}, str(root))) as sandbox:
        yield sandbox.preexec


@contextlib.contextmanager
def theirs(root: Path, rules: list[tuple[str, Access]]) -> Iterator[Callable[[], None]]:
    grants = [(path, Access.ROX) for path in SYSTEM_ROX]
    grants += [(path, Access.RO) for path in SYSTEM_RO]
    grants += [(str(root / relative), access) for relative, access in rules]
    # The landlock package reads ctypes' saved errno even after a call that
    # succeeded; a value left by an earlier ctypes call elsewhere would fail it.
    ctypes.set_errno(0)
    resolved = [(path, oracle_rights(access, os.path.isdir(path))) for path, access in grants]

    def apply() -> None:  # runs in the child, after fork
        ctypes.set_errno(0)
        ruleset = oracle.Ruleset()
        for path, rights in resolved:
            ruleset.allow(path, rules=rights)
        ruleset.apply()

    yield apply


def outcome(preexec: Callable[[], None], root: Path, probe: list[str]) -> bool:
    argv = [part.replace("{root}", str(root)) for part in probe]
    try:
        result = subprocess.run(
            argv,
            preexec_fn=preexec,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=CHILD_ENV,
            timeout=60,
            check=False,
        )
    except PermissionError:  # exec itself denied
        return False
    return result.returncode == 0


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("rule_set", sorted(RULE_SETS))
def test_same_verdict_as_the_landlock_package(tmp_path: Path, rule_set: str, probe: str) -> None:
    rules = RULE_SETS[rule_set]
    verdicts = {}
    for name, make in (("ours", ours), ("landlock", theirs)):
        root = tmp_path / name
        root.mkdir()
        build_tree(root)
        with make(root, rules) as preexec:
            verdicts[name] = outcome(preexec, root, PROBES[probe])
    assert verdicts["ours"] == verdicts["landlock"], verdicts


def test_the_matrix_is_not_trivial(tmp_path: Path) -> None:
    """Both verdicts occur, so agreement above means something."""
    seen: set[bool] = set()
    for rules, probe in (([], "read-file"), ([("d", Access.RWX)], "read-file")):
        root = tmp_path / str(len(seen))
        root.mkdir()
        build_tree(root)
        with ours(root, rules) as preexec:
            seen.add(outcome(preexec, root, PROBES[probe]))
    assert seen == {True, False}
