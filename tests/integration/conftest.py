"""Fixtures shared by the real-stack integration tests."""

from __future__ import annotations

import os

import pytest

from registry_core.sandbox import abi_version


@pytest.fixture
def landlock_abi() -> int:
    """The kernel's Landlock ABI; skips without Landlock (a failure under ``CI=true``)."""
    abi = abi_version()
    if abi < 1:
        if os.environ.get("CI") == "true":
            pytest.fail("this kernel offers no Landlock, but CI must test it for real")
        pytest.skip("this kernel offers no Landlock")
    return abi
