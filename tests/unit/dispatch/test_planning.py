"""readOnly and tier as the runtime sees them: parallel_safe and plan_batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.dispatch import parallel_safe, plan_batches
from registry_core.errors import ToolNotFoundError, ToolUnavailableError
from registry_core.registry import Registry, RegistryLoader, Tier


def make_registry(tmp_path: Path, tools: dict[str, dict[str, Any]]) -> Registry:
    directory = tmp_path / "tools"
    directory.mkdir()
    for name, meta in tools.items():
        (directory / f"{name}.meta").write_text(json.dumps({"description": name, **meta}))
        exe = directory / name
        exe.write_text("#!/bin/sh\ncat\n")
        exe.chmod(0o755)
    return RegistryLoader([directory], {"PATH": "/usr/bin:/bin"}).load()


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return make_registry(
        tmp_path,
        {
            "read_a": {"readOnly": True, "tier": "warm"},
            "read_b": {"readOnly": True},
            "write": {"readOnly": False, "tier": "cold"},
            "default": {},
            "variant_read": {
                "readOnly": False,
                "variants": [{"match": {"os": "linux"}, "readOnly": True, "tier": "cold"}],
            },
            "hidden": {"readOnly": True, "variants": [{"match": {"os": "plan9"}}]},
        },
    )


def test_read_only_and_tier_are_exposed(registry: Registry) -> None:
    assert registry.get("read_a").read_only is True
    assert registry.get("read_a").tier is Tier.WARM
    assert registry.get("write").tier is Tier.COLD
    # Defaults from the spec: tier hot, readOnly false.
    assert registry.get("default").read_only is False
    assert registry.get("default").tier is Tier.HOT
    # A variant overrides the top level.
    assert registry.get("variant_read").read_only is True
    assert registry.get("variant_read").tier is Tier.COLD


def test_parallel_safe_only_when_every_call_is_read_only(registry: Registry) -> None:
    assert parallel_safe(registry, ["read_a", "read_b", "variant_read"])
    assert parallel_safe(registry, ["read_a", "read_a"])
    assert parallel_safe(registry, [])
    assert not parallel_safe(registry, ["read_a", "write"])
    assert not parallel_safe(registry, ["default"])


@pytest.mark.parametrize(
    ("names", "batches"),
    [
        ([], []),
        (["read_a"], [[0]]),
        (["write"], [[0]]),
        (["read_a", "read_b", "variant_read"], [[0, 1, 2]]),
        (["write", "write"], [[0], [1]]),
        (["read_a", "read_b", "write", "read_a", "read_b"], [[0, 1], [2], [3, 4]]),
        (["write", "read_a", "read_b"], [[0], [1, 2]]),
        (["read_a", "write", "read_b", "default", "read_a"], [[0], [1], [2], [3], [4]]),
        (["read_a", "read_a", "read_a", "default"], [[0, 1, 2], [3]]),
    ],
)
def test_plan_batches_groups_consecutive_read_only_calls(
    registry: Registry, names: list[str], batches: list[list[int]]
) -> None:
    assert plan_batches(registry, names) == batches


def test_plan_batches_keeps_every_call_once_in_order(registry: Registry) -> None:
    names = ["write", "read_a", "read_b", "write", "default", "read_b", "read_a"]
    flat = [index for batch in plan_batches(registry, names) for index in batch]
    assert flat == list(range(len(names)))


def test_unknown_and_hidden_tools_are_errors(registry: Registry) -> None:
    with pytest.raises(ToolNotFoundError):
        parallel_safe(registry, ["read_a", "ghost"])
    with pytest.raises(ToolNotFoundError):
        plan_batches(registry, ["ghost"])
    with pytest.raises(ToolUnavailableError):
        plan_batches(registry, ["read_a", "hidden"])
