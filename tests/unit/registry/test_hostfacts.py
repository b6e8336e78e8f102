"""Facts about the host (registry_core.registry.hostfacts)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

from registry_core.registry.hostfacts import HostFacts, go_arch, go_os, is_executable_file


def make_file(path: Path, mode: int = 0o755, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("machine", "goarch"),
    [
        ("x86_64", "amd64"),
        ("AMD64", "amd64"),
        ("aarch64", "arm64"),
        ("arm64", "arm64"),
        ("i686", "386"),
        ("i386", "386"),
        ("armv7l", "arm"),
        ("armv6l", "arm"),
        ("riscv64", "riscv64"),
        ("ppc64le", "ppc64le"),
        ("s390x", "s390x"),
        ("sparc64", "sparc64"),  # unknown: passed through, lower-cased
    ],
)
def test_go_arch_maps_python_machine_names(machine: str, goarch: str) -> None:
    assert go_arch(machine) == goarch


@pytest.mark.parametrize(
    ("system", "goos"), [("Linux", "linux"), ("Darwin", "darwin"), ("FreeBSD", "freebsd")]
)
def test_go_os_maps_python_system_names(system: str, goos: str) -> None:
    assert go_os(system) == goos


def test_defaults_describe_this_machine() -> None:
    assert go_os() == platform.system().lower()
    assert go_arch() == go_arch(platform.machine())
    facts = HostFacts(env={"PATH": "/a::/b"})
    assert facts.os_name == go_os()
    assert facts.arch == go_arch()
    assert facts.describe() == {
        "os": go_os(),
        "arch": go_arch(),
        "simulated": False,
        "path": ["/a", "/b"],
    }


def test_default_env_is_a_copy_of_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLIE_TEST_FACT", "1")
    facts = HostFacts()
    monkeypatch.setenv("OLLIE_TEST_FACT", "2")
    assert facts.env_value("OLLIE_TEST_FACT") == "1"


# --- is_executable_file ------------------------------------------------------------


def test_is_executable_file(tmp_path: Path) -> None:
    exe = make_file(tmp_path / "exe", 0o755)
    plain = make_file(tmp_path / "plain", 0o644)
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(exe)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert is_executable_file(str(exe))
    assert is_executable_file(str(tmp_path / "link"))
    assert not is_executable_file(str(plain))
    assert not is_executable_file(str(tmp_path / "dir"))
    assert not is_executable_file(str(tmp_path / "dangling"))
    assert not is_executable_file(str(tmp_path / "missing"))


# --- $PATH lookup ----------------------------------------------------------------------


def test_find_binary_searches_path_in_order(tmp_path: Path) -> None:
    first = make_file(tmp_path / "a" / "tool", 0o755)
    make_file(tmp_path / "b" / "tool", 0o755)
    facts = HostFacts(env={"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}"})
    assert facts.find_binary("tool") == str(first)


def test_find_binary_skips_non_executable_and_directories(tmp_path: Path) -> None:
    make_file(tmp_path / "a" / "tool", 0o644)
    (tmp_path / "b" / "tool").mkdir(parents=True)
    later = make_file(tmp_path / "c" / "tool", 0o755)
    dirs = [tmp_path / d for d in "abc"]
    facts = HostFacts(env={"PATH": ":".join(map(str, dirs))})
    assert facts.find_binary("tool") == str(later)


def test_find_binary_missing_or_only_non_executable(tmp_path: Path) -> None:
    make_file(tmp_path / "a" / "plain", 0o644)
    facts = HostFacts(env={"PATH": f"{tmp_path / 'a'}:{tmp_path / 'does-not-exist'}"})
    assert facts.find_binary("plain") is None
    assert facts.find_binary("nothing") is None


def test_find_binary_without_path_finds_nothing() -> None:
    assert HostFacts(env={}).find_binary("sh") is None


def test_path_is_listed_once_per_facts_object(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    make_file(bindir / "one", 0o755)
    facts = HostFacts(env={"PATH": str(bindir)})
    assert facts.find_binary("one") == str(bindir / "one")
    # Added after the first lookup: this scan does not see it (the index is built once) ...
    make_file(bindir / "two", 0o755)
    assert facts.find_binary("two") is None
    # ... a new scan (new HostFacts) does.
    assert HostFacts(env={"PATH": str(bindir)}).find_binary("two") == str(bindir / "two")


def test_find_binary_does_not_stat_path_directories_per_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / f"d{i}" for i in range(20)]
    for d in dirs:
        d.mkdir()
    make_file(dirs[-1] / "tool", 0o755)
    facts = HostFacts(env={"PATH": ":".join(map(str, dirs))})
    calls: list[str] = []
    real_stat = os.stat

    def counting_stat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        calls.append(str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting_stat)
    for _ in range(50):
        facts.find_binary("tool")
        facts.find_binary("absent")
    assert calls == [str(dirs[-1] / "tool")]


# --- files, absolute binaries, env ----------------------------------------------------------


def test_file_exists_for_files_and_directories(tmp_path: Path) -> None:
    make_file(tmp_path / "f", 0o644)
    facts = HostFacts(env={})
    assert facts.file_exists(str(tmp_path / "f"))
    assert facts.file_exists(str(tmp_path))
    assert not facts.file_exists(str(tmp_path / "missing"))


def test_executable_at_needs_the_exec_bit(tmp_path: Path) -> None:
    exe = make_file(tmp_path / "exe", 0o700)
    plain = make_file(tmp_path / "plain", 0o600)
    facts = HostFacts(env={})
    assert facts.executable_at(str(exe))
    assert not facts.executable_at(str(plain))
    assert not facts.executable_at(str(tmp_path))


def test_env_value_unset_is_empty() -> None:
    facts = HostFacts(env={"SET": "x", "EMPTY": ""})
    assert facts.env_value("SET") == "x"
    assert facts.env_value("EMPTY") == ""
    assert facts.env_value("UNSET") == ""


# --- "What if" overrides ----------------------------------------------------------------------


def test_simulated_overrides_win_over_the_real_host(tmp_path: Path) -> None:
    real = make_file(tmp_path / "bin" / "real", 0o755)
    facts = HostFacts(
        os_name="darwin",
        arch="arm64",
        env={"PATH": str(tmp_path / "bin")},
        simulated=True,
        extra_binaries={"journalctl": "/usr/bin/journalctl"},
        missing_binaries=frozenset({"real"}),
        present_files=frozenset({"/nowhere/syslog"}),
        absent_files=frozenset({str(tmp_path), str(real)}),
    )
    assert facts.find_binary("journalctl") == "/usr/bin/journalctl"
    assert facts.find_binary("real") is None
    assert facts.file_exists("/nowhere/syslog")
    assert facts.executable_at("/nowhere/syslog")
    assert not facts.file_exists(str(tmp_path))
    assert not facts.executable_at(str(real))
    assert facts.describe()["simulated"] is True
    assert facts.describe()["os"] == "darwin"
