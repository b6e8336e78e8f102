"""``ollie-askpass``: the ``SUDO_ASKPASS`` program of the credential gate.

sudo runs it (as the invoking user, with the prompt as its first argument)
when it needs a password.  It presents the grant token from ``OLLIE_GRANT``
to the broker, which asks the person, and writes the password to stdout,
the pipe sudo reads.  The password is never logged, and the process is
made non-dumpable so it cannot be read from a core file or by ptrace.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from registry_core import paths
from registry_core.elevation import messages as m
from registry_core.elevation.client import APPROVAL_WAIT, WAIT_ENV, BrokerClient
from registry_core.elevation.gates import GRANT_ENV
from registry_core.errors import BrokerUnavailableError
from registry_core.secure import harden_process


def main(argv: Sequence[str] | None = None) -> int:
    harden_process()
    args = list(sys.argv[1:] if argv is None else argv)
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
    sys.exit(main())
