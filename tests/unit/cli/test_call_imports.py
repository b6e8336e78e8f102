"""What an agent's ``ollie-tools call`` imports.

A whole process runs ``ollie-tools call`` on a tool that leaves a file in its
private ``/tmp`` and reports every module it loaded.  Modules only other
commands need -- argparse (the plain call has its own parser), shutil and
tempfile (their archive and random modules), dataclasses (and the inspect
module it pulls in; the call path's records are named tuples), YAML (the
profile's parse is remembered), jsonschema (the fast validator decides the
common schemas), the sandbox description, the scan cache, sockets, asyncio,
Qt -- must not be among them: each costs milliseconds on every call, and the
call's budget (``bench/cli.py``: 3x ``python -I`` + ``bwrap``) has no room.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from registry_core.sandbox.contain import find_bwrap

NEVER_ON_THE_CALL_PATH = (
    "argparse",
    "dataclasses",
    "inspect",
    "shutil",
    "tempfile",
    "yaml",
    "jsonschema",
    "socket",
    "asyncio",
    "PySide6",
    "registry_core.sandbox.describe",
    "registry_core.sandbox.profile_parse",
    "registry_core.registry.serialize",
    "registry_core.cli.render",
)

_PROBE = textwrap.dedent(
    """
    import atexit, json, sys
    atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
    from registry_core.cli.tools import main
    sys.exit(main(sys.argv[1:]))
    """
)

pytestmark = pytest.mark.skipif(
    find_bwrap(os.environ) is None, reason="needs bubblewrap (a sandboxed call)"
)


def _call(tmp_path: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "litter.meta").write_text(json.dumps({"description": "Leaves a file in /tmp."}))
    exe = tools / "litter"
    exe.write_text("#!/bin/sh\nmkdir -p /tmp/d && echo x > /tmp/d/f && echo ok\n")
    exe.chmod(0o755)
    for sub in ("home", "config", "runtime", "tmp", "work", "cache"):
        (tmp_path / sub).mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "OLLIE_TOOLS_PATH": str(tools),
        "OLLIE_ELEVATE_SOCKET": str(tmp_path / "runtime" / "none" / "elevate.sock"),
    }
    # Twice: the first call installs the default profile and remembers its parse.
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path / "work",
            timeout=120,
        )
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    return done, modules


def test_a_sandboxed_call_imports_only_what_it_needs(tmp_path: Path) -> None:
    done, modules = _call(tmp_path, "call", "litter", "--timeout", "30")
    assert done.stdout == "ok\n", done.stderr
    assert "registry_core.sandbox.contain" in modules  # it really ran in the sandbox
    assert sorted(modules.intersection(NEVER_ON_THE_CALL_PATH)) == []
    base = tmp_path / "runtime" / "ollie-tmp"
    assert base.is_dir() and list(base.iterdir()) == []  # the litter went too


def test_the_probe_sees_argparse_when_the_call_needs_it(tmp_path: Path) -> None:
    # An abbreviated option is argparse's to resolve: the probe must notice it.
    done, modules = _call(tmp_path, "call", "litter", "--tim", "30")
    assert done.stdout == "ok\n", done.stderr
    assert "argparse" in modules
