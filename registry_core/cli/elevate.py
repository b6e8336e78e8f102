"""``ollie-elevate -- <bash code>``: ollie-core's ``x/elevate`` plugin, backed by our broker.

ollie-core runs ``$OLLIE_PLUGINS_PATH/elevate -- <code>`` from the session's
working directory, reads stdout, stderr and the exit status, and SIGKILLs
the plugin when its step timeout (default 30 s) runs out -- a timeout that
covers the person's decision as well as the run.  So:

- the request carries that deadline: ``OLLIE_ELEVATE_TIMEOUT`` seconds
  (default 30, ollie-core's step default), counted from our start; the
  broker's countdown never outlasts it, and we stop waiting when it passes;
- on approval bash runs the code *tethered* to this process
  (:mod:`registry_core.dispatch.tether`): when the runtime kills us, every
  process of the code dies too, and when bash ends, so does anything it left
  running;
- a denial (or no decision in time) exits 77 with the reason on stderr;
- the code runs with a clean environment (:func:`registry_core.pinned.clean_env`):
  ``PATH`` of the system directories, none of the caller's ``BASH_ENV``,
  ``LD_*``, ``PYTHON*`` and the like, so what runs is the approved code itself.

``ollie-elevate --install`` links itself in as ollie-core's plugin,
``<plugins>/elevate`` (:func:`registry_core.paths.plugins_dir`: the first
entry of ``$OLLIE_PLUGINS_PATH``, else ``<ollie config>/scripts/x``).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

from registry_core import paths
from registry_core.broker.wire.messages import MAX_TIMEOUT, REQUEST_CODE_TOOL
from registry_core.cli.argparser import add_version
from registry_core.dispatch.broker_gate import InProcessGate, choose_gate
from registry_core.dispatch.gate import ElevationRequest, Kind
from registry_core.dispatch.tether import run_tethered
from registry_core.errors import ElevationDeniedError, UntrustedProgramError
from registry_core.logsetup import setup_logging
from registry_core.pinned import clean_env
from registry_core.trusted import trusted_program

EXIT_DENIED = 77
EXIT_USAGE = 2
EXIT_NO_SHELL = 127  # no trusted bash: a shell's status for a program it cannot run
TIMEOUT_ENV = "OLLIE_ELEVATE_TIMEOUT"
DEFAULT_TIMEOUT = 30.0  # ollie-core's default step timeout
# Beyond the deadline we give the broker this long to say "timeout" itself.
_REPLY_GRACE = 2.0


class _NoDecision(Exception):
    pass


def _timeout(env: Mapping[str, str]) -> float:
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT:
        raise ValueError(
            f"{TIMEOUT_ENV}={raw!r}: expected seconds above 0, at most {MAX_TIMEOUT:g}"
        )
    return value


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _NoDecision


def _authorize(env: Mapping[str, str], request: ElevationRequest, deadline: float) -> None:
    """Ask; raise ElevationDeniedError unless approved before ``deadline`` (monotonic)."""
    gate = choose_gate(env)
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _NoDecision
        signal.setitimer(signal.ITIMER_REAL, remaining + _REPLY_GRACE)
        gate.authorize(request._replace(timeout=remaining))
    except _NoDecision:
        raise ElevationDeniedError("no decision before the step's deadline") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if isinstance(gate, InProcessGate):
            gate.close()
    if time.monotonic() >= deadline:
        raise ElevationDeniedError("approved after the step's deadline; not run")


def install(env: Mapping[str, str], program: str) -> int:
    """Link ``program`` as ``<plugins>/elevate``; an existing different file is left alone."""
    target = Path(program).resolve()
    link = paths.plugins_dir(env) / "elevate"
    if link.is_symlink() and link.resolve() == target:
        print(f"{link} already runs {target}")
        return 0
    if link.exists() or link.is_symlink():
        print(f"ollie-elevate: {link} exists and is not ours; remove it first", file=sys.stderr)
        return 1
    try:
        link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        link.symlink_to(target)
    except OSError as exc:
        print(f"ollie-elevate: cannot create {link}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"{link} -> {target}: ollie-core now asks this tray before elevated steps")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser behind ``--help``, ``--version`` and the manual page.

    Everything after ``--`` is the code, never an option: ``ollie-elevate -- --help``
    asks to run ``bash -c --help``; only options before ``--`` are read here.
    """
    parser = argparse.ArgumentParser(
        prog="ollie-elevate",
        usage="%(prog)s [-h] [--version] [--install] -- CODE",
        description="ollie-core's x/elevate plugin: ask the person (through the Ollie tray or "
        "broker) before running bash CODE outside the sandbox; exit 77 when denied or not "
        f"decided within ${TIMEOUT_ENV} seconds (default {DEFAULT_TIMEOUT:g}).",
    )
    parser.add_argument(
        "--install",
        action="store_true",
        help="link this program in as ollie-core's elevate plugin (<plugins>/elevate)",
    )
    parser.add_argument("code", nargs="?", metavar="CODE", help="bash code, after --")
    add_version(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    args = list(sys.argv[1:] if argv is None else argv)
    options = args[: args.index("--")] if "--" in args else args
    if any(a in ("-h", "--help", "--version") for a in options):
        try:
            build_parser().parse_args(options)
        except SystemExit as done:  # help and version print and exit 0
            return int(done.code or 0)
    if args == ["--install"]:
        me = sys.argv[0]
        return install(os.environ, me if os.sep in me else paths.own_program(me) or me)
    if args and args[0] == "--":
        args = args[1:]
    if len(args) != 1 or not args[0].strip():
        print("usage: ollie-elevate -- '<bash code>'", file=sys.stderr)
        return EXIT_USAGE
    env = dict(os.environ)
    try:
        deadline = started + _timeout(env)
    except ValueError as exc:
        print(f"ollie-elevate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    code = args[0]
    try:
        # The trusted bash of a system directory, never PATH's first (a project's
        # .venv/bin a tool can write); the broker checks this very path.
        bash = trusted_program("bash")
    except UntrustedProgramError as exc:
        print(f"ollie-elevate: {exc}", file=sys.stderr)
        return EXIT_NO_SHELL
    argv_run = [bash, "-c", code]
    request = ElevationRequest(
        REQUEST_CODE_TOOL, Kind.SANDBOX, tuple(argv_run), {}, os.getcwd(), code
    )
    try:
        _authorize(env, request, deadline)
    except ElevationDeniedError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_DENIED
    # The approved code runs with the clean environment of every approved run
    # (registry_core.pinned): no PATH, BASH_ENV, LD_* or PYTHON* of the caller's.
    return run_tethered(argv_run, clean_env(env))


def main_entry() -> None:
    setup_logging()
    sys.exit(main())
