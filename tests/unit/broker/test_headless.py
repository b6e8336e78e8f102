"""``build_broker``: the front-end it picks, the user's files it opens, and the two ways
it holds the registry (resident, or one lookup per request), with real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_core import paths
from registry_core.broker.ask.choose import choose_prompter
from registry_core.broker.decide.core import BrokerConfig
from registry_core.broker.headless import build_broker
from registry_core.trusted import find_trusted


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    tools = tmp_path / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        (tools / f"{name}.meta").write_text(json.dumps({"description": f"tool {name}"}))
    return {
        "HOME": str(tmp_path / "home"),
        "OLLIE_TOOLS_PATH": str(tools),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "PATH": str(tmp_path / "bin"),
        **extra,
    }


def with_zenity(tmp_path: Path) -> dict[str, str]:
    """A display, and a zenity stand-in first on PATH: never run, never even counted
    (the dialogs are the trusted programs of the system directories)."""
    (tmp_path / "bin").mkdir()
    zenity = tmp_path / "bin" / "zenity"
    zenity.write_text("#!/bin/sh\nexit 1\n")
    zenity.chmod(0o755)
    return env_for(tmp_path, DISPLAY=":99")


def first_trusted_dialog() -> str:
    found = [name for name in ("kdialog", "zenity") if find_trusted(name)]
    if not found:
        pytest.skip("neither kdialog nor zenity is installed in a system directory")
    return found[0]


def test_a_named_front_end_is_the_one_used(tmp_path: Path) -> None:
    env = with_zenity(tmp_path)
    assert build_broker(env, "none").prompter.name == "none"
    zenity = build_broker(env, "zenity").prompter
    assert zenity.name == "zenity"
    # It looked at the given DISPLAY (and the system's zenity, not PATH's).
    assert zenity.available() is (find_trusted("zenity") is not None)
    assert not build_broker(env_for(tmp_path / "headless"), "zenity").prompter.available()


def test_without_a_name_the_first_front_end_that_can_ask(tmp_path: Path) -> None:
    assert build_broker(with_zenity(tmp_path)).prompter.name == first_trusted_dialog()


def test_without_a_name_and_nobody_to_ask_none(tmp_path: Path) -> None:
    # No display: no dialog can ask (and the tests have no terminal).
    assert build_broker(env_for(tmp_path)).prompter.name == "none"


def test_a_given_front_end_wins_over_a_name(tmp_path: Path) -> None:
    env = with_zenity(tmp_path)
    given = choose_prompter("none", env)
    assert build_broker(env, "zenity", prompter=given).prompter is given
    assert build_broker(env, prompter=given).prompter is given


def test_the_users_policy_file_audit_log_and_configuration(tmp_path: Path) -> None:
    env = env_for(tmp_path, OLLIE_AUDIT_KEEP="3")
    config = BrokerConfig(prompt_timeout=5)
    broker = build_broker(env, "none", config=config)
    assert broker.policies.path == tmp_path / "config" / "ollie" / "policies.yaml"
    assert broker.actions.path == tmp_path / "config" / "ollie" / "action-policies.json"
    assert broker.audit.path == tmp_path / "state" / "ollie" / "audit.jsonl"
    assert broker.audit.keep == 3
    assert broker.config is config
    assert build_broker(env, "none").config == BrokerConfig()


def test_a_resident_broker_keeps_the_whole_registry(tmp_path: Path) -> None:
    broker = build_broker(env_for(tmp_path), "none")
    assert broker.registry_for is None
    assert sorted(broker.registry().tools) == ["a", "b"]


def test_a_broker_for_one_command_looks_up_the_tool_it_is_asked_for(tmp_path: Path) -> None:
    broker = build_broker(env_for(tmp_path), "none", resident=False)
    assert broker.registry_for is not None
    assert sorted(broker.registry_for("a").tools) == ["a"]
    assert sorted(broker.registry().tools) == ["a", "b"]


def test_executables_are_found_on_the_given_environments_path(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    (tmp_path / "bin").mkdir()
    mine = tmp_path / "bin" / "only-here"  # on the given PATH, not on this process's
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    (tmp_path / "tools" / "only-here.meta").write_text(json.dumps({"description": "d"}))
    resident = build_broker(env, "none")
    assert resident.registry().tools["only-here"].executable == mine
    one_command = build_broker(env, "none", resident=False)
    assert one_command.registry_for is not None
    assert one_command.registry_for("only-here").tools["only-here"].executable == mine
    assert one_command.registry().tools["only-here"].executable == mine


def test_only_a_resident_broker_keeps_a_scan_cache(tmp_path: Path) -> None:
    # The shipped examples settled long ago: the scan cache only keeps settled files.
    shipped = str(paths.resources_dir() / "examples" / "tools")
    resident_env = {**env_for(tmp_path / "r"), "OLLIE_TOOLS_PATH": shipped}
    assert "greet" in build_broker(resident_env, "none").registry().tools
    cache = tmp_path / "r" / "cache" / "ollie" / "registry"
    assert [p.suffix for p in cache.iterdir()] == [".json"]
    one_env = {**env_for(tmp_path / "o"), "OLLIE_TOOLS_PATH": shipped}
    assert "greet" in build_broker(one_env, "none", resident=False).registry().tools
    assert not (tmp_path / "o" / "cache").exists()
