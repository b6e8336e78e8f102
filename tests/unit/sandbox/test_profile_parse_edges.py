"""Every refusal and warning of a profile's YAML, word for word (sandbox.profile_parse).

A person fixing a profile reads these messages: each must name the file,
the key, the value and the line.  The tests parse real YAML text so the
line numbers are the file's own.
"""

from __future__ import annotations

import pytest

from registry_core.errors import ProfileError
from registry_core.sandbox.profile_parse import parse_profile_text
from registry_core.sandbox.profiles import LogLevel, NetworkMode, SandboxProfile

SOURCE = "/cfg/ollie/sandbox/edge.yaml"


def parse(text: str) -> SandboxProfile:
    return parse_profile_text(text, name="edge", source=SOURCE)


def refusal(text: str) -> str:
    with pytest.raises(ProfileError) as caught:
        parse(text)
    assert caught.value.path == SOURCE
    prefix = f"{SOURCE}: "
    message = str(caught.value)
    assert message.startswith(prefix)
    assert caught.value.message == message[len(prefix) :]
    return caught.value.message


PORTS_WANTED = 'expected TCP ports 1..65535 (e.g. "443" or "80,443")'


@pytest.mark.parametrize("key", ["bind_tcp", "connect_tcp"])
def test_a_bad_port_names_its_key_value_and_own_line(key: str) -> None:
    text = f'network:\n  enabled: true\n  {key}:\n    - 443\n    - "80, https"\n'
    assert refusal(text) == f"network.{key}: {PORTS_WANTED}, got '80, https' (line 5)"


def test_the_highest_port_is_accepted_and_the_next_refused() -> None:
    profile = parse("network:\n  enabled: true\n  connect_tcp: [65535, 1]\n")
    assert profile.network.connect_tcp == (65535, 1)
    assert refusal("network:\n  connect_tcp: [65536]\n") == (
        f"network.connect_tcp: {PORTS_WANTED}, got '65536' (line 2)"
    )


def test_ports_are_read_into_their_own_key() -> None:
    profile = parse("network:\n  enabled: true\n  bind_tcp: [8080]\n  connect_tcp: [443]\n")
    assert (profile.network.bind_tcp, profile.network.connect_tcp) == ((8080,), (443,))


def test_a_network_that_is_not_a_mapping_is_refused_by_name() -> None:
    assert refusal("network: [443]\n") == "network: expected a mapping, got a list (line 1)"


@pytest.mark.parametrize(
    ("word", "level"),
    [('" debug "', LogLevel.DEBUG), ('""', LogLevel.ERROR), ("info", LogLevel.INFO)],
)
def test_landrun_levels_and_an_empty_level_load_silently(word: str, level: LogLevel) -> None:
    profile = parse(f"general:\n  log_level: {word}\n")
    assert profile.general.log_level is level
    assert profile.warnings == ()


@pytest.mark.parametrize(
    ("word", "level"),
    [
        ("DEBUG", LogLevel.DEBUG),
        ("Info", LogLevel.INFO),
        ("Warning", LogLevel.WARN),
        ("trace", LogLevel.TRACE),
        ("NONE", LogLevel.OFF),
    ],
)
def test_other_spellings_load_with_a_warning_word_for_word(word: str, level: LogLevel) -> None:
    profile = parse(f"general:\n  log_level: {word}\n")
    assert profile.general.log_level is level
    assert profile.warnings == (
        f"general.log_level: {word!r} is not a landrun level (error, info, debug); "
        "ollie-core would pass it to landrun as is",
    )


def test_an_unknown_level_is_ignored_with_a_warning_word_for_word() -> None:
    profile = parse("general:\n  log_level: loud\n")
    assert profile.general.log_level is LogLevel.ERROR
    assert profile.warnings == (
        "general.log_level: unknown level 'loud' ignored (landrun knows error, info, debug)",
    )


def test_general_keys_are_read_and_unknown_ones_warned() -> None:
    profile = parse("general:\n  best_effort: true\n  verbose: 1\n")
    assert profile.general.best_effort is True
    assert profile.warnings == ("unknown key 'general.verbose' (ignored)",)
    assert refusal("general:\n  best_effort: maybe\n") == (
        "general.best_effort: expected true or false (or yes/no, on/off, y/n), got 'maybe' (line 2)"
    )
    assert refusal("general: on\n") == "general: expected a mapping, got 'on' (line 1)"


def test_env_entries_after_an_empty_one_are_still_read() -> None:
    profile = parse('env:\n  - PATH\n  - ""\n  - LANG\n  - EDITOR=vi\n  - PATH\n')
    assert profile.env == ("PATH", "LANG")
    assert profile.env_values == (("EDITOR", "vi"),)
    assert profile.warnings == ("env: an empty entry passes nothing (ignored)",)


def test_an_env_value_may_hold_an_equals_sign() -> None:
    profile = parse("env: [OPTS=a=b=c, EMPTY=]\n")
    assert profile.env_values == (("OPTS", "a=b=c"), ("EMPTY", ""))
    assert profile.env == ()


def test_env_refusals_name_the_entry_and_the_line() -> None:
    assert refusal('env:\n  - PATH\n  - "A\\0B"\n') == (
        "env: a NUL byte cannot be in the environment, got 'A\\x00B' (line 2)"
    )
    assert refusal("env:\n  - =1\n") == "env: expected NAME or NAME=VALUE, got '=1' (line 2)"


def test_the_old_add_exec_list_warns_word_for_word_and_keeps_ldd() -> None:
    profile = parse('advanced:\n  ldd: true\n  add_exec: ["/opt/bin/tool", ""]\n')
    assert profile.advanced.exec_paths == ("/opt/bin/tool",)
    assert (profile.advanced.ldd, profile.advanced.add_exec) == (True, False)
    assert profile.warnings == (
        "advanced.add_exec: a list is an old Ollie Tray form that ollie-core's loader "
        "rejects; put these paths under filesystem.rox and write add_exec: false",
    )


def test_an_empty_add_exec_list_says_so() -> None:
    profile = parse("advanced:\n  add_exec: []\n")
    assert profile.advanced.exec_paths == ()
    assert profile.warnings == (
        "advanced.add_exec: a list is an old Ollie Tray form that ollie-core's loader "
        "rejects; put these paths under filesystem.rox and write add_exec: false "
        "(the list is empty)",
    )


def test_advanced_refusals_name_their_key() -> None:
    assert refusal("advanced:\n  add_exec: [[/bin/x]]\n") == (
        "advanced.add_exec: expected a single value, got a list (line 2)"
    )
    assert refusal("advanced:\n  ldd: sure\n  add_exec: [/bin/x]\n") == (
        "advanced.ldd: expected true or false (or yes/no, on/off, y/n), got 'sure' (line 2)"
    )
    assert refusal("advanced:\n  add_exec: sure\n") == (
        "advanced.add_exec: expected true or false (or yes/no, on/off, y/n), got 'sure' (line 2)"
    )
    assert refusal("advanced: [ldd]\n") == "advanced: expected a mapping, got a list (line 1)"


def test_advanced_keys_are_known_and_others_warned() -> None:
    profile = parse("advanced:\n  ldd: yes\n  add_exec: on\n  seccomp: true\n")
    assert (profile.advanced.ldd, profile.advanced.add_exec) == (True, True)
    assert profile.warnings == ("unknown key 'advanced.seccomp' (ignored)",)


def test_network_warnings_word_for_word() -> None:
    loose = parse("network:\n  unrestricted: true\n")
    assert loose.network.mode is NetworkMode.DENY
    assert loose.warnings == (
        "network: unrestricted: true without enabled: true denies all TCP here "
        "(ollie-core would allow all); write enabled: true to allow it",
    )
    denied = parse("network:\n  bind_tcp: [80]\n")
    assert denied.warnings == (
        "network: bind_tcp/connect_tcp are ignored when the network is deny",
    )
    free = parse("network:\n  enabled: true\n  unrestricted: true\n  connect_tcp: [443]\n")
    assert free.warnings == (
        "network: bind_tcp/connect_tcp are ignored when the network is unrestricted",
    )
    quiet = parse("network:\n  enabled: true\n  bind_tcp: [80]\n  mtu: 1\n")
    assert quiet.warnings == ("unknown key 'network.mtu' (ignored)",)
    assert parse("network:\n  enabled: false\n").warnings == ()


def test_network_flags_name_their_key() -> None:
    assert refusal("network:\n  unrestricted: 2\n") == (
        "network.unrestricted: expected true or false (or yes/no, on/off, y/n), got '2' (line 2)"
    )


def test_an_empty_path_is_warned_per_section_and_dropped() -> None:
    profile = parse('filesystem:\n  rw: ["", /srv]\n  rwx: [""]\n')
    assert (profile.filesystem.rw, profile.filesystem.rwx) == (("/srv",), ())
    assert profile.warnings == (
        "filesystem.rw: an empty path allows nothing (ignored)",
        "filesystem.rwx: an empty path allows nothing (ignored)",
    )


def test_top_level_refusals_and_warnings() -> None:
    assert refusal("filesystem: /etc\n") == "filesystem: expected a mapping, got '/etc' (line 1)"
    assert refusal("- a\n") == "profile: expected a mapping, got a list (line 1)"
    assert parse("filesystem: {ro: [/etc]}\nextra: 1\n").warnings == (
        "unknown key 'profile.extra' (ignored)",
    )


def test_the_profile_carries_its_name_and_source() -> None:
    profile = parse_profile_text("", name="strict", source="/x/strict.yaml")
    assert (profile.name, profile.source) == ("strict", "/x/strict.yaml")


def test_a_yaml_error_names_the_line_column_and_problem() -> None:
    assert refusal("env: [PATH\n") == (
        "invalid YAML: line 2, column 1: expected ',' or ']', but got '<stream end>'"
    )
    assert refusal("a: 1\n\tb: 2\n") == (
        "invalid YAML: line 2, column 1: found character '\\t' that cannot start any token"
    )


def test_a_yaml_error_without_a_position_is_reported_whole() -> None:
    # The reader refuses control characters with an error that has no mark or problem.
    assert refusal("env: [A\x07]\n") == (
        "invalid YAML: unacceptable character #x0007: special characters are not allowed\n"
        '  in "<unicode string>", position 7'
    )
