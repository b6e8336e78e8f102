"""The sandbox really restricts a real child process.

The integration suite proves Landlock in depth; this small copy runs with the
unit tests, so a mutation of ``registry_core/sandbox`` that stops enforcing
(``make mutate`` runs only the unit tests) is noticed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry_core.sandbox import abi_version, effective_rules, parse_profile, prepare

SYSTEM = [p for p in ("/usr", "/bin", "/lib", "/lib64") if os.path.exists(p)]


@pytest.fixture(autouse=True)
def _needs_landlock() -> None:
    if abi_version() < 1:
        if os.environ.get("CI") == "true":
            pytest.fail("this kernel offers no Landlock, but CI must test it for real")
        pytest.skip("this kernel offers no Landlock")


def _sh(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    rw = tmp_path / "rw"
    profile = parse_profile(
        {"filesystem": {"rox": SYSTEM, "ro": ["/etc"], "rw": [str(rw)]}},
        name="unit",
        source=str(tmp_path / "unit.yaml"),
    )
    with prepare(effective_rules(profile, {"HOME": str(tmp_path)}, str(tmp_path))) as sandbox:
        assert sandbox.enforcing
        return subprocess.run(
            ["/bin/sh", "-c", script, "sh", *args],
            preexec_fn=sandbox.preexec,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def test_writes_land_only_in_rw(tmp_path: Path) -> None:
    (tmp_path / "rw").mkdir()
    (tmp_path / "outside").mkdir()
    inside, outside = tmp_path / "rw" / "ok.txt", tmp_path / "outside" / "no.txt"
    done = _sh(tmp_path, 'echo a > "$1"; echo b > "$2"', str(inside), str(outside))
    assert inside.read_text() == "a\n"
    assert not outside.exists()
    assert "Permission denied" in done.stderr


def test_reads_outside_the_profile_are_refused(tmp_path: Path) -> None:
    (tmp_path / "rw").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret\n")
    done = _sh(tmp_path, 'cat "$1"', str(secret))
    assert done.returncode != 0
    assert "s3cret" not in done.stdout


def test_programs_outside_rox_do_not_run(tmp_path: Path) -> None:
    (tmp_path / "rw").mkdir()
    program = tmp_path / "rw" / "prog"
    program.write_text("#!/bin/sh\necho ran\n")
    program.chmod(0o755)
    done = _sh(tmp_path, '"$1"', str(program))
    assert "ran" not in done.stdout
    assert done.returncode != 0
    assert sys.executable  # the test process itself stays unrestricted
    assert os.access(program, os.X_OK)
