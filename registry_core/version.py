"""The installed version of Ollie Tray: one source, the package metadata.

``pyproject.toml`` holds the number; an installed distribution (a wheel, an
editable checkout, a system package) carries it in its metadata, which
:func:`importlib.metadata.version` reads.  A bare checkout that was never
installed has no metadata and says so.
"""

from __future__ import annotations

import functools
from importlib import metadata

DISTRIBUTION = "ollie-tray"
UNKNOWN = "0+unknown"


@functools.cache
def version() -> str:
    """``0.1.0``-style version of the installed distribution (``0+unknown`` when none)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints."""
    return f"{prog} (Ollie Tray) {version()}"
