"""Golden cases: each profile means here what it means in ollie-core.

``ollie_core_golden.json`` holds profiles and, for each, what ollie-core did
with it: the error of its loader, or the landrun arguments its wrapper built
(recorded by running ollie-core's own ``LoadSandbox`` and ``WrapCommand``,
built from its source, on these files with the case's environment, in
``$ROOT/cwd``, with the directory tree ``root_dirs`` under ``$ROOT``).  Here
both sides are reduced to what the sandbox enforces -- paths with their
access, the network, the environment, log level and flags -- and compared.

A case with a ``difference`` is one of the deliberate differences listed in
docs/ollie-core.md; for it the test checks our documented behaviour instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from registry_core.errors import ProfileError
from registry_core.sandbox.apply import sandbox_env
from registry_core.sandbox.profiles import NetworkMode, parse_profile_text
from registry_core.sandbox.rules import EffectiveRules, effective_rules

GOLDEN = json.loads((Path(__file__).parent / "ollie_core_golden.json").read_text())
CASES: list[dict[str, Any]] = GOLDEN["cases"]
_FLAGS = ("--ldd", "--add-exec", "--best-effort")
_LANDRUN_DEFAULT_LEVEL = "error"


@dataclass(frozen=True)
class Enforced:
    """What a sandbox enforces, in terms both runtimes share."""

    paths: frozenset[tuple[str, str]]
    network: tuple[str, frozenset[int], frozenset[int]]
    env: Mapping[str, str]
    log_level: str
    flags: frozenset[str]


def _landrun_ports(values: list[str]) -> frozenset[int]:
    # landrun's slice flags split at commas and trim blanks.
    return frozenset(int(part.strip()) for value in values for part in value.split(","))


def _landrun_env(entries: list[str], env: Mapping[str, str]) -> dict[str, str]:
    # landrun: NAME passes the current value when the variable exists; NAME=VALUE sets it.
    out: dict[str, str] = {}
    for entry in entries:
        if "=" in entry:
            name, _, value = entry.partition("=")
            out[name] = value
        elif entry in env:
            out[entry] = env[entry]
    return out


def _pairs(args: list[str]) -> Iterator[tuple[str, str | None]]:
    index = 0
    while index < len(args):
        flag = args[index]
        if flag in (*_FLAGS, "--unrestricted-network"):
            yield flag, None
            index += 1
        else:
            yield flag, args[index + 1]
            index += 2


def from_ollie_core(args: list[str], env: Mapping[str, str], cwd: str) -> Enforced:
    paths: set[tuple[str, str]] = set()
    ports: dict[str, list[str]] = {"--bind-tcp": [], "--connect-tcp": []}
    env_entries: list[str] = []
    flags: set[str] = set()
    level = _LANDRUN_DEFAULT_LEVEL
    unrestricted = False
    for flag, value in _pairs(args):
        if value is None:
            if flag == "--unrestricted-network":
                unrestricted = True
            else:
                flags.add(flag)
        elif flag in ("--ro", "--rox", "--rw", "--rwx"):
            # landrun runs in the call's directory: a relative path is relative to it.
            paths.add((flag[2:], os.path.normpath(os.path.join(cwd, value))))
        elif flag in ports:
            ports[flag].append(value)
        elif flag == "--env":
            env_entries.append(value)
        elif flag == "--log-level":
            level = value
        else:
            raise AssertionError(f"unexpected landrun flag {flag}")
    network = (
        ("unrestricted", frozenset(), frozenset())
        if unrestricted
        else (
            "tcp",
            _landrun_ports(ports["--bind-tcp"]),
            _landrun_ports(ports["--connect-tcp"]),
        )
    )
    return Enforced(
        frozenset(paths),
        network,
        _landrun_env(env_entries, env),
        level,
        frozenset(flags),
    )


def from_ours(rules: EffectiveRules, env: Mapping[str, str]) -> Enforced:
    # ollie-core leaves out paths that do not exist; so do we (when applying).
    paths = frozenset((r.access.value, r.path) for r in rules.paths if os.path.exists(r.path))
    policy = rules.network
    network = (
        ("unrestricted", frozenset[int](), frozenset[int]())
        if policy.mode is NetworkMode.UNRESTRICTED
        else ("tcp", frozenset(policy.bind_tcp), frozenset(policy.connect_tcp))
    )
    # getattr: the suite also runs against versions that predate these fields.
    flags = {
        flag
        for flag, on in (
            ("--ldd", getattr(rules, "ldd", False)),
            ("--add-exec", getattr(rules, "add_exec", False)),
            ("--best-effort", rules.best_effort),
        )
        if on
    }
    return Enforced(
        paths,
        network,
        sandbox_env(rules, env, always=()),
        rules.log_level.value,
        frozenset(flags),
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for directory in GOLDEN["root_dirs"]:
        (tmp_path / directory).mkdir(parents=True)
    return tmp_path


def _case_env(case: dict[str, Any], root: Path) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": f"{root}/home", "TMPDIR": f"{root}/tmp"}
    env.update({k: v.replace("$ROOT", str(root)) for k, v in case["env"].items()})
    return env


def _ours(case: dict[str, Any], root: Path) -> tuple[EffectiveRules, dict[str, str], str]:
    env = _case_env(case, root)
    cwd = str(root / "cwd")
    profile = parse_profile_text(case["profile"], name="golden", source="golden.yaml")
    return effective_rules(profile, env, cwd), env, cwd


@pytest.mark.parametrize("case", [c for c in CASES if not c["difference"]], ids=lambda c: c["name"])
def test_the_profile_means_what_it_means_in_ollie_core(case: dict[str, Any], root: Path) -> None:
    core = case["ollie_core"]
    if "error" in core:
        with pytest.raises(ProfileError):
            _ours(case, root)
        return
    rules, env, cwd = _ours(case, root)
    args = [a.replace("$ROOT", str(root)) for a in core["landrun_args"]]
    assert from_ours(rules, env) == from_ollie_core(args, env, cwd)


def _case(name: str) -> dict[str, Any]:
    return next(c for c in CASES if c["name"] == name)


def _expected_except(case: dict[str, Any], root: Path, **changes: Any) -> tuple[Enforced, Enforced]:
    rules, env, cwd = _ours(case, root)
    args = [a.replace("$ROOT", str(root)) for a in case["ollie_core"]["landrun_args"]]
    theirs = from_ollie_core(args, env, cwd)
    return from_ours(rules, env), Enforced(**{**theirs.__dict__, **changes})


@pytest.mark.parametrize(
    "name", ["network_unrestricted_without_enabled", "network_disabled_but_unrestricted"]
)
def test_unrestricted_without_enabled_denies_here_and_warns(name: str, root: Path) -> None:
    case = _case(name)
    assert case["difference"] == "unrestricted_needs_enabled"
    ours, expected = _expected_except(
        case, root, network=("tcp", frozenset[int](), frozenset[int]())
    )
    assert ours == expected
    rules, _env, _cwd = _ours(case, root)
    assert rules.network.mode is NetworkMode.DENY
    assert any("ollie-core would allow all" in w for w in rules.warnings)


def test_the_old_add_exec_list_still_loads_with_a_warning(root: Path) -> None:
    case = _case("add_exec_list_old_form")
    assert "error" in case["ollie_core"]  # ollie-core's loader refuses it
    rules, _env, _cwd = _ours(case, root)
    assert not rules.add_exec
    assert any("advanced.add_exec: a list" in w for w in rules.warnings)


def test_a_port_landrun_cannot_parse_is_refused_when_the_profile_loads(root: Path) -> None:
    case = _case("bad_port_word")
    # ollie-core loads it and landrun fails when the command runs; we refuse at load.
    assert case["ollie_core"]["landrun_args"] == ["--connect-tcp", "http"]
    with pytest.raises(ProfileError, match=r"network\.connect_tcp: .*'http'"):
        _ours(case, root)


def test_a_colon_list_variable_expands_to_every_entry(root: Path) -> None:
    case = _case("colon_list_variable")
    # ollie-core takes "a:b" as one path, which does not exist: nothing allowed.
    assert case["ollie_core"]["landrun_args"] == []
    tools = frozenset({("rox", f"{root}/tools1"), ("rox", f"{root}/tools2")})
    ours, expected = _expected_except(case, root, paths=tools)
    assert ours == expected


def test_every_golden_case_is_checked() -> None:
    differences = {c["difference"] for c in CASES if c["difference"]}
    assert differences == {
        "unrestricted_needs_enabled",
        "add_exec_list",
        "port_checked_at_load",
        "list_variables_split",
    }


def test_the_shipped_default_profile_is_the_one_ollie_core_loaded() -> None:
    """The profile we install is one ollie-core's loader accepted (see docs/ollie-core.md).

    Editing it means loading it with ollie-core's ``LoadSandbox`` again and
    recording the new digest here.
    """
    repo = Path(__file__).resolve().parents[3]
    for name, digest in GOLDEN["loaded_by_ollie_core"].items():
        data = (repo / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name} changed: re-check it"
        # And nothing in it is one of our extensions that ollie-core refuses.
        assert parse_profile_text(data.decode(), name="d", source=name).warnings == ()
