"""``ollie-tools check``: lint ``.meta`` files the way a tool author's CI would."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from registry_core.registry.loader import RegistryLoader


def _meta_files(targets: Iterable[Path]) -> Iterator[tuple[Path, Path | None]]:
    """(path, directory) for each target: a ``.meta`` file or a directory of them."""
    for target in targets:
        if target.is_dir():
            for name in sorted(os.listdir(target)):
                if name.endswith(".meta"):
                    yield target / name, target
        else:
            yield target, None


def run_check(targets: Iterable[Path], out: TextIO) -> int:
    """Print ``path:line:col: severity: message`` per problem; 0 only without errors."""
    errors = warnings = files = 0
    for path, _directory in _meta_files(targets):
        files += 1
        if not path.name.endswith(".meta"):
            print(f"{path}: error: not a .meta file", file=out)
            errors += 1
            continue
        if not os.path.lexists(path):
            print(f"{path}: error: no such file", file=out)
            errors += 1
            continue
        loader = RegistryLoader([path.parent])
        registry = loader.refresh([path])
        tool = registry.tools.get(path.name.removesuffix(".meta"))
        if tool is None:
            continue
        for err in tool.errors:
            print(f"{err.location()}: error: {err.message}", file=out)
            errors += 1
        for warn in tool.warnings:
            print(f"{warn.location()}: warning: {warn.message}", file=out)
            warnings += 1
    print(f"checked {files} file(s): {errors} error(s), {warnings} warning(s)", file=out)
    return 1 if errors else 0
