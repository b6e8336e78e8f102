"""Unit tests of request facts, exactly: the programs the broker finds itself (bash for
code, sudo) on its own PATH, every mismatch word for word, and the sha256 cache's
defaults (how many files, how settled)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from core_helpers import pinned_exec

from registry_core.broker.decide import facts
from registry_core.broker.decide.facts import REQUEST_CODE_TOOL, Sha256Cache, gather_facts
from registry_core.broker.remember.policies import fd_sha256
from registry_core.broker.wire import messages as m
from registry_core.pinned import display_argv
from registry_core.registry import RegistryLoader
from registry_core.trusted import find_trusted

CODE = "id -u"


def code_request(argv: list[str]) -> m.ElevateRequest:
    kind = m.Kind.SANDBOX
    return m.ElevateRequest(
        id=1, tool=REQUEST_CODE_TOOL, kind=kind, argv=tuple(argv), args={}, cwd="/", code=CODE
    )


def program(directory: Path, name: str, text: str = "#!/bin/sh\n") -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def sha(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_code_facts_describe_the_request_word_for_word() -> None:
    bash = find_trusted("bash")
    assert bash is not None
    got = gather_facts(RegistryLoader([], {}).load(), code_request([bash, "-c", CODE]))
    assert got.description == "Run bash code outside the sandbox (ollie-core x/elevate plugin)."
    assert got.variant is None


def test_code_runs_the_bash_the_brokers_lookup_finds(tmp_path: Path) -> None:
    own = program(tmp_path / "bin", "bash", "#!/bin/sh\necho a bash of our own\n")
    registry = RegistryLoader([], {}).load()

    def find(name: str) -> str | None:
        return str(own) if name == "bash" else None

    got = gather_facts(registry, code_request([str(own), "-c", CODE]), find_program=find)
    assert (got.executable, got.sha256, got.mismatches) == (str(own), sha(own), ())
    # The system's bash is another file now: not the one the broker would run.
    other = gather_facts(registry, code_request(["/usr/bin/bash", "-c", CODE]), find_program=find)
    assert other.executable == str(own)
    assert other.mismatches == (f"argv {['/usr/bin/bash', '-c', CODE]!r} is not bash -c <code>",)


def test_the_brokers_bash_ignores_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = program(tmp_path / "bin", "bash")
    monkeypatch.setenv("PATH", str(planted.parent))
    trusted = find_trusted("bash")
    assert trusted is not None
    real = os.path.realpath(trusted)
    got = gather_facts(RegistryLoader([], {}).load(), code_request([trusted, "-c", CODE]))
    assert (got.executable, got.sha256, got.mismatches) == (real, sha(real), ())
    planted_argv = [str(planted), "-c", CODE]
    refused = gather_facts(RegistryLoader([], {}).load(), code_request(planted_argv))
    assert refused.mismatches == (f"argv {planted_argv!r} is not bash -c <code>",)


def test_without_a_trusted_bash_code_is_flagged_word_for_word() -> None:
    argv = ["/usr/bin/bash", "-c", CODE]
    got = gather_facts(
        RegistryLoader([], {}).load(), code_request(argv), find_program=lambda name: None
    )
    assert (got.executable, got.sha256) == (None, None)
    assert got.mismatches == (
        "bash is not installed in a system directory this broker trusts",
        f"argv {argv!r} is not bash -c <code>",
    )


def test_sudo_is_exactly_the_one_the_brokers_lookup_finds(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    exe = program(tools, "rooty")
    (tools / "rooty.meta").write_text(json.dumps({"description": "Root.", "sudo": True}))
    registry = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}).load()
    own = program(tmp_path / "bin", "sudo")
    pinned = list(pinned_exec(str(exe)))

    def mismatches(sudo: str, found: str | None = str(own)) -> tuple[str, ...]:
        argv = (sudo, "-A", "--", *pinned)
        req = m.ElevateRequest(id=1, tool="rooty", kind=m.Kind.SUDO, argv=argv, args={}, cwd="/")

        def find(name: str) -> str | None:
            return found if name == "sudo" else find_trusted(name)

        return gather_facts(registry, req, find_program=find).mismatches

    def shown(*argv: str) -> list[str]:
        return display_argv(list(argv))

    assert mismatches(str(own)) == ()
    for other in ("sudo", "/usr/bin/sudo"):
        expected = f"the registry would run {shown(str(own), '-A', '--', *pinned)!r}"
        assert mismatches(other) == (
            f"requested argv {shown(other, '-A', '--', *pinned)!r}; {expected}",
        )
    assert mismatches("/usr/bin/sudo", None) == (
        "sudo is not installed in a system directory this broker trusts",
        f"requested argv {shown('/usr/bin/sudo', '-A', '--', *pinned)!r}; "
        f"the registry would run {shown('sudo', '-A', '--', *pinned)!r}",
    )


def test_the_brokers_sudo_ignores_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    exe = program(tools, "rooty")
    (tools / "rooty.meta").write_text(json.dumps({"description": "Root.", "sudo": True}))
    registry = RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}).load()
    planted = program(tmp_path / "bin", "sudo")
    monkeypatch.setenv("PATH", str(planted.parent))
    trusted = find_trusted("sudo")
    if trusted is None:
        pytest.skip("no trusted sudo here")
    for sudo, found in ((trusted, True), (str(planted), False), ("sudo", False)):
        argv = (sudo, "-A", "--", *pinned_exec(str(exe)))
        req = m.ElevateRequest(id=1, tool="rooty", kind=m.Kind.SUDO, argv=argv, args={}, cwd="/")
        assert (gather_facts(registry, req).mismatches == ()) is found, sudo


@pytest.fixture
def local_tools(tmp_path: Path) -> tuple[RegistryLoader, Path]:
    tools = tmp_path / "tools"
    for name, meta in (("greet", {"description": "Hi."}), ("rooty", {"sudo": True})):
        program(tools, name)
        (tools / f"{name}.meta").write_text(json.dumps({"description": "d", **meta}))
    return RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}), tools


def mismatches_of(
    local_tools: tuple[RegistryLoader, Path],
    tool: str,
    argv: list[str],
    kind: m.Kind = m.Kind.SANDBOX,
    code: str | None = None,
) -> tuple[str, ...]:
    loader, _ = local_tools
    req = m.ElevateRequest(
        id=1, tool=tool, kind=kind, argv=tuple(argv), args={}, cwd="/", code=code
    )
    return gather_facts(loader.load(), req).mismatches


def test_every_local_mismatch_word_for_word(local_tools: tuple[RegistryLoader, Path]) -> None:
    _, tools = local_tools
    greet, rooty = pinned_exec(str(tools / "greet")), pinned_exec(str(tools / "rooty"))
    sudo = find_trusted("sudo")
    if sudo is None:
        pytest.skip("no trusted sudo here")
    assert mismatches_of(local_tools, "greet", [*greet], code="id") == (
        "a code field was sent for a registry tool",
    )
    assert mismatches_of(local_tools, "greet", [sudo, "-A", "--", *greet], m.Kind.SUDO) == (
        "asks to run as root, but the tool does not declare sudo: true",
    )
    assert mismatches_of(local_tools, "rooty", [*rooty]) == (
        "the tool declares sudo: true but the request asks only to leave the sandbox",
    )
    argv = [sudo, "-A", "--", "/bin/true"]
    would = display_argv([sudo, "-A", "--", *rooty])
    assert mismatches_of(local_tools, "rooty", argv, m.Kind.SUDO) == (
        f"requested argv {argv!r}; the registry would run {would!r}",
    )
    assert mismatches_of(local_tools, "greet", ["/bin/true"]) == (
        f"requested argv {['/bin/true']!r}; the registry would run {display_argv(greet)!r}",
    )


# --- the sha256 cache's defaults --------------------------------------------------------


def count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def counting(fd: int) -> str | None:
        calls.append(fd)
        return fd_sha256(fd)

    monkeypatch.setattr(facts, "fd_sha256", counting)
    return calls


def test_a_default_cache_holds_256_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [tmp_path / f"f{i}" for i in range(257)]
    for f in files:
        f.write_text(f.name)
    cache = Sha256Cache(clock_ns=lambda: time.time_ns() + 10 * 10**9)  # every file settled
    calls = count_hashes(monkeypatch)
    for f in files[:256]:
        cache.sha256(str(f))
    cache.sha256(str(files[0]))  # still held: it becomes the most recently used
    assert len(calls) == 256
    cache.sha256(str(files[256]))  # evicts files[1], now the least recently used
    cache.sha256(str(files[2]))
    assert len(calls) == 257
    cache.sha256(str(files[1]))
    assert len(calls) == 258


@pytest.mark.parametrize(
    ("after_change", "remembered"), [(2 * 10**9, False), (2 * 10**9 + 1, True)]
)
def test_a_default_cache_remembers_files_settled_more_than_two_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_change: int, remembered: bool
) -> None:
    exe = program(tmp_path, "prog")
    st = exe.stat()
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    cache = Sha256Cache(clock_ns=lambda: changed + after_change)
    calls = count_hashes(monkeypatch)
    assert cache.sha256(str(exe)) == cache.sha256(str(exe)) == sha(exe)
    assert len(calls) == (1 if remembered else 2)
