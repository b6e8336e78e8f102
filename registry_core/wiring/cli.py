"""`ollie-approve install|uninstall --agent A`, `ollie-tools mcp install|uninstall --client C`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from registry_core.wiring import targets
from registry_core.wiring.edit import Edit, WiringError, apply

EXIT_REFUSED = 1


def _program(name: str, override: str | None) -> str:
    from registry_core import paths

    program = override or paths.own_program(name)
    if program is None:
        raise WiringError(
            f"no {name} beside the running Python ({sys.executable}): run the installed "
            f"command, or pass --program PATH"
        )
    return os.path.abspath(program)


def _options(parser: argparse.ArgumentParser, what: str, choices: Sequence[str]) -> None:
    parser.add_argument("--" + what, required=True, choices=choices, help=f"the {what} to wire up")
    parser.add_argument("--config", type=Path, help="the file to change (default: the agent's own)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the change as a diff, write nothing"
    )
    parser.add_argument(
        "--program", help="absolute path of Ollie's command to run (default: the one beside Python)"
    )


def _run(edit: Edit, uninstall: bool, dry_run: bool, out: TextIO) -> int:
    try:
        outcome = apply(edit, uninstall=uninstall, dry_run=dry_run)
    except WiringError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if outcome.diff:
        out.write(outcome.diff)
    print(outcome.message, file=sys.stderr)
    return 0


# --- ollie-approve install|uninstall ----------------------------------------------


def approve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ollie-approve",
        description="Wire a coding agent's hooks to ollie-approve, or take them out again.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("install", "uninstall"):
        p = sub.add_parser(action, help=f"{action} ollie-approve as the agent's hook")
        _options(p, "agent", targets.AGENTS)
    return parser


def run_approve(argv: Sequence[str], out: TextIO, env: Mapping[str, str]) -> int:
    args = approve_parser().parse_args(argv)
    try:
        path = args.config or targets.agent_default(args.agent, env)
        program = _program(targets.APPROVE, args.program)
        edit = targets.agent_edit(args.agent, path, program)
    except WiringError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return _run(edit, args.action == "uninstall", args.dry_run, out)


# --- ollie-tools mcp install|uninstall ---------------------------------------------


def register_mcp(sub: Any) -> None:
    for action in ("install", "uninstall"):
        p = sub.add_parser(action, help=f"{action} Ollie's MCP server in a client's configuration")
        _options(p, "client", targets.CLIENTS)
        p.set_defaults(func=cmd_mcp_wiring, uninstall=action == "uninstall")


def cmd_mcp_wiring(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    try:
        path = args.config or targets.client_default(args.client, env, Path.cwd())
        program = _program("ollie-tools", args.program)
        edit = targets.client_edit(args.client, path, program, env)
    except WiringError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return _run(edit, args.uninstall, args.dry_run, out)
