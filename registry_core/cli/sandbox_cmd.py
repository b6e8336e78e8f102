"""``ollie-tools sandbox show``: the effective rules of a profile on this kernel."""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from registry_core.cli.jsonout import write_json


def cmd_sandbox_show(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.errors import UnsafeWorkingDirectoryError
    from registry_core.paths import elevate_socket, tools_path
    from registry_core.sandbox import abi_version, effective_rules, load_profile
    from registry_core.sandbox.contain import find_bwrap
    from registry_core.sandbox.describe import describe, format_text
    from registry_core.sandbox.mounts import TMP
    from registry_core.sandbox.workdir import check_working_directory

    profile = load_profile(env, args.profile)
    bwrap = find_bwrap(env)
    # With namespaces, {TMPDIR} is the call's private /tmp (as the dispatcher expands it).
    rules = effective_rules(profile, {**env, "TMPDIR": TMP} if bwrap else env, os.getcwd())
    info = describe(
        rules, abi_version(), bwrap=bwrap, cwd=os.getcwd(), broker_socket=str(elevate_socket(env))
    )
    try:
        check_working_directory(os.getcwd(), env, tools_path(env))
        refused = None
    except UnsafeWorkingDirectoryError as exc:
        refused = str(exc)
    info["working_directory"] = {"path": os.getcwd(), "refused": refused}
    if args.json:
        write_json(info, out)
    else:
        print(format_text(info), file=out)
        if refused:
            print(f"Working directory: REFUSED here: {refused}", file=out)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("sandbox", help="inspect sandbox profiles")
    inner = p.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
    show = inner.add_parser("show", help="effective rules after template expansion")
    show.add_argument("--profile", default="default")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_sandbox_show)
