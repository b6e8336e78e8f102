"""Fixtures shared by the dispatcher's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch_helpers import Stack


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    return Stack(tmp_path)
