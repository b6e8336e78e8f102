"""Ollie's own state is never writable from inside (containment II, finding 5).

The attack: a profile with ``rw: ["{XDG_CONFIG_HOME}"]`` let a tool write a tool
and an allow rule into Ollie's configuration, which then ran unsandboxed with no
dialog; a working directory holding Ollie's installation (a checkout's ``.venv``)
let a planted ``.pth`` run in the next ``ollie-tools``.  Both are refused before
the tool starts, naming the profile, the key, the line and the value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dispatch_helpers import MARKER, Stack

from registry_core.dispatch import CallOptions
from registry_core.errors import ProfileError, UnsafeWorkingDirectoryError


def _profile_with_rw(stack: Stack, name: str, *extra: str) -> Path:
    data = stack.default_profile_with()
    data["filesystem"]["rw"] = ["{CWD}", *extra]
    return stack.write_profile(name, data)


def _line_of(path: Path, value: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if value in text and text.lstrip("- "))


def test_a_profile_granting_write_on_xdg_config_home_is_refused(stack: Stack) -> None:
    path = _profile_with_rw(stack, "attack", "{XDG_CONFIG_HOME}")
    stack.tool("victim", MARKER)
    with pytest.raises(ProfileError) as caught:
        stack.call("victim", profile="attack")
    message = str(caught.value)
    line = _line_of(path, "{XDG_CONFIG_HOME}")
    config = stack.root / "config"
    assert f"filesystem.rw, line {line}" in message
    assert "'{XDG_CONFIG_HOME}'" in message
    assert "'attack'" in message and str(path) in message
    assert f"Ollie's configuration directory ({config / 'ollie'})" in message
    assert not (stack.cwd / "ran").exists()


def test_a_rule_above_ollies_directories_is_refused(stack: Stack) -> None:
    _profile_with_rw(stack, "home", "{HOME}")
    stack.tool("victim", MARKER)
    with pytest.raises(ProfileError) as caught:
        stack.call("victim", profile="home")
    assert "'{HOME}'" in str(caught.value)
    assert "above" in str(caught.value)
    assert not (stack.cwd / "ran").exists()


def test_a_rule_inside_ollies_state_directory_is_refused(stack: Stack) -> None:
    _profile_with_rw(stack, "state", "{XDG_STATE_HOME}/ollie/audit")
    stack.tool("victim", MARKER)
    with pytest.raises(ProfileError) as caught:
        stack.call("victim", profile="state")
    state = stack.home / ".local" / "state" / "ollie"
    assert f"Ollie's state directory ({state})" in str(caught.value)
    assert not (stack.cwd / "ran").exists()


def test_a_working_directory_holding_ollies_own_venv_is_refused(stack: Stack) -> None:
    checkout = Path(sys.prefix).parent  # the checkout whose .venv runs these tests
    stack.tool("victim", MARKER)
    with pytest.raises(UnsafeWorkingDirectoryError) as caught:
        stack.dispatcher().call("victim", {}, CallOptions(cwd=str(checkout)))
    assert str(Path(sys.prefix).resolve()) in caught.value.reason
    assert not (checkout / "ran").exists()
