"""Ollie's own places and the profile rules that would open them
(registry_core.sandbox.protected; containment II, finding 5).

A writable rule at, above or inside Ollie's configuration, state, cache,
runtime or tools directories or its installation lets a tool plant what
later runs outside the sandbox: refused, naming the profile, key, line,
value and place.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import registry_core
from registry_core import paths
from registry_core.errors import ProfileError, ProtectedPathError
from registry_core.sandbox import effective_rules, parse_profile_text
from registry_core.sandbox.mounts import TMP
from registry_core.sandbox.profiles import FilesystemSection, SandboxProfile
from registry_core.sandbox.protected import (
    installation_dirs,
    overlap,
    protected_dirs,
    refuse_protected_rules,
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    return {"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path / "run"), "PATH": "/usr/bin"}


def profile(text: str, name: str = "p") -> SandboxProfile:
    return parse_profile_text(text, name=name, source=f"/profiles/{name}.yaml")


def refusal(text: str, env: dict[str, str]) -> ProtectedPathError:
    with pytest.raises(ProtectedPathError) as caught:
        refuse_protected_rules(profile(text), env, env["HOME"] + "/project", [])
    assert isinstance(caught.value, ProfileError)  # the CLI's profile-error path
    return caught.value


def allowed(text: str, env: dict[str, str]) -> None:
    refuse_protected_rules(profile(text), env, env["HOME"] + "/project", [])


# --- the list ------------------------------------------------------------------------------


def test_the_list_names_ollies_directories(env: dict[str, str], tmp_path: Path) -> None:
    home = Path(env["HOME"])
    found = protected_dirs(env, [tmp_path / "tools"])
    assert found[str(home / ".config" / "ollie")] == "Ollie's configuration directory"
    assert found[str(home / ".local" / "state" / "ollie")] == "Ollie's state directory"
    assert found[str(home / ".cache" / "ollie")] == "Ollie's cache directory"
    assert found[str(tmp_path / "run" / "ollie")] == "Ollie's runtime directory"
    assert found[str(tmp_path / "run" / "ollie-tmp")] == (
        "where sandboxed calls get their private /tmp"
    )
    assert found[str(tmp_path / "tools")] == "a tools directory"


def test_the_list_names_the_installation(env: dict[str, str]) -> None:
    found = installation_dirs(env)
    assert found[os.path.realpath(sys.prefix)] == "Ollie's Python installation (sys.prefix)"
    assert os.path.realpath(sys.base_prefix) in found
    package = os.path.dirname(os.path.dirname(os.path.realpath(registry_core.__file__)))
    assert found[package] == "where Ollie's registry_core package is installed"
    commands = os.path.realpath(os.path.dirname(sys.executable))
    assert commands in found  # named as sys.prefix's bin when inside a venv: any name
    assert set(found) <= set(protected_dirs(env, []))
    assert "/" not in found


def test_a_path_directory_linking_to_ollies_commands_is_protected(
    env: dict[str, str], tmp_path: Path
) -> None:
    links, other = tmp_path / "local-bin", tmp_path / "other-bin"
    links.mkdir()
    other.mkdir()
    own = paths.own_program_dirs()[0]
    (links / "ollie-tools").symlink_to(os.path.join(own, "ollie-tools"))  # pipx's kind
    (other / "ollie-tools").symlink_to(tmp_path / "elsewhere" / "ollie-tools")
    found = installation_dirs({**env, "PATH": f"{other}:relative:{links}:"})
    assert found[str(links)] == "a directory linking to Ollie's commands"
    assert str(other) not in found


def test_overlap_says_at_above_or_inside() -> None:
    places = {"/h/.config/ollie": "config"}
    assert overlap("/h/.config/ollie", places) == ("at", "/h/.config/ollie", "config")
    assert overlap("/h", places) == ("above", "/h/.config/ollie", "config")
    assert overlap("/h/.config/ollie/tools/x", places) == ("inside", "/h/.config/ollie", "config")
    assert overlap("/h/.config/ollie-other", places) is None
    assert overlap("/h/.config/olli", places) is None


# --- the refusals, word for word ------------------------------------------------------------


def test_rw_on_xdg_config_home_is_refused_naming_key_line_value_and_place(
    env: dict[str, str],
) -> None:
    text = 'filesystem:\n  ro: ["/etc"]\n  rw:\n    - "{CWD}"\n    - "{XDG_CONFIG_HOME}"\n'
    caught = refusal(text, env)
    config = Path(env["HOME"]) / ".config"
    assert str(caught) == (
        f"/profiles/p.yaml: sandbox profile 'p' grants rw on '{{XDG_CONFIG_HOME}}'"
        f" (filesystem.rw, line 5, {config}), which is above Ollie's configuration directory"
        f" ({config / 'ollie'}): a tool could change Ollie's own configuration, state or"
        " installation, and what it writes there runs outside the sandbox."
        " Remove or narrow that rule."
    )
    assert (caught.origin, caught.template, caught.relation) == (
        "filesystem.rw, line 5",
        "{XDG_CONFIG_HOME}",
        "above",
    )
    assert (caught.profile, caught.path, caught.access) == ("p", "/profiles/p.yaml", "rw")


def test_rw_on_home_is_above_ollies_directories(env: dict[str, str]) -> None:
    caught = refusal('filesystem:\n  rw: ["{HOME}"]\n', env)
    assert caught.relation == "above"
    assert "'{HOME}' (filesystem.rw, line 2, " in str(caught)


def test_a_literal_tilde_is_dropped_not_expanded_so_it_grants_nothing(
    env: dict[str, str],
) -> None:
    # '~' is not expanded (as in ollie-core): the rule is dropped with a warning, so the
    # home is not writable and there is nothing to refuse.
    text = 'filesystem:\n  rw: ["~", "~/.config"]\n'
    allowed(text, env)
    rules = effective_rules(profile(text), env, env["HOME"] + "/project")
    assert rules.paths == ()
    assert len(rules.skipped) == 2


def test_rwx_inside_the_state_directory_is_refused(env: dict[str, str]) -> None:
    state = Path(env["HOME"]) / ".local" / "state" / "ollie"
    caught = refusal('filesystem:\n  rwx: ["{XDG_STATE_HOME}/ollie/audit"]\n', env)
    assert caught.relation == "inside"
    assert caught.access == "rwx"
    assert f"which is inside Ollie's state directory ({state}):" in str(caught)


def test_rw_at_a_tools_directory_and_the_tools_path_template(
    env: dict[str, str], tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    with_tools = {**env, "OLLIE_TOOLS_PATH": str(tools)}
    with pytest.raises(ProtectedPathError) as caught:
        refuse_protected_rules(
            profile('filesystem:\n  rw: ["{OLLIE_TOOLS_PATH}"]\n'), with_tools, "/w", [tools]
        )
    assert caught.value.relation == "at"
    assert f"which is a tools directory ({tools}):" in str(caught.value)


def test_rules_on_the_installation_are_refused(env: dict[str, str]) -> None:
    prefix = os.path.realpath(sys.prefix)
    caught = refusal(f'filesystem:\n  rw: ["{prefix}/lib"]\n', env)
    assert f"inside Ollie's Python installation (sys.prefix) ({prefix})" in str(caught)
    checkout = os.path.dirname(prefix)
    assert refusal(f'filesystem:\n  rw: ["{checkout}"]\n', env).relation in ("at", "above")


def test_a_symlink_to_ollies_configuration_is_followed(env: dict[str, str], tmp_path: Path) -> None:
    config = Path(env["HOME"]) / ".config" / "ollie"
    config.mkdir(parents=True)
    (tmp_path / "innocent").symlink_to(config)
    caught = refusal(f'filesystem:\n  rw: ["{tmp_path}/innocent"]\n', env)
    assert caught.relation == "at"
    assert caught.rule_path == str(config)
    assert f"'{tmp_path}/innocent' (filesystem.rw, line 2, {config})" in str(caught)


def test_a_relative_rule_is_taken_from_the_working_directory(env: dict[str, str]) -> None:
    caught = refusal('filesystem:\n  rw: ["../.config"]\n', env)
    assert caught.relation == "above"


def test_read_only_rules_and_ordinary_writable_ones_are_fine(
    env: dict[str, str], tmp_path: Path
) -> None:
    allowed(
        'filesystem:\n  ro: ["{HOME}", "{XDG_CONFIG_HOME}"]\n  rox: ["{OLLIE_TOOLS_PATH}"]\n'
        '  rw: ["{CWD}", "{CWD}/sub", "/dev/null", "{HOME}/.config/ollie-other",'
        f' "{tmp_path}/run/ollie-x", "{{UNSET_VARIABLE}}/x"]\n',
        env,
    )


def test_the_private_tmp_and_the_working_directory_are_not_this_checks(
    env: dict[str, str],
) -> None:
    # Under the namespace sandbox {TMPDIR} is the call's own /tmp, not the host's.
    home_tmp = {**env, "TMPDIR": TMP}
    refuse_protected_rules(
        profile('filesystem:\n  rw: ["{TMPDIR}"]\n'), home_tmp, "/w", [], private=(TMP,)
    )
    # {CWD} is check_working_directory's (refused there first, with its own message).
    refuse_protected_rules(profile('filesystem:\n  rw: ["{CWD}"]\n'), env, env["HOME"], [])


def test_a_profile_without_lines_names_the_key_alone(env: dict[str, str]) -> None:
    built = SandboxProfile(
        name="built", source="<memory>", filesystem=FilesystemSection(rw=("{HOME}",))
    )
    with pytest.raises(ProtectedPathError) as caught:
        refuse_protected_rules(built, env, "/w", [])
    assert caught.value.origin == "filesystem.rw"
    assert str(caught.value).startswith("<memory>: sandbox profile 'built' grants rw on '{HOME}'")
