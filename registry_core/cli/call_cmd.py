"""``ollie-tools call``: run a tool exactly as an agent's dispatcher would."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TextIO

from registry_core.cli.jsonout import write_json
from registry_core.errors import (
    ArgumentsError,
    ElevationDeniedError,
    SandboxError,
    ToolNotFoundError,
    ToolUnavailableError,
)
from registry_core.paths import tools_path
from registry_core.registry import RegistryLoader

if TYPE_CHECKING:
    import argparse

EXIT_USAGE = 2
EXIT_DENIED = 77

# The options of ``call``: what argparse is given in :func:`register` and what
# :func:`fast_parse` accepts, from this one table.
DEFAULTS: dict[str, Any] = {
    "args": None,
    "profile": "default",
    "timeout": 60.0,
    "elevated": False,
    "json": False,
    "verbose": False,
}
_VALUED = {"--args": ("args", str), "--profile": ("profile", str), "--timeout": ("timeout", float)}
_FLAGS = {"--elevated": "elevated", "--json": "json", "-v": "verbose", "--verbose": "verbose"}


class UsageError(Exception):
    """Bad command-line input (exit 2)."""


def read_args(spec: str | None, stdin: TextIO) -> Any:
    """``--args JSON``, ``--args @FILE`` or ``--args -`` (stdin); default ``{}``."""
    if spec is None:
        return {}
    if spec == "-":
        text, origin = stdin.read(), "stdin"
    elif spec.startswith("@"):
        try:
            text, origin = Path(spec[1:]).read_text(encoding="utf-8"), spec[1:]
        except OSError as exc:
            raise UsageError(f"cannot read --args file {spec[1:]}: {exc.strerror}") from exc
    else:
        text, origin = spec, "--args"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{origin}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc


def cmd_call(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    # Imported here: `ollie-tools list/show/check` start without jsonschema or the sandbox.
    from registry_core.dispatch import CallOptions, Dispatcher
    from registry_core.dispatch.gate_choice import askpass_program, make_gate

    try:
        call_args = read_args(args.args, sys.stdin)
    except UsageError as exc:
        print(f"ollie-tools call: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        print(
            f"ollie-tools call: --timeout must be positive and finite (got {args.timeout:g})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    # Only the called tool's own files are read: the cost does not grow with the
    # number of tools installed (no scan, no scan cache).
    loader = RegistryLoader(tools_path(env), env, cache_dir=None)
    gate = make_gate(env, timeout=args.timeout)
    dispatcher = Dispatcher(
        registry=lambda: loader.lookup_registry(args.name),
        env=env,
        gate=gate,
        askpass=askpass_program(),
    )
    options = CallOptions(
        cwd=os.getcwd(), timeout=args.timeout, elevated=args.elevated, profile=args.profile
    )
    try:
        result = dispatcher.call(args.name, call_args, options)
    except ArgumentsError as exc:
        print(f"ollie-tools call: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ElevationDeniedError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_DENIED
    except ToolNotFoundError as exc:
        # Refused before anything ran, like a denial: an agent reads 77 as "not allowed".
        print(f"unknown tool: {exc}", file=sys.stderr)
        return EXIT_DENIED
    except (ToolUnavailableError, SandboxError) as exc:
        print(f"ollie-tools call: {exc}", file=sys.stderr)
        return 1
    finally:
        gate.close()
    if args.json:
        write_json(result.to_json(), out)
    else:
        out.write(result.stdout)
        out.flush()
        if result.stderr:
            sys.stderr.write(
                result.stderr if result.stderr.endswith("\n") else result.stderr + "\n"
            )
        for note in result.unenforced:
            # Running without namespaces (best effort) is said every time, loudly.
            if args.verbose or note.startswith("namespaces:"):
                print(f"ollie-tools call: not enforced: {note}", file=sys.stderr)
    return exit_status(result.exit_code)


def fast_parse(argv: Sequence[str]) -> SimpleNamespace | None:
    """The arguments of ``ollie-tools call ARGV`` as argparse would parse them, or
    ``None`` when ``argv`` is anything but the plain form (then argparse parses it
    and gives help and errors).

    Accepted: one tool name not starting with ``-``; each option of
    :data:`_VALUED` at most once, as ``--opt VALUE`` or ``--opt=VALUE`` with a
    value that is ``-`` or does not start with ``-``; each flag of
    :data:`_FLAGS`.  Anything else -- help, ``--``, abbreviations, repeats, a
    value argparse might read as an option, a ``--timeout`` that is not a
    number -- is left to argparse.

    Kept for one user-visible figure: importing argparse and building the
    whole ``ollie-tools`` parser was measured at 1.3x the whole-process time of
    ``ollie-tools call`` (budget: 3x ``python -I`` + ``bwrap``, already about
    3x).  ``tests/unit/cli/test_call_fast_parse.py`` holds it to argparse's
    answers.
    """
    found: dict[str, Any] = {}
    name: str | None = None
    words = iter(argv)
    for word in words:
        if not word.startswith("-"):
            if name is not None:
                return None
            name = word
            continue
        option, eq, value = word.partition("=")
        if option in _FLAGS and not eq:
            dest = _FLAGS[option]
        elif option in _VALUED:
            dest, kind = _VALUED[option]
            if not eq:
                following = next(words, None)
                if following is None:
                    return None
                value = following
            if value.startswith("-") and value != "-":
                return None
        else:
            return None
        if dest in found:
            return None
        if option in _FLAGS:
            found[dest] = True
        else:
            try:
                found[dest] = kind(value)
            except ValueError:
                return None
    if name is None:
        return None
    return SimpleNamespace(command="call", name=name, **{**DEFAULTS, **found}, func=cmd_call)


def exit_status(code: int) -> int:
    """The tool's status; killed by signal N (``-N`` from subprocess) → 128 + N, as shells do.

    ``sys.exit(-9)`` would otherwise exit with 247, which looks like a real status.
    """
    return 128 - code if code < 0 else code


def register(sub: Any) -> None:
    p = sub.add_parser("call", help="run a tool as an agent would (sandboxed unless elevated)")
    p.add_argument("name")
    p.add_argument(
        "--args",
        metavar="JSON|@FILE|-",
        help="the call's arguments: inline JSON, @file, or - for stdin (default {})",
    )
    p.add_argument(
        "--profile", default=DEFAULTS["profile"], help="sandbox profile name (default: default)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULTS["timeout"],
        help="seconds for each part of the call: the wait for a person's approval (when the "
        "tool needs elevation; the broker gets 10 s more to answer, then the call is denied) "
        "and then the tool's run (then it is killed); default 60",
    )
    p.add_argument("--elevated", action="store_true", help="ask to run outside the sandbox")
    p.add_argument("--json", action="store_true", help="print one JSON result object")
    p.add_argument("-v", "--verbose", action="store_true", help="report unenforced sandbox parts")
    p.set_defaults(func=cmd_call)
