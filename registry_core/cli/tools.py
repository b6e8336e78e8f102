"""``ollie-tools``: inspect the registry, lint ``.meta`` files and call tools as an agent would.

Exit codes: 0 success, 1 a requested thing is missing or has errors,
2 usage or argument errors; ``call`` exits with the tool's own status
(77 when elevation is denied).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from registry_core.cli.jsonout import write_json
from registry_core.cli.subcommands import run_parsed, run_subcommand
from registry_core.errors import OllieError, ToolChangedError
from registry_core.logsetup import setup_logging
from registry_core.paths import scan_cache_dir, tools_path
from registry_core.registry import Registry, RegistryLoader

if TYPE_CHECKING:
    import argparse

EXIT_USAGE = 2
PROG = "ollie-tools"

T = TypeVar("T")


def _registry(env: dict[str, str]) -> Registry:
    return RegistryLoader(tools_path(env), env, cache_dir=scan_cache_dir(env)).load()


def _from_registry(
    env: dict[str, str], build: Callable[[Registry], T], name: str | None = None
) -> T:
    """``build(registry)``; once more on a new snapshot if a file changed meanwhile.

    Tools' prompts and args are read when first needed (scan cache): a file
    edited between the scan and that read raises ToolChangedError.  With
    ``name``, the snapshot holds only that tool, looked up by name.
    """

    def snapshot() -> Registry:
        if name is None:
            return _registry(env)
        return RegistryLoader(tools_path(env), env, cache_dir=None).lookup_registry(name)

    try:
        return build(snapshot())
    except ToolChangedError:
        return build(snapshot())


def cmd_list(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.cli import render
    from registry_core.registry.serialize import tool_summary

    registry = _registry(env)
    tools = registry.all() if args.all else registry.available()
    if args.json:
        write_json([tool_summary(t) for t in tools], out)
    else:
        print(render.list_text(tools), file=out)
    return 0


def cmd_show(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.cli import render
    from registry_core.registry.serialize import tool_details

    if args.json:
        details = _from_registry(env, lambda r: tool_details(r.get(args.name)), args.name)
        write_json(details, out)
    else:
        encoding = getattr(out, "encoding", "utf-8")
        name = args.name
        text = _from_registry(env, lambda r: render.show_text(r.get(name), encoding), name)
        print(text, file=out)
    return 0


def cmd_dump(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    """Every tool's details at once: what ``ollie-remote`` and the Tool Browser read."""
    import socket

    from registry_core.registry.serialize import registry_dump

    hostname = socket.gethostname()
    write_json(_from_registry(env, lambda r: registry_dump(r, hostname)), out)
    return 0


def cmd_check(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.cli.check import run_check

    targets = [Path(p) for p in args.paths] or tools_path(env)
    return run_check(targets, out)


# Subcommands defined in their own modules, imported only when needed: an agent's
# ``ollie-tools call`` does not pay for the policy, MCP or sandbox commands.
_MODULES = {
    "call": "call_cmd",
    "sandbox": "sandbox_cmd",
    "policy": "policy_cmd",
    "audit": "policy_cmd",
    "mcp": "mcp_cmd",
}
_BUILTIN = ("list", "show", "dump", "check")


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; given the ``command`` about to run, only the modules it needs."""
    from registry_core.cli.argparser import Parser, add_version

    parser = Parser(
        prog=PROG,
        description="Inspect and call Ollie tools (.meta sidecars on $OLLIE_TOOLS_PATH).",
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list tools (available ones unless --all)")
    p.add_argument("--all", action="store_true", help="include hidden and broken tools")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="everything the registry knows about one tool")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("dump", help="the whole registry with every tool's details, as JSON")
    p.add_argument("--json", action="store_true", help="JSON output (the only format)")
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("check", help="lint .meta files (exit 0 only without errors)")
    p.add_argument("paths", nargs="*", help=".meta files or directories (default: tools path)")
    p.set_defaults(func=cmd_check)

    if command in _BUILTIN:
        modules = []
    elif command in _MODULES:
        modules = [_MODULES[command]]
    else:  # help, or a mistake: every command, to list them
        modules = list(dict.fromkeys(_MODULES.values()))
    for module in modules:
        importlib.import_module(f"registry_core.cli.{module}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] == "call":  # an agent's call: parsed without building argparse
        from registry_core.cli.call_cmd import fast_parse

        args = fast_parse(words[1:])
        if args is not None:
            return run_parsed(PROG, args, out, (OllieError,))
    return run_subcommand(build_parser(_command(words)), words, out, (OllieError,))


def main_entry() -> None:
    setup_logging()
    sys.exit(main())


if __name__ == "__main__":
    main_entry()
