"""Shared libraries of an executable, as ``ldd`` reports them.

Used by the profile option ``advanced.ldd: true``: every executable file the
profile allows to run gets its libraries added read+execute.  ``ldd`` is only
run on executables the profile itself names, never on a tool's arguments.
"""

from __future__ import annotations

import os
import subprocess
from typing import NamedTuple

from registry_core.trusted import find_trusted

_LDD_TIMEOUT_SECONDS = 10.0


class LddResult(NamedTuple):
    libraries: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


def _without_address(text: str) -> str:
    """``/path (0x7f...)`` without its load address; the path itself may hold `` (``."""
    head, found, tail = text.rpartition(" (0x")
    return head if found and tail.endswith(")") else text


def parse_ldd_output(text: str) -> LddResult:
    """Parse ``ldd`` output: ``name => /path (0x..)`` and bare ``/path (0x..)`` lines."""
    libraries: list[str] = []
    missing: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if "=>" in line:
            name, _, target = line.partition("=>")
            target = target.strip()
            if target.startswith("not found"):
                missing.append(name.strip())
                continue
            path = _without_address(target).strip()
        else:
            path = _without_address(line).strip()
        if path.startswith("/") and path not in libraries:
            libraries.append(path)
    return LddResult(tuple(libraries), tuple(missing))


class LddResolver:
    """Runs ``ldd`` and caches the answer per (path, mtime, size).

    ``ldd``: the program to run (tests inject one); by default the trusted ``ldd``
    of a system directory (:func:`registry_core.trusted.find_trusted`), never one
    found on a ``PATH``.
    """

    def __init__(self, ldd: str | None = None) -> None:
        self._ldd = ldd
        self._cache: dict[tuple[str, int, int], LddResult] = {}

    def __call__(self, executable: str) -> LddResult:
        """Libraries of ``executable``; raises :class:`OSError` when ``ldd`` fails."""
        info = os.stat(executable)
        key = (executable, info.st_mtime_ns, info.st_size)
        if key in self._cache:
            return self._cache[key]
        ldd = self._ldd or find_trusted("ldd")
        if ldd is None:
            raise OSError("ldd is not installed in a system directory Ollie trusts")
        try:
            done = subprocess.run(
                [ldd, executable],
                capture_output=True,
                text=True,
                timeout=_LDD_TIMEOUT_SECONDS,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise OSError(f"ldd timed out after {_LDD_TIMEOUT_SECONDS:g} s") from exc
        output = done.stdout + done.stderr
        if "not a dynamic executable" in output or "statically linked" in output:
            result = LddResult()
        elif done.returncode != 0:
            raise OSError(f"ldd exited with status {done.returncode}: {output.strip()[:200]}")
        else:
            result = parse_ldd_output(done.stdout)
        self._cache[key] = result
        return result
