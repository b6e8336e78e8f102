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


def register(inner: Any) -> None:
    """Add ``actions`` and ``forget-action`` to ``ollie-tools policy``."""
    q = inner.add_parser("actions", help="remembered answers to agents' own actions")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_actions)
    q = inner.add_parser("forget-action", help="forget remembered answers to agents' actions")
    q.add_argument("--agent", help="only this agent (e.g. claude-code)")
    q.add_argument("--tool", help="only this agent tool (e.g. Bash)")
    q.add_argument("--pattern", help="only this pattern")
    q.add_argument("--all", action="store_true", help="forget every stored action rule")
    q.set_defaults(func=cmd_forget)
