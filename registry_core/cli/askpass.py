"""``ollie-askpass``: the ``SUDO_ASKPASS`` program of the credential gate.

sudo runs it (as the invoking user, with the prompt as its first argument)
when it needs a password.  It presents the grant token from ``OLLIE_GRANT``
to the broker, which asks the person, and writes the password to stdout,
the pipe sudo reads.  The password is never logged, and the process is
made non-dumpable so it cannot be read from a core file or by ptrace.

Order matters: the broker reads ``/proc/<pid>/ns/*`` of each peer when it
connects, to tell a requester inside a sandbox apart (a peer it cannot read
counts as sandboxed and gets no password).  A non-dumpable process's
namespaces are unreadable to a non-root broker, so askpass first connects
and pings (the pong proves the broker has identified it), and only then
makes itself non-dumpable, before it asks for the password.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
from collections.abc import Sequence

from registry_core import paths
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import APPROVAL_WAIT, WAIT_ENV, BrokerClient
from registry_core.cli.argparser import add_version
from registry_core.dispatch.broker_gate import GRANT_ENV
from registry_core.errors import BrokerUnavailableError
from registry_core.logsetup import setup_logging
from registry_core.secure import harden_process

_INFO_OPTIONS = ("-h", "--help", "--version")


def build_parser() -> argparse.ArgumentParser:
    """The parser behind ``--help``, ``--version`` and the manual page.

    sudo runs ``ollie-askpass PROMPT`` with any prompt text, so the program
    never parses its argument as options: only a lone ``-h``, ``--help`` or
    ``--version`` is taken as one.
    """
    parser = argparse.ArgumentParser(
        prog="ollie-askpass",
        description="The SUDO_ASKPASS program of Ollie's credential gate: sudo runs it to ask "
        "the person (through the Ollie tray or broker) for a password, for an approved request "
        f"only (its grant token is in ${GRANT_ENV}). Not meant to be run by hand.",
    )
    parser.add_argument("prompt", nargs="?", default="Password: ", help="the prompt sudo shows")
    add_version(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file, even before the ping
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0] in _INFO_OPTIONS:
        try:
            build_parser().parse_args(args)
        except SystemExit as done:  # help and version print and exit 0
            return int(done.code or 0)
    prompt = args[0] if args else "Password: "
    grant = os.environ.get(GRANT_ENV, "")
    if not grant:
        print(f"ollie-askpass: no {GRANT_ENV} in the environment: refusing", file=sys.stderr)
        return 1
    socket_path = paths.elevate_socket(os.environ)
    try:
        wait = float(os.environ.get(WAIT_ENV, "") or APPROVAL_WAIT)
    except ValueError:
        wait = APPROVAL_WAIT
    if not 0 < wait <= m.MAX_TIMEOUT:
        wait = APPROVAL_WAIT
    try:
        with BrokerClient(socket_path) as client:
            client.ping()  # the broker has read our /proc entries once this returns
            harden_process()
            reply = client.askpass(grant, prompt, wait=wait)
    except BrokerUnavailableError as exc:
        print(f"ollie-askpass: {exc}", file=sys.stderr)
        return 1
    if isinstance(reply, m.PasswordReply):
        sys.stdout.write(reply.password + "\n")
        sys.stdout.flush()
        return 0
    if isinstance(reply, m.ErrorReply):
        print(f"ollie-askpass: {reply.code}: {reply.message}", file=sys.stderr)
    elif isinstance(reply, m.DecisionReply):
        print(f"ollie-askpass: {reply.reason}", file=sys.stderr)
    return 1


def main_entry() -> None:
    setup_logging()
    sys.exit(main())
