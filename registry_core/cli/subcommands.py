"""Running an ``argparse`` program whose subcommands are ``func(args, env, out) -> int``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO


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
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args, dict(os.environ), out or sys.stdout)
    except BrokenPipeError:
        return 0
    except failures as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return failed
    return code
