"""``ollie-tools sandbox show`` and ``sandbox check``: what a profile amounts to here,
and whether a call from this directory with it would be refused."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, TextIO

from registry_core.cli.jsonout import write_json

if TYPE_CHECKING:
    from registry_core.sandbox import SandboxProfile


def _refusals(env: dict[str, str], profile: SandboxProfile, bwrap: str | None) -> dict[str, Any]:
    """What the dispatcher would refuse for a call from here with ``profile``: the working
    directory, and the profile's rules (the broker socket, Ollie's own places)."""
    from registry_core.errors import SandboxError, UnsafeWorkingDirectoryError
    from registry_core.paths import tools_path, tools_path_string
    from registry_core.sandbox import effective_rules
    from registry_core.sandbox.guard import guard_broker_socket
    from registry_core.sandbox.mounts import TMP
    from registry_core.sandbox.protected import refuse_protected_rules
    from registry_core.sandbox.workdir import check_working_directory

    cwd = os.getcwd()
    tools = tools_path(env)
    try:
        check_working_directory(cwd, env, tools)
        workdir = None
    except UnsafeWorkingDirectoryError as exc:
        workdir = str(exc)
    # The templates as the dispatcher expands them: its tools path, the private /tmp.
    template_env = {**env, "OLLIE_TOOLS_PATH": tools_path_string(env)}
    private: tuple[str, ...] = ()
    if bwrap:
        template_env["TMPDIR"] = TMP
        private = (TMP,)
    try:
        guard_broker_socket(effective_rules(profile, template_env, cwd), env, private=private)
        refuse_protected_rules(profile, template_env, cwd, tools, private=private)
        rules = None
    except SandboxError as exc:
        rules = str(exc)
    return {"path": cwd, "refused": workdir, "profile_refused": rules}


def cmd_sandbox_show(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.paths import elevate_socket
    from registry_core.sandbox import abi_version, effective_rules, load_profile
    from registry_core.sandbox.contain import find_bwrap
    from registry_core.sandbox.describe import describe, format_text
    from registry_core.sandbox.mounts import TMP
    from registry_core.sandbox.scope import find_scope

    profile = load_profile(env, args.profile)
    bwrap = find_bwrap(env)
    # With namespaces, {TMPDIR} is the call's private /tmp (as the dispatcher expands it).
    rules = effective_rules(profile, {**env, "TMPDIR": TMP} if bwrap else env, os.getcwd())
    info = describe(
        rules,
        abi_version(),
        bwrap=bwrap,
        cwd=os.getcwd(),
        broker_socket=str(elevate_socket(env)),
        cgroup=find_scope(env) is not None,
    )
    refusals = _refusals(env, profile, bwrap)
    info["working_directory"] = {"path": refusals["path"], "refused": refusals["refused"]}
    info["refused"] = refusals["profile_refused"]
    if args.json:
        write_json(info, out)
    else:
        print(format_text(info), file=out)
        if refusals["refused"]:
            print(f"Working directory: REFUSED here: {refusals['refused']}", file=out)
        if refusals["profile_refused"]:
            print(f"Profile: REFUSED: {refusals['profile_refused']}", file=out)
    return 0


def cmd_sandbox_check(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    """0 when a sandboxed call from here with the profile would start, else 1 (and why)."""
    from registry_core.sandbox import load_profile
    from registry_core.sandbox.contain import find_bwrap

    profile = load_profile(env, args.profile)
    refusals = _refusals(env, profile, find_bwrap(env))
    for warning in profile.warnings:
        print(f"{profile.source}: warning: {warning}", file=out)
    problems = [r for r in (refusals["refused"], refusals["profile_refused"]) if r]
    for problem in problems:
        print(f"REFUSED: {problem}", file=out)
    if not problems:
        print(f"{profile.source}: ok: calls from {refusals['path']} may run with it", file=out)
    return 1 if problems else 0


def register(sub: Any) -> None:
    p = sub.add_parser("sandbox", help="inspect sandbox profiles")
    inner = p.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
    show = inner.add_parser("show", help="effective rules after template expansion")
    show.add_argument("--profile", default="default")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_sandbox_show)
    check = inner.add_parser(
        "check",
        help="would a call from this directory with the profile be refused? (exit 1 if so)",
    )
    check.add_argument("--profile", default="default")
    check.set_defaults(func=cmd_sandbox_check)
