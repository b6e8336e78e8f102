"""``ollie-tools policy ...`` (remembered elevation decisions) and ``ollie-tools audit``.

Policies are read from and written to ``policies.yaml`` through the same
:class:`PolicyStore` the broker uses, so a running broker picks the change up
before its next decision.  Session policies live only inside the broker and
are not listed here.  Exit codes: 0 done, 1 an error or nothing to revoke,
2 usage.
"""

from __future__ import annotations

import argparse
import datetime as dt
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from registry_core.broker.question import Remember
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.cli.jsonout import write_json
from registry_core.cli.render import table
from registry_core.errors import OllieError, PolicyError
from registry_core.paths import audit_file, policies_file, scan_cache_dir, tools_path

if TYPE_CHECKING:
    from registry_core.broker.record.audit import AuditRecord
    from registry_core.broker.remember.policies import Policy, PolicyStore
    from registry_core.registry import Registry

# The policy store, audit log and registry are imported by the handlers that use
# them, so other `ollie-tools` commands start without them.

EXIT_ERROR = 1
EXIT_USAGE = 2
DEFAULT_TAIL = 20
FORCE_HELP = "remember the rule even if no tool of that name is known here (says so)"
ALLOW_CHOICES = (Remember.MINUTES_15.value, Remember.HOUR.value, Remember.ALWAYS.value)


def this_host() -> str:
    """The host name policies default to (the broker uses the same)."""
    return socket.gethostname()


def _warn(message: str) -> None:
    print(f"ollie-tools: warning: {message}", file=sys.stderr)


def _store(env: dict[str, str]) -> PolicyStore:
    from registry_core.broker.remember.policies import PolicyStore

    return PolicyStore(policies_file(env), on_problem=_warn)


def _fail(command: str, message: object, code: int = EXIT_ERROR) -> int:
    print(f"ollie-tools {command}: {message}", file=sys.stderr)
    return code


def expires_text(policy: Policy, now: float) -> str:
    """ "never", "session", "expired", "in 45 s", "in 14 min", "in 2 h 5 min", "in 3 days"."""
    if policy.remember is Remember.SESSION:
        return "session"
    if policy.expires is None:
        return "never"
    left = policy.expires - now
    if left <= 0:
        return "expired"
    if left < 60:
        return f"in {int(left) or 1} s"
    minutes = int(left // 60)
    if minutes < 60:
        return f"in {minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours >= 48:
        return f"in {hours // 24} days"
    return f"in {hours} h {rest} min" if rest else f"in {hours} h"


def policies_text(policies: list[Policy], now: float) -> str:
    if not policies:
        return "no remembered policies"
    rows = []
    for p in policies:
        if p.decision is Decision.DENY:
            binding = "any executable"
        else:
            binding = f"{p.executable} (sha256 {(p.sha256 or '')[:12]})"
        rows.append([p.tool, p.kind.value, p.host, p.decision.value, expires_text(p, now), binding])
    return table(rows, ["TOOL", "KIND", "HOST", "DECISION", "EXPIRES", "EXECUTABLE"])


def cmd_policy_list(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    policies = _store(env).list()
    if args.json:
        write_json([p.to_json() for p in policies], out)
    else:
        print(policies_text(policies, time.time()), file=out)
    return 0


def known_tool(env: dict[str, str], name: str, *, force: bool) -> bool:
    """Whether the registry knows ``name`` (in any state: available, hidden, broken).

    ``allow`` and ``deny`` both ask this first (``policy_build.check_known``): a
    rule for a tool nobody has is almost always a typo, so it is refused unless
    ``force``, and then the person is told the tool is unknown.
    """
    from registry_core.broker.remember.policy_build import UnknownToolError, check_known

    try:
        check_known(_registry(env), name, ":".join(str(d) for d in tools_path(env)))
    except UnknownToolError as exc:
        if not force:
            raise
        where = ":".join(str(d) for d in tools_path(env))
        _warn(f"no tool named {exc.name!r} in {where}: remembering the rule for an unknown tool")
        return False
    return True


def _registry(env: dict[str, str]) -> Registry:
    from registry_core.registry import RegistryLoader

    return RegistryLoader(tools_path(env), env, cache_dir=scan_cache_dir(env)).load()


def cmd_policy_allow(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.broker.remember.policy_build import allow_policy

    try:
        if not known_tool(env, args.tool, force=args.force):
            raise PolicyError(
                f"an allow is bound to the tool's executable and its sha256: "
                f"{args.tool!r} has none here"
            )
        policy = allow_policy(
            _registry(env),
            args.tool,
            kind=Kind(args.kind) if args.kind else None,
            host=args.host or this_host(),
            remember=Remember(args.duration),
            now=time.time(),
        )
        _store(env).set(policy)
    except OllieError as exc:
        return _fail("policy allow", exc)
    print(f"remembered: {policy.describe()}", file=out)
    return 0


def cmd_policy_deny(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.broker.remember.policy_build import deny_policies

    try:
        known_tool(env, args.tool, force=args.force)
        store = _store(env)
        kind = Kind(args.kind) if args.kind else None
        for policy in deny_policies(
            args.tool, kind=kind, host=args.host or this_host(), now=time.time()
        ):
            store.set(policy)
            print(f"remembered: {policy.describe()}", file=out)
    except OllieError as exc:
        return _fail("policy deny", exc)
    return 0


def cmd_policy_revoke(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    if args.all == bool(args.tool) or (args.all and (args.kind or args.host)):
        return _fail("policy revoke", "give either TOOL [--kind K] [--host H] or --all", EXIT_USAGE)
    try:
        store = _store(env)
        count = store.revoke_all() if args.all else store.revoke(args.tool, args.kind, args.host)
    except OllieError as exc:
        return _fail("policy revoke", exc)
    if count == 0:
        what = "no remembered policies" if args.all else f"no remembered policy for {args.tool}"
        filters = [f"kind {args.kind}"] * bool(args.kind) + [f"host {args.host}"] * bool(args.host)
        return _fail("policy revoke", what + (f" ({', '.join(filters)})" if filters else ""))
    print(f"revoked {count} polic{'y' if count == 1 else 'ies'}", file=out)
    return 0


def audit_text(records: list[AuditRecord]) -> str:
    if not records:
        return "no audit records"
    rows = [
        [
            dt.datetime.fromtimestamp(r.time).strftime("%Y-%m-%d %H:%M:%S"),
            r.tool,
            r.kind.value,
            r.host,
            r.decision.value,
            r.by.value,
            r.requester.label(),
        ]
        for r in records
    ]
    return table(rows, ["TIME", "TOOL", "KIND", "HOST", "DECISION", "BY", "REQUESTER"])


def cmd_audit(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    from registry_core.broker.record.audit import audit_log_from_env

    try:
        tail = audit_log_from_env(audit_file(env), env).read_tail(args.tail)
    except OllieError as exc:
        return _fail("audit", exc)
    if tail.skipped:
        _warn(f"skipped {tail.skipped} corrupt line(s) in {audit_file(env)}")
    if tail.lost:
        _warn(f"{tail.lost} decision(s) could not be recorded (gap lines in {audit_file(env)})")
    if args.json:
        write_json([r.to_json() for r in tail.records], out)
    else:
        print(audit_text(list(tail.records)), file=out)
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(sub: Any) -> None:
    """Add ``policy`` and ``audit`` to the ``ollie-tools`` subcommands."""
    p = sub.add_parser("policy", help="list, add and revoke remembered elevation decisions")
    inner = p.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    kinds = [k.value for k in Kind]

    q = inner.add_parser("list", help="remembered policies (session ones live in the broker)")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_policy_list)

    q = inner.add_parser("allow", help="always (or for a while) allow a tool's elevation")
    q.add_argument("tool")
    q.add_argument("--kind", choices=kinds, help="default: sudo for sudo tools, else sandbox")
    q.add_argument("--for", dest="duration", choices=ALLOW_CHOICES, default="always")
    q.add_argument("--host", help="host the policy is for (default: this host)")
    q.add_argument("--force", action="store_true", help=FORCE_HELP)
    q.set_defaults(func=cmd_policy_allow)

    q = inner.add_parser("deny", help="always deny a tool's elevation")
    q.add_argument("tool")
    q.add_argument("--kind", choices=kinds, help="default: both sandbox and sudo")
    q.add_argument("--host", help="host the policy is for (default: this host)")
    q.add_argument("--force", action="store_true", help=FORCE_HELP)
    q.set_defaults(func=cmd_policy_deny)

    q = inner.add_parser("revoke", help="forget remembered policies")
    q.add_argument("tool", nargs="?")
    q.add_argument("--kind", choices=kinds, help="only this kind (default: all)")
    q.add_argument("--host", help="only this host (default: all hosts)")
    q.add_argument("--all", action="store_true", help="forget every policy")
    q.set_defaults(func=cmd_policy_revoke)

    from registry_core.cli import action_policy_cmd

    action_policy_cmd.register(inner)

    p = sub.add_parser("audit", help="the last elevation decisions (newest last)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--tail", type=_positive, default=DEFAULT_TAIL, metavar="N")
    p.set_defaults(func=cmd_audit)
