"""Running a program whose subcommands are ``func(args, env, out) -> int``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import argparse


def run_subcommand(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    out: TextIO | None,
    failures: tuple[type[Exception], ...],
    failed: int = 1,
) -> int:
    """Parse ``argv``, run the chosen subcommand and return its exit status.

    An exception of ``failures`` is printed as ``PROG: message`` and exits with
    ``failed``; a closed output pipe (``| head``) is not an error.
    """
    return run_parsed(parser.prog, parser.parse_args(argv), out, failures, failed)


def run_parsed(
    prog: str,
    args: Any,
    out: TextIO | None,
    failures: tuple[type[Exception], ...],
    failed: int = 1,
) -> int:
    """Run ``args.func`` of arguments already parsed (see :func:`run_subcommand`)."""
    try:
        code: int = args.func(args, dict(os.environ), out or sys.stdout)
    except BrokenPipeError:
        return 0
    except failures as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return failed
    return code
