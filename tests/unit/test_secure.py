"""Process hardening for anything that holds a password (askpass, the tray, ollie-broker)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import resource
from registry_core.secure import harden_process, is_dumpable
assert is_dumpable()
assert harden_process()
assert not is_dumpable()
assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)
print("hardened")
"""


def test_harden_process_makes_the_process_non_dumpable_without_core_files() -> None:
    # In a child: the test runner itself must stay dumpable for debugging.
    result = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hardened"
