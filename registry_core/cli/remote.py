"""``ollie-remote``: agents on other machines, through OpenSSH (see docs/remote.md).

    ollie-remote deploy HOST [--tools DIR] [--remote-path PATH] [--method auto|rsync|tar]
    ollie-remote connect HOST [--remote-socket PATH]
    ollie-remote status [--json]
    ollie-remote disconnect HOST
    ollie-remote dump HOST            (the remote registry as JSON; the Tool Browser's source)

Every subcommand takes ``--ssh-option "WORDS"`` (repeatable; also
``$OLLIE_REMOTE_SSH_OPTIONS``): extra ssh arguments such as ``-p 2222``,
``-i KEY`` or ``-F CONFIG``.  They cannot weaken ``BatchMode=yes`` or
``StrictHostKeyChecking=yes``.

Exit codes: 0 success, 1 failure (ssh, remote side), 2 usage, 3 already
connected (connect) / not connected (disconnect).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from registry_core import paths
from registry_core.cli.argparser import add_version
from registry_core.cli.render import table
from registry_core.cli.subcommands import run_subcommand
from registry_core.errors import RemoteError
from registry_core.logsetup import setup_logging
from registry_core.remote.connect import Supervisor, disconnect
from registry_core.remote.deploy import DEFAULT_REMOTE_PATH, Deployer, DeployResult, Method
from registry_core.remote.fetch import fetch_dump
from registry_core.remote.ssh import SshTarget, check_host, extra_options
from registry_core.remote.state import (
    DeployedHost,
    deployed_hosts,
    live_connections,
    read_connection,
    record_deployed,
    state_dir,
    state_file,
)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STATE = 3


def _target(args: argparse.Namespace, env: dict[str, str]) -> SshTarget:
    return SshTarget(check_host(args.host), extra_options(env, args.ssh_option or ()))


def _print_tools(result: DeployResult, out: TextIO) -> None:
    if result.tools is None:
        return
    rows = []
    for tool in sorted(result.tools, key=lambda t: str(t.get("name", ""))):
        variant = tool.get("variant")
        rows.append(
            [
                str(tool.get("name", "?")),
                str(tool.get("status", "?")),
                "-" if variant is None else str(variant),
                str(tool.get("executable") or "-"),
            ]
        )
    print(f"The registry on {result.host} resolved:", file=out)
    print(
        table(rows, ["NAME", "STATUS", "VARIANT", "EXECUTABLE"]) if rows else "no tools", file=out
    )


def cmd_deploy(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    target = _target(args, env)
    tools_dir = Path(args.tools) if args.tools else paths.tools_path(env)[0]
    deployer = Deployer(
        target,
        tools_dir,
        args.remote_path,
        method=Method(args.method),
        remote_ollie_tools=args.remote_ollie_tools,
    )
    result = deployer.run()
    record_deployed(
        env,
        DeployedHost(
            host=target.host,
            remote_path=result.remote_path,
            ollie_tools=result.ollie_tools,
            deployed_at=time.time(),
        ),
    )
    if args.json:
        json.dump(
            {
                "host": result.host,
                "remote_path": result.remote_path,
                "method": result.method.value,
                "copied": result.copied,
                "removed": result.removed,
                "ollie_tools": result.ollie_tools or None,
                "tools": result.tools,
                "list_error": result.list_error or None,
            },
            out,
            indent=2,
        )
        out.write("\n")
        return 0
    print(
        f"Deployed {len(result.copied)} files from {tools_dir} to {result.host}:"
        f"{result.remote_path} ({result.method.value}).",
        file=out,
    )
    if result.removed:
        print(f"Removed there (deleted here): {', '.join(result.removed)}", file=out)
    if not result.ollie_tools:
        print(
            f"ollie-tools is not installed on {result.host} (not on PATH, not in "
            "~/.local/bin): cannot show what its registry resolved. Install ollie-tray there "
            "(e.g. pipx install) to use the tools.",
            file=out,
        )
    elif result.list_error:
        print(f"ollie-tools list on {result.host} failed: {result.list_error}", file=out)
    else:
        _print_tools(result, out)
    return 0


def cmd_connect(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    target = _target(args, env)
    local = Path(args.local_socket) if args.local_socket else paths.elevate_socket(env)
    deployed = next((h for h in deployed_hosts(env) if h.host == target.host), None)
    supervisor = Supervisor(
        target,
        local_socket=local,
        state_dir=state_dir(env),
        remote_socket=args.remote_socket,
        remote_tools_path=deployed.remote_path if deployed else DEFAULT_REMOTE_PATH,
    )
    supervisor.install_signal_handlers()
    print(
        f"ollie-remote: forwarding {local} to {target.host} (Ctrl+C or "
        f"`ollie-remote disconnect {target.host}` to stop)",
        file=sys.stderr,
        flush=True,
    )
    return supervisor.run()


def _age(since: float) -> str:
    seconds = max(0, int(time.time() - since))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def cmd_status(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    live = live_connections(state_dir(env))
    if args.json:
        json.dump([c.to_json() for c in live], out, indent=2)
        out.write("\n")
        return 0
    if not live:
        print("No remote hosts connected.", file=out)
        return 0
    rows = [
        [
            c.host,
            "connected" if c.connected else ("connecting" if c.ssh_pid else "reconnecting"),
            _age(c.since),
            c.remote_socket or "-",
            f"{c.pid}/{c.ssh_pid or '-'}",
        ]
        for c in live
    ]
    print(table(rows, ["HOST", "STATE", "SINCE", "REMOTE SOCKET", "PID/SSH"]), file=out)
    return 0


def cmd_disconnect(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    directory = state_dir(env)
    conn = read_connection(state_file(directory, check_host(args.host)))
    if conn is None or conn not in live_connections(directory):
        print(f"ollie-remote: not connected to {args.host}", file=sys.stderr)
        return EXIT_STATE
    if not disconnect(conn):
        print(
            f"ollie-remote: the supervisor of {args.host} (pid {conn.pid}) did not stop",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"Disconnected from {args.host}.", file=out)
    return 0


def cmd_dump(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    dump: Any = fetch_dump(_target(args, env), env)
    json.dump(dump, out, indent=2)
    out.write("\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ollie-remote",
        description="Use Ollie tools on other machines over SSH: deploy tools there, and "
        "forward the local elevation broker so the remote agent's requests are decided here.",
    )
    add_version(parser)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--ssh-option",
        action="append",
        metavar="WORDS",
        help='extra ssh arguments, shell-split (e.g. "-p 2222"); repeatable; '
        "also $OLLIE_REMOTE_SSH_OPTIONS",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("deploy", parents=[common], help="copy the tools to HOST")
    p.add_argument("host")
    p.add_argument("--tools", help="local tools directory (default: first of $OLLIE_TOOLS_PATH)")
    p.add_argument(
        "--remote-path",
        default=DEFAULT_REMOTE_PATH,
        help=f"tools directory on HOST (default {DEFAULT_REMOTE_PATH})",
    )
    p.add_argument(
        "--method", choices=[m.value for m in Method], default="auto", help="transfer method"
    )
    p.add_argument(
        "--remote-ollie-tools",
        metavar="PATH",
        help="ollie-tools on HOST (default: PATH, then ~/.local/bin)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser(
        "connect", parents=[common], help="forward the local broker to HOST (runs until stopped)"
    )
    p.add_argument("host")
    p.add_argument(
        "--remote-socket",
        metavar="PATH",
        help="socket path on HOST (default: $XDG_RUNTIME_DIR/ollie/elevate.sock there)",
    )
    p.add_argument("--local-socket", metavar="PATH", help="default: $OLLIE_ELEVATE_SOCKET")
    p.set_defaults(func=cmd_connect)

    p = sub.add_parser("status", parents=[common], help="list live connections")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("disconnect", parents=[common], help="stop the connection to HOST")
    p.add_argument("host")
    p.set_defaults(func=cmd_disconnect)

    p = sub.add_parser(
        "dump", parents=[common], help="print HOST's registry as JSON (ollie-tools dump there)"
    )
    p.add_argument("host")
    p.set_defaults(func=cmd_dump)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    return run_subcommand(build_parser(), argv, out, (RemoteError, OSError), EXIT_FAILED)


def main_entry() -> None:
    setup_logging()
    sys.exit(main())


if __name__ == "__main__":
    main_entry()
