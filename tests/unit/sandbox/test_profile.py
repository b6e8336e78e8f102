"""Tests of sandbox profile loading and validation (registry_core.sandbox.profiles)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from registry_core.errors import ProfileError
from registry_core.sandbox.profiles import (
    MAX_PROFILE_BYTES,
    Access,
    LogLevel,
    NetworkMode,
    install_default_profile,
    load_profile,
    load_profile_file,
    parse_profile,
    parse_profile_text,
    shipped_default_profile,
)
from registry_core.sandbox.rules import effective_rules

FULL_PROFILE = """\
filesystem:
  ro: [/etc]
  rox: [/usr, "{OLLIE_TOOLS_PATH}"]
  rw: ["{CWD}"]
  rwx: ["{TMPDIR}"]
network:
  enabled: true
  unrestricted: false
  bind_tcp: ["8080"]
  connect_tcp: [443, "80"]
env: [PATH, LANG, LC_*, EDITOR=vi]
general:
  best_effort: true
  log_level: debug
advanced:
  ldd: true
  add_exec: true
"""

# A profile as the ollie-core runtime ships them.
OLLIE_CORE_STYLE = """\
filesystem:
  rwx: ["{CWD}", "{TMPDIR}"]
  ro: ["/usr", "/etc", "/lib", "/lib64", "/bin", "{HOME}/.gitconfig"]
  rox: ["/usr/bin", "/bin"]
env: [PATH, HOME, TERM, LANG]
network:
  enabled: true
  unrestricted: true
"""


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def test_full_key_set_is_read() -> None:
    profile = parse_profile_text(FULL_PROFILE, name="full", source="/p/full.yaml")
    assert profile.name == "full"
    assert profile.filesystem.ro == ("/etc",)
    assert profile.filesystem.rox == ("/usr", "{OLLIE_TOOLS_PATH}")
    assert profile.filesystem.rw == ("{CWD}",)
    assert profile.filesystem.rwx == ("{TMPDIR}",)
    assert profile.network.mode is NetworkMode.RESTRICTED
    assert profile.network.bind_tcp == (8080,)
    assert profile.network.connect_tcp == (443, 80)
    assert profile.env == ("PATH", "LANG", "LC_*")
    assert profile.env_values == (("EDITOR", "vi"),)
    assert profile.general.best_effort is True
    assert profile.general.log_level is LogLevel.DEBUG
    assert profile.advanced.ldd is True
    assert profile.advanced.add_exec is True
    assert profile.advanced.exec_paths == ()
    assert profile.warnings == ()


def test_entries_yield_every_access_class() -> None:
    profile = parse_profile_text(FULL_PROFILE, name="full", source="/p/full.yaml")
    entries = list(profile.filesystem.entries())
    assert ("/etc", Access.RO) in entries
    assert ("{TMPDIR}", Access.RWX) in entries
    assert len(entries) == 5


def test_empty_file_is_an_empty_profile() -> None:
    profile = parse_profile_text("", name="e", source="/p/e.yaml")
    assert profile.filesystem.ro == ()
    assert profile.network.mode is NetworkMode.DENY  # ollie-core: enabled missing = false
    assert profile.general.best_effort is False


@pytest.mark.parametrize(
    ("network", "mode"),
    [
        ({"enabled": False}, NetworkMode.DENY),
        ({"enabled": False, "unrestricted": True}, NetworkMode.DENY),
        ({"unrestricted": True}, NetworkMode.DENY),
        ({}, NetworkMode.DENY),
        ({"enabled": True}, NetworkMode.RESTRICTED),
        ({"enabled": True, "unrestricted": True}, NetworkMode.UNRESTRICTED),
    ],
)
def test_network_mode(network: dict[str, object], mode: NetworkMode) -> None:
    profile = parse_profile({"network": network}, name="n", source="/p/n.yaml")
    assert profile.network.mode is mode


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([443], (443,)),
        (["443"], (443,)),
        ([80, "80", 1, 65535], (80, 1, 65535)),
        (["80,443", " 8080 ", "22, 80"], (80, 443, 8080, 22)),
    ],
)
def test_ports_as_int_or_string(ports: list[object], expected: tuple[int, ...]) -> None:
    profile = parse_profile(
        {"network": {"enabled": True, "connect_tcp": ports}}, name="n", source="/p/n.yaml"
    )
    assert profile.network.connect_tcp == expected


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        (0, "'0'"),
        (65536, "'65536'"),
        (-1, "'-1'"),
        ("https", "'https'"),
        ("44x", "'44x'"),
        ("080", "'080'"),  # landrun would read a leading 0 as octal
        ("0x50", "'0x50'"),
        ("80,", "'80,'"),
        (True, "'true'"),
        (4.5, "'4.5'"),
        (None, "''"),
        ([443], "a list"),
    ],
)
def test_bad_port_names_key_and_value(bad: object, shown: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile({"network": {"bind_tcp": [bad]}}, name="n", source="/p/n.yaml")
    assert info.value.path == "/p/n.yaml"
    assert "network.bind_tcp" in str(info.value)
    assert shown in str(info.value)


@pytest.mark.parametrize(
    ("data", "key", "value"),
    [
        ({"filesystem": {"ro": "/etc"}}, "filesystem.ro", "'/etc'"),
        ({"filesystem": {"rw": [["/a"]]}}, "filesystem.rw", "a list"),
        ({"filesystem": ["/etc"]}, "filesystem", "a list"),
        ({"network": {"enabled": "yes please"}}, "network.enabled", "'yes please'"),
        ({"network": {"connect_tcp": 443}}, "network.connect_tcp", "443"),
        ({"env": ["=1"]}, "env", "'=1'"),
        ({"env": ["A\0B"]}, "env", "'A\\x00B'"),
        ({"env": "PATH"}, "env", "'PATH'"),
        ({"general": {"best_effort": 1}}, "general.best_effort", "1"),
        ({"general": {"log_level": ["debug"]}}, "general.log_level", "a list"),
        ({"advanced": {"ldd": "true"}}, "advanced.ldd", "'true'"),  # quoted: yaml.v3 refuses
        ({"advanced": {"add_exec": {"x": 1}}}, "advanced.add_exec", "a mapping"),
        (["not", "a", "mapping"], "profile", "a list"),
    ],
)
def test_bad_values_raise_profile_error(data: object, key: str, value: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(data, name="b", source="/p/b.yaml")
    message = str(info.value)
    assert message.startswith("/p/b.yaml: ")
    assert f"{key}:" in message
    assert value in message


def test_unknown_keys_are_warnings_not_errors() -> None:
    profile = parse_profile(
        {
            "filesystem": {"ro": ["/etc"], "rx": ["/usr"]},
            "network": {"udp": True},
            "mystery": 1,
            "general": {"verbose": True},
            "advanced": {"seccomp": True},
        },
        name="u",
        source="/p/u.yaml",
    )
    assert profile.filesystem.ro == ("/etc",)
    assert set(profile.warnings) == {
        "unknown key 'filesystem.rx' (ignored)",
        "unknown key 'network.udp' (ignored)",
        "unknown key 'profile.mystery' (ignored)",
        "unknown key 'general.verbose' (ignored)",
        "unknown key 'advanced.seccomp' (ignored)",
    }


def test_ports_with_unrestricted_network_warn() -> None:
    profile = parse_profile(
        {"network": {"enabled": True, "unrestricted": True, "connect_tcp": [443]}},
        name="w",
        source="/p/w.yaml",
    )
    assert any("ignored" in warning for warning in profile.warnings)


@pytest.mark.parametrize("word", ["error", "info", "debug"])
def test_landrun_log_levels_are_read_silently(word: str) -> None:
    profile = parse_profile({"general": {"log_level": word}}, name="l", source="/p/l.yaml")
    assert profile.general.log_level.value == word
    assert profile.warnings == ()


def test_a_missing_log_level_is_landruns_default() -> None:
    profile = parse_profile({"general": {}}, name="l", source="/p/l.yaml")
    assert profile.general.log_level is LogLevel.ERROR


@pytest.mark.parametrize(
    ("word", "level"),
    [("WARNING", LogLevel.WARN), ("Error", LogLevel.ERROR), ("loud", LogLevel.ERROR)],
)
def test_other_log_levels_load_with_a_warning(word: str, level: LogLevel) -> None:
    # ollie-core passes any string on to landrun; the profile still loads.
    profile = parse_profile({"general": {"log_level": word}}, name="l", source="/p/l.yaml")
    assert profile.general.log_level is level
    assert any("general.log_level" in w for w in profile.warnings)


def test_yaml_syntax_error_has_position() -> None:
    with pytest.raises(ProfileError, match=r"invalid YAML: line 2, column 11: mapping values"):
        parse_profile_text("env: [PATH]\nnetwork: x: y\n", name="s", source="/p/s.yaml")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("#" * (MAX_PROFILE_BYTES + 1))
    with pytest.raises(ProfileError, match="larger than"):
        load_profile_file(path)


def test_first_use_installs_the_shipped_default(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    target = tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    assert not target.exists()
    profile = load_profile(env)
    assert target.read_bytes() == shipped_default_profile().read_bytes()
    assert profile.name == "default"
    assert profile.source == str(target)
    # Said once, when it happens (ollie-core would refuse instead).
    [note] = profile.warnings
    assert "default profile was missing" in note and str(target) in note
    assert load_profile(env).warnings == ()
    # No temp file left (beside the profile: only its remembered parse, profile_cache.py).
    parsed = target.with_name(".default.yaml.parsed.json")
    assert sorted(target.parent.iterdir()) == [parsed, target]


def test_an_edited_default_is_never_overwritten(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    target = tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    target.parent.mkdir(parents=True)
    target.write_text("env: [PATH]\n")
    assert install_default_profile(env) == target
    assert load_profile(env).env == ("PATH",)


def test_missing_named_profile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not found") as info:
        load_profile(env_for(tmp_path), "strict")
    assert info.value.path.endswith("ollie/sandbox/strict.yaml")


@pytest.mark.parametrize("name", ["../default", ".hidden", "a/b", ""])
def test_profile_name_cannot_escape_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(ProfileError, match="invalid profile name"):
        load_profile(env_for(tmp_path), name)


def test_shipped_default_is_valid_and_sensible(tmp_path: Path) -> None:
    profile = load_profile_file(shipped_default_profile(), name="default")
    assert profile.warnings == ()
    assert profile.advanced.add_exec is False
    assert profile.general.log_level is LogLevel.ERROR
    assert profile.general.best_effort is False
    assert profile.network.mode is NetworkMode.RESTRICTED
    assert profile.network.connect_tcp[-2:] == (80, 443)
    assert profile.network.bind_tcp == ()
    for hidden in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK"):
        assert hidden not in profile.env
    assert "{CWD}" in profile.filesystem.rw
    assert "{OLLIE_TOOLS_PATH}" in profile.filesystem.rox
    home = str(tmp_path / "home")
    rules = effective_rules(profile, {"HOME": home}, str(tmp_path / "work"))
    # Nothing of the home directory is granted except the tools directory.
    granted_home = [r.path for r in rules.paths if r.path.startswith(home)]
    assert granted_home == [f"{home}/.config/ollie/tools"]


def test_ollie_core_style_profile_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "sandbox" / "core.yaml"
    path.parent.mkdir()
    path.write_text(OLLIE_CORE_STYLE)
    profile = load_profile_file(path)
    assert profile.name == "core"
    assert profile.warnings == ()
    assert profile.network.mode is NetworkMode.UNRESTRICTED
    assert yaml.safe_load(OLLIE_CORE_STYLE)["filesystem"]["rwx"] == list(profile.filesystem.rwx)
    env = {"HOME": "/home/u", "TMPDIR": "/var/tmp"}
    rules = effective_rules(profile, env, "/work/proj")
    paths = {(r.path, r.access) for r in rules.paths}
    assert ("/work/proj", Access.RWX) in paths
    assert ("/var/tmp", Access.RWX) in paths
    assert ("/home/u/.gitconfig", Access.RO) in paths
    assert rules.env == ("PATH", "HOME", "TERM", "LANG")
