"""The elevation gate and askpass program a command-line call uses."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from registry_core.dispatch import ElevationGate
from registry_core.elevation.gates import LazyGate


def make_gate(env: Mapping[str, str]) -> ElevationGate:
    """Nothing is contacted until a call needs elevation."""
    return LazyGate(env)


def askpass_program() -> str | None:
    """``ollie-askpass`` next to this interpreter (a venv's bin), else on PATH."""
    sibling = Path(sys.executable).parent / "ollie-askpass"
    if sibling.is_file():
        return str(sibling)
    return shutil.which("ollie-askpass")
