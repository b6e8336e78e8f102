"""``ollie-approve``: a person's yes (in the tray) for coding agents' own actions.

A Claude Code ``PreToolUse`` hook by default (``--json`` for the generic
contract; both in :mod:`registry_core.hook.tool_call` and ``docs/hooks.md``).
One tool call in, one decision out:

- the rules file (:mod:`registry_core.hook.scope`) says ``pass``: no decision,
  the agent's own prompt handles it (``ask`` in ``--json`` mode);
- else the action goes to the broker as an ``action`` request: the broker's
  ``allow`` → ``allow``, its ``deny`` → ``deny`` with the reason;
- anything that keeps us from getting an answer (no broker, a bad rules file,
  bad input, a protocol error, a path whose real file cannot be told) →
  ``ask``: the agent's own prompt, never a silent allow.

Exit status: 0 (Claude Code reads the JSON); with ``--json`` 77 on ``deny``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from registry_core import paths
from registry_core.broker.wire import messages as m
from registry_core.cli.argparser import add_version
from registry_core.errors import AgentActionError, BrokerUnavailableError
from registry_core.hook.actions import ActionFacts, action_facts
from registry_core.hook.formats import FORMATS, Decision, HookEvent, hook_format
from registry_core.hook.scope import Scope, load_rules, rules_path
from registry_core.hook.tool_call import CLAUDE_CODE, ToolCall
from registry_core.logsetup import setup_logging

DEFAULT_TIMEOUT = 55.0  # under Claude Code's 60 s hook timeout
MAX_STDIN = 8 * 1024 * 1024


def _request(call: ToolCall, facts: ActionFacts, timeout: float) -> m.ActionRequest:
    return m.ActionRequest(
        id=0,
        agent=call.agent,
        tool=call.tool,
        summary=facts.summary,
        input=facts.input,
        cwd=call.cwd,
        pattern_kind=facts.pattern_kind,
        pattern=facts.pattern,
        detail=facts.detail,
        display=facts.display,
        command=facts.command,
        path=facts.path,
        session=call.session,
        timeout=timeout,
    )


def ask_broker(
    socket_path: Path, call: ToolCall, facts: ActionFacts, timeout: float
) -> tuple[Decision, str]:
    """(decision, reason) from the broker; ``ask`` whenever none could be had."""
    from registry_core.broker.wire.client import BrokerClient

    request = _request(call, facts, timeout)
    try:
        request.encode()
    except m.MessageError as exc:
        if exc.error_code is not m.ErrorCode.FRAME_TOO_LARGE:
            return "ask", f"Ollie could not describe this action: {exc.message}"
        # Too big to send whole: the input box goes, the dialog keeps the command/diff.
        request = dataclasses.replace(request, input={"_note": "input too large to show"})
    try:
        with BrokerClient(socket_path) as client:
            reply = client.action(request)
    except BrokerUnavailableError as exc:
        return "ask", f"no Ollie broker to ask ({exc}); asking here instead: {facts.summary}"
    except m.MessageError as exc:
        return "ask", f"Ollie could not send this action: {exc.message}"
    if isinstance(reply, m.ErrorReply):
        return "ask", f"Ollie broker error {reply.code}: {reply.message}"
    if reply.decision is m.Decision.ALLOW:
        return "allow", f"approved in Ollie: {reply.reason}"
    return "deny", f"denied in Ollie: {reply.reason}"


def decide(
    call: ToolCall, env: dict[str, str], rules_file: Path, timeout: float
) -> tuple[Decision | None, str]:
    """(decision or ``None`` for "pass", reason)."""
    facts = action_facts(call.tool, call.input, call.cwd)
    if facts.path_problem is not None:
        # No rule, pattern or person judges a file nobody can name for sure.
        return "ask", f"Ollie cannot tell which file this is, asking here: {facts.path_problem}"
    try:
        rules = load_rules(rules_file)
    except AgentActionError as exc:
        return "ask", f"Ollie's rules file is broken, asking here: {exc}"
    scope, why = rules.decide(call.agent, facts)
    if scope is Scope.PASS:
        return None, f"left to the agent's own prompt ({why})"
    return ask_broker(paths.elevate_socket(env), call, facts, timeout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ollie-approve",
        description="Ask the person (in the Ollie tray) before a coding agent runs an action.",
    )
    add_version(parser)
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default=CLAUDE_CODE,
        help=f"the agent's hook contract (default {CLAUDE_CODE}; docs/hooks.md)",
    )
    parser.add_argument(
        "--json", action="store_true", help="same as --format json: generic JSON, exit 77 on deny"
    )
    parser.add_argument("--agent", help="agent name shown in the dialog (default: the format's)")
    parser.add_argument("--rules", type=Path, help="rules file (default approve-rules.yaml)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds to wait for the person (default {DEFAULT_TIMEOUT:g})",
    )
    return parser


def run(argv: Sequence[str] | None, stdin: TextIO, out: TextIO, env: dict[str, str]) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("install", "uninstall"):  # docs/agents/
        from registry_core.wiring.cli import run_approve

        return run_approve(argv, out, env)
    parser = build_parser()
    args = parser.parse_args(argv)
    if math.isnan(args.timeout):
        parser.error("--timeout must be a number of seconds (got nan)")
    rules_file = args.rules or rules_path(env)
    timeout = min(max(args.timeout, 1.0), m.MAX_TIMEOUT)
    text = stdin.read(MAX_STDIN)
    contract = hook_format("json" if args.json else args.format)
    decision: Decision | None
    event: HookEvent | None = None
    try:
        event = contract.parse(text, args.agent)
    except AgentActionError as exc:
        decision, reason = "ask", f"ollie-approve: {exc}"
    else:
        decision, reason = decide(event.call, env, rules_file, timeout)
    print(f"ollie-approve: {decision or 'pass'}: {reason}", file=sys.stderr)
    answer = contract.answer(event, decision, reason)
    out.write(answer.stdout)
    return answer.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, sys.stdin, sys.stdout, dict(os.environ))


def main_entry() -> None:
    setup_logging()
    sys.exit(main())
