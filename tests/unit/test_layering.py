"""Layering rule 1 (docs/architecture.md): ``registry_core`` never imports Qt, D-Bus or keyring.

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


# --- The import directions of docs/architecture.md, read statically -------------

import ast  # noqa: E402

PACKAGES = ("registry_core", "ollie_tray")
FOUNDATION = {
    "errors", "paths", "version", "logsetup", "secure", "safe_open", "file_lock", "trusted",
    "pinned", "__init__",
}  # fmt: skip
# registry_core's packages, bottom up: a package may import its own layer's
# left neighbours and anything lower, never higher.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("foundation",),
    ("registry", "egress", "sandbox"),
    ("broker",),
    ("dispatch",),
    ("hook", "mcp", "remote", "wiring"),
    ("cli",),
)
# The broker's stages along a request's path, bottom up (docs/architecture.md).
STAGES = ("wire", "peer", "question", "remember", "record", "ask", "decide", "serve", "headless")


def _unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "ollie_tray":
        return "ollie_tray"
    if len(parts) < 2 or parts[1] in FOUNDATION:
        return "foundation"
    return parts[1]


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["registry_core", "broker"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in STAGES else None


def _imports() -> list[tuple[str, str]]:
    """(importing module, imported module) for every import between our modules."""
    found: list[tuple[str, str]] = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                for name in names:
                    if name.split(".")[0] in PACKAGES:
                        found.append((module, name))
    return found


def _rank(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def _violations(imports: list[tuple[str, str]]) -> list[str]:
    wrong: list[str] = []
    for source, target in imports:
        if target.split(".")[0] == "ollie_tray" and source.split(".")[0] == "registry_core":
            wrong.append(f"{source} -> {target}: registry_core never imports ollie_tray")
            continue
        src, dst = _unit(source), _unit(target)
        if src == "ollie_tray" or src == dst:
            s_stage, d_stage = _stage(source), _stage(target)
            if s_stage and d_stage and STAGES.index(d_stage) > STAGES.index(s_stage):
                wrong.append(f"{source} -> {target}: broker/{s_stage} is below {d_stage}")
            continue
        if dst == "ollie_tray":
            continue
        if _rank(dst) > _rank(src) or (_rank(dst) == _rank(src) and dst != src):
            layer = LAYERS[_rank(src)]
            if _rank(dst) == _rank(src) and layer.index(dst) < layer.index(src):
                continue  # a left neighbour on the same layer
            wrong.append(f"{source} -> {target}: {src} is below {dst}")
    return wrong


def test_imports_follow_the_layers_of_docs_architecture() -> None:
    imports = _imports()
    assert len(imports) > 500  # the walk really read the code
    assert _violations(imports) == []


def test_no_library_module_imports_a_program() -> None:
    wrong = [
        f"{source} -> {target}"
        for source, target in _imports()
        if _unit(target) == "cli" and _unit(source) not in ("cli", "ollie_tray")
    ]
    assert wrong == []


def test_the_layer_check_notices_an_import_upwards() -> None:
    assert _violations([("registry_core.broker.wire.codec", "registry_core.broker.decide.core")])
    assert _violations([("registry_core.sandbox.rules", "registry_core.dispatch.dispatcher")])
    assert _violations([("registry_core.paths", "ollie_tray.app")])
    assert not _violations([("registry_core.broker.decide.core", "registry_core.broker.wire")])
    assert not _violations([("ollie_tray.app", "registry_core.cli.argparser")])
