"""Unit tests of request facts: what the broker's own registry says, and every mismatch."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from registry_core.elevation import messages as m
from registry_core.elevation.facts import REQUEST_CODE_TOOL, gather_facts
from registry_core.errors import ToolNotFoundError, ToolUnavailableError
from registry_core.registry import Registry, RegistryLoader


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
    facts = gather_facts(registry, request("greet", [str(exe)]))
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
    facts = gather_facts(registry, request("rooty", ["sudo", "-A", "--", exe], m.Kind.SUDO))
    assert facts.mismatches == ()
    sudo = shutil.which("sudo")
    if sudo is not None:
        full = gather_facts(registry, request("rooty", [sudo, "-A", "--", exe], m.Kind.SUDO))
        assert full.mismatches == ()


def test_a_fake_sudo_is_flagged(registry: Registry, tools: Path, tmp_path: Path) -> None:
    fake = tmp_path / "evil" / "sudo"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    exe = str(tools / "rooty")
    facts = gather_facts(registry, request("rooty", [str(fake), "-A", "--", exe], m.Kind.SUDO))
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
    found = shutil.which("bash")
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
