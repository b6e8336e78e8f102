"""Layering rule 1 (DESIGN.md §2): ``registry_core`` never imports Qt, D-Bus or keyring.

Every module of the package is imported in a fresh interpreter, so nothing
the test runner (pytest-qt, ...) already loaded can hide a violation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("PySide6", "shiboken6", "qasync", "dbus_fast", "dbus_next", "keyring")
REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import importlib, json, pkgutil, sys
import registry_core
names = ["registry_core"]
for info in pkgutil.walk_packages(registry_core.__path__, "registry_core."):
    names.append(info.name)
for name in names:
    importlib.import_module(name)
forbidden = %r
loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps({"modules": names, "forbidden": loaded}))
"""


def _probe(extra: str = "") -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", extra + _PROBE % (FORBIDDEN,)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, list[str]] = json.loads(result.stdout.splitlines()[-1])
    return data


def test_registry_core_imports_no_gui_dbus_or_keyring_module() -> None:
    data = _probe()
    assert data["forbidden"] == []
    # The walk really covered the package (guards against an empty walk passing trivially).
    assert "registry_core.registry.loader" in data["modules"]
    assert "registry_core.cli.tools" in data["modules"]


def test_the_probe_notices_a_forbidden_import() -> None:
    # Simulate a violation: a stand-in "keyring" module imported alongside registry_core.
    extra = "import sys, types\nsys.modules['keyring'] = types.ModuleType('keyring')\n"
    assert _probe(extra)["forbidden"] == ["keyring"]
