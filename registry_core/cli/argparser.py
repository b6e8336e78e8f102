"""``argparse`` told the terminal's width, so that building a parser imports no :mod:`shutil`.

argparse's own ``HelpFormatter`` imports :mod:`shutil` to learn the width, and
every ``add_argument`` makes one; an agent's ``ollie-tools call`` would pay for
the archive modules :mod:`shutil` pulls in.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

_FALLBACK_COLUMNS = 80


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reports it (``$COLUMNS``,
    then standard output's terminal, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or _FALLBACK_COLUMNS


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, given the width (``width - 2``, as argparse does)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: print the program's name and Ollie Tray's version, exit 0."""
    from registry_core.version import version_line

    parser.add_argument(
        "--version", action="version", version=version_line(parser.prog), help="show the version"
    )


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` using :class:`HelpFormatter`; its subcommands' parsers
    are of this class too (argparse makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
