"""Rules written by hand (``policy_build``): the name checks and every refusal word for
word, an allow bound to the executable and sha256 read now with its expiry, and a deny
for one kind or both.  A real registry over a temporary tools directory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, file_sha256
from registry_core.broker.remember.policy_build import (
    UnknownToolError,
    allow_policy,
    check_known,
    deny_policies,
)
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError, ToolUnavailableError
from registry_core.registry import Registry, RegistryLoader

META = {"description": "d", "args": {"type": "object"}}


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    tools = tmp_path / "tools"
    tools.mkdir()
    extras: list[tuple[str, dict[str, Any]]] = [
        ("greet", {}),
        ("rootly", {"sudo": True}),
        ("nowhere", {"variants": [{"match": {"os": "plan9"}}]}),
    ]
    for name, extra in extras:
        (tools / f"{name}.meta").write_text(json.dumps({**META, **extra}))
        script = tools / name
        script.write_text(f"#!/bin/sh\necho {name}\n")
        script.chmod(0o755)
    (tools / "noexe.meta").write_text(json.dumps(META))
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path)}
    return RegistryLoader([tools], env, cache_dir=None).load()


def refused(error: type[Exception], message: str) -> pytest.RaisesExc[Exception]:
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def test_known_names_pass_in_any_state(registry: Registry) -> None:
    check_known(registry, "greet", "the registry")
    check_known(registry, "nowhere", "the registry")  # known, though not usable here


def test_unknown_and_invalid_names_are_refused_word_for_word(registry: Registry) -> None:
    with refused(
        UnknownToolError,
        "no tool named 'gone' in /tools (add --force to remember a rule for it anyway)",
    ) as caught:
        check_known(registry, "gone", "/tools")
    assert isinstance(caught.value, UnknownToolError) and isinstance(caught.value, PolicyError)
    assert caught.value.name == "gone"
    for bad in (".hidden", "a b", "", "x/y"):
        with refused(
            PolicyError, f"{bad!r} is not a valid tool name ([A-Za-z0-9_.-], no leading '.')"
        ):
            check_known(registry, bad, "/tools")


def test_an_allow_is_bound_to_the_executable_as_it_is_now(
    registry: Registry, tmp_path: Path
) -> None:
    exe = tmp_path / "tools" / "greet"
    policy = allow_policy(
        registry, "greet", kind=None, host="box", remember=Remember.HOUR, now=1000.0
    )
    assert policy == Policy(
        tool="greet",
        kind=Kind.SANDBOX,
        host="box",
        decision=Decision.ALLOW,
        remember=Remember.HOUR,
        created=1000.0,
        expires=4600.0,
        executable=str(exe),
        sha256=file_sha256(exe),
    )
    assert policy.sha256 is not None and len(policy.sha256) == 64


@pytest.mark.parametrize(
    ("name", "kind", "remember", "want_kind", "expires"),
    [
        ("rootly", None, Remember.MINUTES_15, Kind.SUDO, 1900.0),
        ("rootly", Kind.SANDBOX, Remember.ALWAYS, Kind.SANDBOX, None),
        ("greet", Kind.SUDO, Remember.ALWAYS, Kind.SUDO, None),
    ],
)
def test_an_allows_kind_and_expiry(
    registry: Registry,
    name: str,
    kind: Kind | None,
    remember: Remember,
    want_kind: Kind,
    expires: float | None,
) -> None:
    policy = allow_policy(registry, name, kind=kind, host="h", remember=remember, now=1000.0)
    assert (policy.kind, policy.remember, policy.expires) == (want_kind, remember, expires)


@pytest.mark.parametrize("remember", [Remember.ONCE, Remember.SESSION, Remember.DENY_ALWAYS])
def test_an_allow_by_hand_lasts_a_while_or_always(registry: Registry, remember: Remember) -> None:
    with refused(PolicyError, f"an allow by hand lasts 15m, 1h or always, not {remember.value!r}"):
        allow_policy(registry, "greet", kind=None, host="h", remember=remember, now=0.0)


def test_an_allow_needs_a_usable_tool_with_a_readable_executable(
    registry: Registry, tmp_path: Path
) -> None:
    with pytest.raises(ToolUnavailableError):
        allow_policy(registry, "nowhere", kind=None, host="h", remember=Remember.ALWAYS, now=0.0)
    noexe = registry.get("noexe")
    with refused(PolicyError, f"tool 'noexe' has no executable ({noexe.resolution_detail})"):
        allow_policy(registry, "noexe", kind=None, host="h", remember=Remember.ALWAYS, now=0.0)
    exe = tmp_path / "tools" / "greet"
    os.unlink(exe)  # gone since the registry was read
    with refused(PolicyError, f"cannot read {exe} to bind the allow to its sha256"):
        allow_policy(registry, "greet", kind=None, host="h", remember=Remember.ALWAYS, now=0.0)


def test_a_deny_covers_one_kind_or_both_and_any_executable() -> None:
    def deny(kind: Kind) -> Policy:
        return Policy(
            tool="anything",
            kind=kind,
            host="box",
            decision=Decision.DENY,
            remember=Remember.DENY_ALWAYS,
            created=5.0,
        )

    assert deny_policies("anything", kind=Kind.SUDO, host="box", now=5.0) == [deny(Kind.SUDO)]
    assert deny_policies("anything", kind=None, host="box", now=5.0) == [
        deny(Kind.SANDBOX),
        deny(Kind.SUDO),
    ]
    assert deny(Kind.SUDO).executable is None and deny(Kind.SUDO).expires is None
