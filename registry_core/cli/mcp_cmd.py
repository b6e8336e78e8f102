"""``ollie-tools mcp``: serve the registry to MCP clients (Claude Code, Codex, Goose, ...).

stdio by default: the client starts this command and speaks JSON-RPC on its
stdin/stdout (``docs/mcp.md``); nothing else may write to stdout, so every
message of ours goes to stderr.  ``--http``: streamable HTTP on localhost
with a per-start token (:mod:`registry_core.mcp.http_server`).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, TextIO

EXIT_USAGE = 2


def cmd_mcp(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    import asyncio

    from registry_core.mcp.server import RegistryServer

    if not all(
        value > 0 and math.isfinite(value) for value in (args.timeout, args.progress_interval)
    ):
        print(
            "ollie-tools mcp: --timeout and --progress-interval must be positive and finite "
            f"(got {args.timeout:g} and {args.progress_interval:g})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    server = RegistryServer(
        env,
        cwd=args.cwd,
        timeout=args.timeout,
        profile=args.profile,
        progress_interval=args.progress_interval,
    )
    try:
        if args.http:
            from registry_core.mcp.http_server import serve_http

            asyncio.run(serve_http(server, args.port, env))
        else:
            asyncio.run(server.serve_stdio())
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the registry as an MCP server on stdin/stdout")
    p.add_argument("--cwd", help="working directory of every call (default: the current one)")
    p.add_argument("--profile", default="default", help="sandbox profile name (default: default)")
    p.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before a call's tool is killed"
    )
    p.add_argument(
        "--progress-interval",
        type=float,
        default=1.0,
        help="seconds between progress notifications of a running call (default 1)",
    )
    p.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP on 127.0.0.1 with a per-start bearer token instead of stdio",
    )
    p.add_argument("--port", type=int, default=0, help="HTTP port (default: any free port)")
    p.set_defaults(func=cmd_mcp)
    from registry_core.wiring.cli import register_mcp

    register_mcp(p.add_subparsers(dest="mcp_action", metavar="install|uninstall"))
