"""Ollie's config root is shared with ollie-core: ``OLLIE_CFG_PATH`` first (registry_core.paths).

Every component that reads or writes Ollie's config follows it: sandbox
profiles, the default tools path, the plugin path, the policies file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core import paths
from registry_core.broker.remember.policies import PolicyStore
from registry_core.sandbox.profiles import load_profile


def test_ollie_cfg_path_wins_over_xdg_config_home(tmp_path: Path) -> None:
    env = {"HOME": "/h", "XDG_CONFIG_HOME": "/xdg", "OLLIE_CFG_PATH": str(tmp_path / "cfg")}
    root = tmp_path / "cfg"
    assert paths.ollie_config_dir(env) == root
    assert paths.sandbox_profile_path(env, "default") == root / "sandbox" / "default.yaml"
    assert paths.tools_path(env) == [root / "tools"]
    assert paths.policies_file(env) == root / "policies.yaml"
    assert paths.plugins_dir(env) == root / "scripts" / "x"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"HOME": "/h"}, "/h/.config/ollie"),
        ({"HOME": "/h", "OLLIE_CFG_PATH": ""}, "/h/.config/ollie"),  # empty = unset, as in Go
        ({"HOME": "/h", "XDG_CONFIG_HOME": "/xdg"}, "/xdg/ollie"),
        ({"HOME": "/h", "XDG_CONFIG_HOME": "/xdg", "OLLIE_CFG_PATH": "/o"}, "/o"),
    ],
)
def test_config_root_precedence(env: dict[str, str], expected: str) -> None:
    assert paths.ollie_config_dir(env) == Path(expected)


def test_a_relative_ollie_cfg_path_is_taken_from_the_working_directory() -> None:
    assert paths.ollie_config_dir({"OLLIE_CFG_PATH": "rel/cfg"}) == Path(os.getcwd(), "rel/cfg")


def test_ollie_data_path_as_ollie_core_defines_it() -> None:
    assert paths.ollie_data_dir({"HOME": "/h"}) == Path("/h/.local/share/ollie")
    assert paths.ollie_data_dir({"HOME": "/h", "XDG_DATA_HOME": "/x"}) == Path(
        "/h/.local/share/ollie"
    )
    assert paths.ollie_data_dir({"HOME": "/h", "OLLIE_DATA_PATH": "/d"}) == Path("/d")


def test_plugins_path_takes_the_first_entry_like_ollie_core() -> None:
    env = {"HOME": "/h", "OLLIE_PLUGINS_PATH": "/p/one:/p/two"}
    assert paths.plugins_dir(env) == Path("/p/one")


def test_profiles_and_policies_are_read_from_ollie_cfg_path(tmp_path: Path) -> None:
    cfg = tmp_path / "shared-with-ollie-core"
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "OLLIE_CFG_PATH": str(cfg),
    }
    (cfg / "sandbox").mkdir(parents=True)
    (cfg / "sandbox" / "mine.yaml").write_text("env: [I17_MARK]\n")
    assert load_profile(env, "mine").env == ("I17_MARK",)
    # The default profile is installed there too, never under XDG_CONFIG_HOME.
    load_profile(env)
    assert (cfg / "sandbox" / "default.yaml").is_file()
    assert not (tmp_path / "xdg").exists()
    store = PolicyStore(paths.policies_file(env))
    assert store.path == cfg / "policies.yaml"
