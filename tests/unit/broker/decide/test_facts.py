"""Unit tests of request facts: what the broker's own registry says, and every mismatch."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from core_helpers import pinned_exec

from registry_core.broker.decide import facts
from registry_core.broker.decide.facts import REQUEST_CODE_TOOL, Sha256Cache, gather_facts
from registry_core.broker.remember.policies import fd_sha256
from registry_core.broker.wire import messages as m
from registry_core.errors import ToolNotFoundError, ToolUnavailableError
from registry_core.registry import Registry, RegistryLoader
from registry_core.trusted import find_trusted


def write_tool(directory: Path, name: str, meta: dict[str, Any]) -> Path:
    (directory / f"{name}.meta").write_text(json.dumps(meta))
    exe = directory / name
    exe.write_text(f"#!/bin/sh\necho {name}\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    write_tool(directory, "greet", {"description": "Say hello.", "args": {"type": "object"}})
    write_tool(directory, "rooty", {"description": "Needs root.", "sudo": True})
    write_tool(
        directory, "gone", {"description": "Hidden here.", "variants": [{"match": {"os": "plan9"}}]}
    )
    (directory / "broken.meta").write_text("{not json")
    (directory / "noexe.meta").write_text(
        json.dumps({"description": "No program.", "cmd": "/nonexistent/prog"})
    )
    return directory


@pytest.fixture
def registry(tools: Path) -> Registry:
    return RegistryLoader([tools], {"PATH": "/usr/bin:/bin"}).load()


def request(
    tool: str, argv: list[str], kind: m.Kind = m.Kind.SANDBOX, **kw: Any
) -> m.ElevateRequest:
    return m.ElevateRequest(id=1, tool=tool, kind=kind, argv=tuple(argv), args={}, cwd="/", **kw)


def sha(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_facts_come_from_the_registry(registry: Registry, tools: Path) -> None:
    exe = tools / "greet"
    facts = gather_facts(registry, request("greet", list(pinned_exec(str(exe)))))
    assert facts.description == "Say hello."
    assert facts.executable == str(exe)
    assert facts.sha256 == sha(exe)
    assert facts.variant is None
    assert facts.mismatches == ()


def test_a_different_argv_is_flagged(registry: Registry, tools: Path) -> None:
    facts = gather_facts(registry, request("greet", ["/usr/bin/rm", "-rf", "/"]))
    assert facts.executable == str(tools / "greet")  # still the registry's, not the request's
    assert len(facts.mismatches) == 1
    assert "/usr/bin/rm" in facts.mismatches[0]
    assert str(tools / "greet") in facts.mismatches[0]


def test_extra_arguments_are_flagged(registry: Registry, tools: Path) -> None:
    facts = gather_facts(registry, request("greet", [str(tools / "greet"), "--evil"]))
    assert facts.mismatches


def test_sudo_argv_in_the_dispatchers_form_matches(registry: Registry, tools: Path) -> None:
    exe = str(tools / "rooty")
    sudo = find_trusted("sudo")
    if sudo is None:
        pytest.skip("no trusted sudo here")
    facts = gather_facts(
        registry, request("rooty", [sudo, "-A", "--", *pinned_exec(exe)], m.Kind.SUDO)
    )
    assert facts.mismatches == ()


def test_a_fake_sudo_is_flagged(registry: Registry, tools: Path, tmp_path: Path) -> None:
    fake = tmp_path / "evil" / "sudo"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    exe = str(tools / "rooty")
    facts = gather_facts(
        registry, request("rooty", [str(fake), "-A", "--", *pinned_exec(exe)], m.Kind.SUDO)
    )
    assert facts.mismatches
    assert str(fake) in facts.mismatches[-1]


def test_sudo_for_a_tool_without_sudo_is_flagged(registry: Registry, tools: Path) -> None:
    exe = str(tools / "greet")
    facts = gather_facts(registry, request("greet", ["sudo", "-A", "--", exe], m.Kind.SUDO))
    assert any("does not declare sudo" in x for x in facts.mismatches)


def test_a_sudo_tool_asked_as_a_plain_escape_is_flagged(registry: Registry, tools: Path) -> None:
    facts = gather_facts(registry, request("rooty", [str(tools / "rooty")]))
    assert any("declares sudo: true" in x for x in facts.mismatches)


def test_sudo_argv_without_askpass_is_flagged(registry: Registry, tools: Path) -> None:
    exe = str(tools / "rooty")
    facts = gather_facts(registry, request("rooty", ["sudo", "-S", "--", exe], m.Kind.SUDO))
    assert facts.mismatches


def test_code_for_a_registry_tool_is_flagged(registry: Registry, tools: Path) -> None:
    facts = gather_facts(registry, request("greet", [str(tools / "greet")], code="rm -rf ~"))
    assert any("code field" in x for x in facts.mismatches)


def test_a_tool_without_executable_is_flagged(registry: Registry) -> None:
    facts = gather_facts(registry, request("noexe", ["/nonexistent/prog"]))
    assert facts.executable is None
    assert facts.sha256 is None
    assert any("no executable" in x for x in facts.mismatches)


def test_unknown_hidden_and_broken_tools_raise(registry: Registry) -> None:
    with pytest.raises(ToolNotFoundError):
        gather_facts(registry, request("nope", ["/bin/true"]))
    with pytest.raises(ToolUnavailableError):
        gather_facts(registry, request("gone", ["/bin/true"]))
    with pytest.raises(ToolUnavailableError):
        gather_facts(registry, request("broken", ["/bin/true"]))


def bash() -> str:
    found = find_trusted("bash")
    assert found is not None
    return found


def test_code_request_facts_name_bash_and_its_hash(registry: Registry) -> None:
    code = "id -u; pwd"
    facts = gather_facts(registry, request(REQUEST_CODE_TOOL, [bash(), "-c", code], code=code))
    real = os.path.realpath(bash())
    assert facts.executable == real
    assert facts.sha256 == sha(real)
    assert facts.mismatches == ()
    assert "bash" in facts.description


def test_code_in_argv_must_be_the_code_shown(registry: Registry) -> None:
    facts = gather_facts(
        registry, request(REQUEST_CODE_TOOL, [bash(), "-c", "rm -rf ~"], code="echo harmless")
    )
    assert facts.mismatches == ("the code in argv differs from the code shown",)


def test_code_run_by_something_else_than_bash_c(registry: Registry, tmp_path: Path) -> None:
    for argv in (["/usr/bin/python3", "-c", "x"], [bash(), "-x", "x"], [bash(), "-c"]):
        facts = gather_facts(registry, request(REQUEST_CODE_TOOL, argv, code="x"))
        assert facts.mismatches, argv
    fake = tmp_path / "bash"
    fake.write_text("#!/bin/sh\n")
    facts = gather_facts(registry, request(REQUEST_CODE_TOOL, [str(fake), "-c", "x"], code="x"))
    assert facts.mismatches
    assert str(fake) in facts.mismatches[0]


def test_execute_code_without_code_is_a_registry_lookup(registry: Registry) -> None:
    with pytest.raises(ToolNotFoundError):
        gather_facts(registry, request(REQUEST_CODE_TOOL, [bash(), "-c", "x"]))


# --- the sha256 cache ------------------------------------------------------------------

LATER = 10 * 10**9  # a clock this far ahead makes every file count as settled


class CountingHasher:
    """Stands in for ``fd_sha256`` in the facts module and counts the files it hashes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, also: Any = None) -> None:
        self.calls = 0
        self._also = also
        monkeypatch.setattr(facts, "fd_sha256", self)

    def __call__(self, fd: int) -> str | None:
        self.calls += 1
        if self._also is not None:
            self._also()
        return fd_sha256(fd)


def settled_cache(**kw: Any) -> Sha256Cache:
    return Sha256Cache(clock_ns=lambda: time.time_ns() + LATER, **kw)


def test_an_unchanged_executable_is_hashed_once(
    registry: Registry, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(facts, "SHA256", settled_cache())
    hasher = CountingHasher(monkeypatch)
    exe = tools / "greet"
    for _ in range(3):
        assert gather_facts(registry, request("greet", [str(exe)])).sha256 == sha(exe)
    assert hasher.calls == 1


def test_a_modified_executable_of_the_same_size_is_hashed_again(
    registry: Registry, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(facts, "SHA256", settled_cache())
    exe = tools / "greet"
    before = gather_facts(registry, request("greet", [str(exe)])).sha256
    old = exe.stat()
    exe.write_text(exe.read_text().replace("greet", "GREET"))  # same size, in place
    os.utime(exe, ns=(old.st_atime_ns, old.st_mtime_ns + 10**9))  # a new mtime
    assert exe.stat().st_size == old.st_size
    assert exe.stat().st_ino == old.st_ino
    after = gather_facts(registry, request("greet", [str(exe)])).sha256
    assert after == sha(exe)
    assert after != before


def test_a_modification_hidden_behind_the_old_mtime_is_still_seen(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = settled_cache()
    exe = tools / "greet"
    before = cache.sha256(str(exe))
    old = exe.stat()
    exe.write_text(exe.read_text().replace("greet", "GREET"))
    os.utime(exe, ns=(old.st_atime_ns, old.st_mtime_ns))  # mtime put back: ctime still moved
    assert exe.stat().st_mtime_ns == old.st_mtime_ns
    assert cache.sha256(str(exe)) == sha(exe) != before


def test_a_file_replaced_by_another_is_hashed_again(tools: Path) -> None:
    cache = settled_cache()
    exe = tools / "greet"
    before = cache.sha256(str(exe))
    other = tools / "greet.new"
    other.write_text(exe.read_text().replace("greet", "GREET"))
    os.replace(other, exe)
    assert cache.sha256(str(exe)) == sha(exe) != before


def test_a_just_changed_file_is_hashed_every_time(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hasher = CountingHasher(monkeypatch)
    cache = Sha256Cache()  # the real clock: the fixture's files were written just now
    exe = tools / "greet"
    assert cache.sha256(str(exe)) == cache.sha256(str(exe)) == sha(exe)
    assert hasher.calls == 2


def test_a_file_changed_while_it_is_hashed_is_not_remembered(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = tools / "greet"
    hasher = CountingHasher(monkeypatch, also=lambda: exe.write_text(exe.read_text()))
    cache = settled_cache()
    cache.sha256(str(exe))
    cache.sha256(str(exe))
    assert hasher.calls == 2


def test_the_cache_holds_a_bounded_number_of_files(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hasher = CountingHasher(monkeypatch)
    cache = settled_cache(size=2)
    greet, rooty, gone = (str(tools / name) for name in ("greet", "rooty", "gone"))
    for path in (greet, rooty, greet, gone):  # gone evicts rooty, the least recently used
        cache.sha256(path)
    assert hasher.calls == 3
    cache.sha256(greet)
    assert hasher.calls == 3
    cache.sha256(rooty)
    assert hasher.calls == 4


def test_what_cannot_be_hashed_is_none(tools: Path, tmp_path: Path) -> None:
    cache = settled_cache()
    assert cache.sha256(str(tmp_path / "missing")) is None
    assert cache.sha256(str(tools)) is None  # a directory
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert cache.sha256(str(fifo)) is None


# --- argv[0] is the broker's own trusted program, by its absolute path -------------------


def planted_first_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """``<tmp>/x/name`` first on the broker's own PATH: what ``shutil.which`` would find."""
    fake = tmp_path / "x" / name
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    return fake


def test_the_broker_refuses_a_bare_or_planted_sudo(
    registry: Registry, tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bare name runs whatever the requester's PATH finds first: not the broker's word.
    fake = planted_first_on_path(tmp_path, monkeypatch, "sudo")
    exe = str(tools / "rooty")
    for sudo in ("sudo", str(fake), "/tmp/x/sudo", "./sudo"):
        facts = gather_facts(
            registry, request("rooty", [sudo, "-A", "--", *pinned_exec(exe)], m.Kind.SUDO)
        )
        assert len(facts.mismatches) == 1, sudo
        assert repr(sudo) in facts.mismatches[0]


def test_the_broker_accepts_exactly_its_own_trusted_sudo(
    registry: Registry, tools: Path, tmp_path: Path
) -> None:
    exe = str(tools / "rooty")
    injected = str(tmp_path / "the-one" / "sudo")

    def find(name: str) -> str | None:
        return injected if name == "sudo" else find_trusted(name)

    def mismatches(sudo: str) -> tuple[str, ...]:
        req = request("rooty", [sudo, "-A", "--", *pinned_exec(exe)], m.Kind.SUDO)
        return gather_facts(registry, req, find_program=find).mismatches

    assert mismatches(injected) == ()
    # Another name of the same file is still another path: exactly the one found.
    assert mismatches(f"{tmp_path}/the-one/./sudo")
    assert mismatches("/usr/bin/sudo")


def test_without_a_trusted_sudo_every_sudo_request_is_flagged(
    registry: Registry, tools: Path
) -> None:
    exe = str(tools / "rooty")
    req = request("rooty", ["/usr/bin/sudo", "-A", "--", *pinned_exec(exe)], m.Kind.SUDO)
    facts = gather_facts(registry, req, find_program=lambda name: None)
    assert any("sudo" in x and "not installed" in x for x in facts.mismatches)


def test_the_broker_refuses_a_bare_or_planted_bash_for_code(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = planted_first_on_path(tmp_path, monkeypatch, "bash")
    for shell in ("bash", str(fake)):
        req = request(REQUEST_CODE_TOOL, [shell, "-c", "x"], code="x")
        facts = gather_facts(registry, req)
        assert facts.mismatches == (f"argv {[shell, '-c', 'x']!r} is not bash -c <code>",)
        assert facts.executable == os.path.realpath(bash())


def test_the_trusted_programs_are_looked_up_again_after_their_second() -> None:
    from registry_core.broker.decide.facts import TrustedPrograms

    answers = iter(["/usr/bin/python3", None])
    calls: list[str] = []

    def find(name: str) -> str | None:
        calls.append(name)
        return next(answers)

    programs = TrustedPrograms(find, ttl=0.05)
    assert programs("python3") == programs("python3") == "/usr/bin/python3"
    assert calls == ["python3"]  # one walk for requests within the second
    time.sleep(0.06)
    assert programs("python3") is None  # a program gone untrusted is seen after it
    assert calls == ["python3", "python3"]
