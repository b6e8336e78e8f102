"""Fixtures shared by the elevation unit tests (the broker core's, the policy store's,
the broker server's and client's)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_helpers import Setup, write_tool
from policy_helpers import FakeClock

from registry_core.broker.remember.policies import PolicyStore


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    write_tool(directory, "greet", {"description": "Say hello."})
    write_tool(directory, "other", {"description": "Another tool."})
    write_tool(directory, "rooty", {"description": "Needs root.", "sudo": True})
    write_tool(
        directory,
        "hidden",
        {"description": "Never here.", "variants": [{"match": {"env": "OLLIE_NOT_SET_EVER"}}]},
    )
    return directory


@pytest.fixture
def base() -> Iterator[Path]:
    """A short directory (a socket path holds at most 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="sock-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


@pytest.fixture
def setup(tmp_path: Path, tools: Path) -> Setup:
    return Setup(tmp_path, tools)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "ollie" / "policies.yaml"


@pytest.fixture
def store(path: Path, clock: FakeClock) -> PolicyStore:
    return PolicyStore(path, clock=clock)
