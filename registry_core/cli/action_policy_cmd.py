"""``ollie-tools policy actions`` / ``forget-action``: remembered answers to agents' actions.

The rules ``ollie-approve``'s dialogs remembered (``action-policies.json``
beside ``policies.yaml``), through the same store the broker uses, so a
running broker sees a change before its next decision.  Session rules live
only inside the broker.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any, TextIO

from registry_core.cli.render import table
from registry_core.paths import policies_file


def _store(env: dict[str, str]) -> Any:
    from registry_core.broker.remember.action_rules import RULES_FILE, ActionRuleStore

    def warn(message: str) -> None:
        print(f"ollie-tools: warning: {message}", file=sys.stderr)

    return ActionRuleStore(policies_file(env).parent / RULES_FILE, on_problem=warn)


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def cmd_actions(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    rules = _store(env).rules()
    if args.json:
        json.dump([rule.to_json() for rule in rules], out, indent=2)
        out.write("\n")
        return 0
    if not rules:
        print("no remembered answers to agents' actions", file=out)
        return 0
    rows = [
        [r.decision.value, r.agent, r.tool, r.kind.value, r.pattern, _when(r.expires)]
        for r in rules
    ]
    print(table(rows, ["decision", "agent", "tool", "kind", "pattern", "expires"]), file=out)
    return 0


def cmd_forget(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    if not (args.all or args.agent or args.tool or args.pattern):
        print("ollie-tools policy forget-action: say what to forget, or --all", file=sys.stderr)
        return 2
    dropped = _store(env).forget(args.agent, args.tool, args.pattern)
    if not dropped:
        print("ollie-tools policy forget-action: nothing matched", file=sys.stderr)
        return 1
    for rule in dropped:
        print(f"forgot: {rule.describe()}", file=out)
    return 0


_FOR = {"15m": "15m", "1h": "1h", "always": "always"}


def cmd_add(args: argparse.Namespace, env: dict[str, str], out: TextIO) -> int:
    """Remember an answer for an agent's action, as a dialog's "remember" would."""
    from registry_core.broker.question import Remember
    from registry_core.broker.wire.messages import PatternKind

    if args.deny and args.duration != "always":
        print("ollie-tools policy add-action: a deny is always; drop --for", file=sys.stderr)
        return 2
    for name in ("agent", "tool", "pattern"):
        value = getattr(args, name)
        if not value.strip() or not value.isprintable():
            print(
                f"ollie-tools policy add-action: --{name} must be printable text, got {value!r}",
                file=sys.stderr,
            )
            return 2
    remember = Remember.DENY_ALWAYS if args.deny else Remember(_FOR[args.duration])
    rule = _store(env).remember(
        args.agent, args.tool, PatternKind(args.kind), args.pattern, remember
    )
    if rule is None:  # only "once" stores nothing, and it is never offered here
        return 1
    until = f" until {_when(rule.expires)}" if rule.expires is not None else ""
    print(f"remembered: {rule.describe()}{until}", file=out)
    return 0


def register(inner: Any) -> None:
    """Add ``actions``, ``add-action`` and ``forget-action`` to ``ollie-tools policy``."""
    q = inner.add_parser("actions", help="remembered answers to agents' own actions")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_actions)
    q = inner.add_parser("add-action", help="remember an answer for an agent's action")
    q.add_argument("--agent", required=True, help="the agent (e.g. claude-code, codex)")
    q.add_argument("--tool", required=True, help="the agent's tool (e.g. Bash, Write)")
    q.add_argument(
        "--kind",
        choices=("program", "path", "exact"),
        default="program",
        help="what the pattern covers: a command's program, a file or directory "
        "(ending in /), or exactly this text (default program)",
    )
    q.add_argument("--pattern", required=True, help="e.g. git, /home/me/project/, ls -la")
    verdict = q.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--allow", action="store_true", help="allow without asking")
    verdict.add_argument("--deny", action="store_true", help="always deny")
    q.add_argument(
        "--for",
        dest="duration",
        choices=tuple(_FOR),
        default="always",
        help="how long an allow stands (default always)",
    )
    q.set_defaults(func=cmd_add)
    q = inner.add_parser("forget-action", help="forget remembered answers to agents' actions")
    q.add_argument("--agent", help="only this agent (e.g. claude-code)")
    q.add_argument("--tool", help="only this agent tool (e.g. Bash)")
    q.add_argument("--pattern", help="only this pattern")
    q.add_argument("--all", action="store_true", help="forget every stored action rule")
    q.set_defaults(func=cmd_forget)
