"""The ``limits:`` profile section (registry_core.sandbox.limits and its parse)."""

from __future__ import annotations

import os

import pytest

from registry_core.errors import ProfileError
from registry_core.sandbox import limits as lim
from registry_core.sandbox.profiles import parse_profile_text
from registry_core.sandbox.rules import effective_rules


def _parse(text: str) -> lim.LimitsSection:
    return parse_profile_text(text, name="t", source="/p/t.yaml").limits


def test_without_a_limits_section_every_default_applies() -> None:
    section = _parse("filesystem: {ro: [/usr]}\n")
    assert section == lim.LimitsSection(None, None, None)
    limits = lim.call_limits(section, 60.0)
    assert limits == lim.CallLimits(256, 4 * 1024**3, 60 * (os.cpu_count() or 1))


def test_the_cpu_default_follows_the_call_timeout() -> None:
    cpus = os.cpu_count() or 1
    assert lim.call_limits(lim.LimitsSection(), 2.5).cpu == 3 * cpus
    assert lim.call_limits(lim.LimitsSection(), 0).cpu == 1
    assert lim.call_limits(lim.LimitsSection(), 1e12).cpu == lim.MAX_CPU_SECONDS


def test_human_sizes_and_durations() -> None:
    section = _parse("limits:\n  tasks: 64\n  memory: 512M\n  cpu: 5m\n")
    assert section == lim.LimitsSection(64, 512 * 1024**2, 300)
    assert _parse("limits: {memory: 2GiB, cpu: 90s}\n").memory == 2 * 1024**3
    assert _parse("limits: {memory: 1048576, cpu: 1h}\n").cpu == 3600
    assert _parse("limits: {memory: 3t}\n").memory == 3 * 1024**4
    assert lim.parse_size("64 KB") == 64 * 1024
    assert lim.parse_size("64KiB") == 64 * 1024
    assert lim.parse_size("1.5G") is None
    assert lim.parse_duration("10") == 10
    assert lim.parse_duration("-1") is None


def test_a_set_limit_overrides_only_its_own_default() -> None:
    limits = lim.call_limits(_parse("limits: {tasks: 8}\n"), 60.0)
    assert (limits.tasks, limits.memory) == (8, lim.DEFAULT_MEMORY)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("limits:\n  tasks: 0\n", "limits.tasks", "'0'"),
        ("limits:\n  tasks: lots\n", "limits.tasks", "'lots'"),
        ("limits:\n  tasks: -5\n", "limits.tasks", "'-5'"),
        ("limits:\n  tasks: 99999999\n", "limits.tasks", "'99999999'"),
        ("limits:\n  memory: 2X\n", "limits.memory", "'2X'"),
        ("limits:\n  memory: 100K\n", "limits.memory", "'100K'"),
        ("limits:\n  memory: 1.5G\n", "limits.memory", "'1.5G'"),
        ("limits:\n  cpu: 0\n", "limits.cpu", "'0'"),
        ("limits:\n  cpu: 10d\n", "limits.cpu", "'10d'"),
        ("limits:\n  cpu: [1]\n", "limits.cpu", "a list"),
    ],
)
def test_a_bad_value_is_refused_naming_key_value_and_line(text: str, key: str, value: str) -> None:
    with pytest.raises(ProfileError) as caught:
        _parse("filesystem: {ro: [/usr]}\n" + text)
    message = str(caught.value)
    assert message.startswith("/p/t.yaml: ")
    assert key in message and value in message and "(line 3)" in message


def test_limits_that_are_not_a_mapping_are_refused() -> None:
    with pytest.raises(ProfileError, match="limits"):
        _parse("limits: [1, 2]\n")


def test_an_unknown_limits_key_is_a_warning_as_elsewhere() -> None:
    profile = parse_profile_text("limits: {files: 10}\n", name="t", source="s")
    assert "unknown key 'limits.files' (ignored)" in profile.warnings
    assert "unknown key 'limits' (ignored)" not in " ".join(profile.warnings)


def test_the_rules_of_a_call_carry_the_profiles_limits() -> None:
    profile = parse_profile_text("limits: {tasks: 9}\n", name="t", source="s")
    assert effective_rules(profile, {"HOME": "/h"}, "/w").limits.tasks == 9


def test_exec_step_options_name_every_bound() -> None:
    assert lim.CallLimits(3, 4096, 5).exec_step_options() == "nproc=3,data=4096,cpu=5"


def test_only_sigxcpu_is_reported_as_the_cpu_limit() -> None:
    limits = lim.CallLimits(1, lim.MIN_MEMORY, 7)
    assert lim.stopped_by_limit(152, limits) == (
        "stopped by the CPU time limit (limits.cpu: 7 s per process)"
    )
    assert lim.stopped_by_limit(-24, limits) is not None
    for other in (0, 1, 137, -9, 24):
        assert lim.stopped_by_limit(other, limits) is None


def test_format_size() -> None:
    assert [lim.format_size(n) for n in (4 * 1024**3, 512 * 1024**2, 3 * 1024, 1000)] == [
        "4G",
        "512M",
        "3K",
        "1000",
    ]
