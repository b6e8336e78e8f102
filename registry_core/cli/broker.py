"""``ollie-broker``: the headless elevation broker (terminal, kdialog, zenity or no front-end).

Quit with SIGTERM, SIGINT or SIGHUP (the terminal of a terminal front-end
closed): pending requests are denied (``shutdown``), the socket file is
removed, and the exit status is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from registry_core import paths
from registry_core.broker.ask.choose import FRONT_ENDS
from registry_core.broker.decide.core import BrokerConfig
from registry_core.broker.headless import build_broker
from registry_core.broker.serve.flood import raise_fd_limit
from registry_core.broker.serve.server import BrokerServer
from registry_core.cli.argparser import add_version
from registry_core.errors import ElevationError
from registry_core.logsetup import setup_logging
from registry_core.remote.identify import make_identifier
from registry_core.remote.state import state_dir as remote_state_dir
from registry_core.secure import harden_process


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ollie-broker", description="Headless Ollie elevation broker."
    )
    add_version(parser)
    parser.add_argument(
        "--front-end",
        default="auto",
        choices=FRONT_ENDS,
        help="who asks the person (none: remembered policies only, deny the rest)",
    )
    parser.add_argument("--socket", type=Path, help="socket path (default $OLLIE_ELEVATE_SOCKET)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before an unanswered prompt is denied"
    )
    return parser


async def serve(server: BrokerServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    print(
        f"ollie-broker: listening on {server.path} (front-end: {server.broker.prompter.name})",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        parser.error(f"--timeout must be positive and finite (got {args.timeout:g})")
    harden_process()
    raise_fd_limit()  # a flood of connections must not run out of descriptors first
    env = dict(os.environ)
    path = args.socket or paths.elevate_socket(env)
    try:
        broker = build_broker(env, args.front_end, config=BrokerConfig(prompt_timeout=args.timeout))
        identify = make_identifier(remote_state_dir(env))  # ollie-remote forwards
        asyncio.run(serve(BrokerServer(broker, path, identify=identify)))
    except (ElevationError, ValueError) as exc:
        print(f"ollie-broker: {exc}", file=sys.stderr)
        return 1
    return 0


def main_entry() -> None:
    setup_logging()
    sys.exit(main())
