"""``ollie-elevate -- <bash code>``: ollie-core's ``x/elevate`` plugin, backed by our broker.

ollie-core runs ``$OLLIE_PLUGINS_PATH/elevate -- <code>`` from the session's
working directory and reads stdout, stderr and the exit status.  We ask the
broker (an elevated ``execute_code`` request showing the full code); on
approval bash runs the code outside the sandbox with this process's stdio,
and we exit with its status.  A denial exits 77 with the reason on stderr.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from registry_core.dispatch.gate import ElevationRequest, Kind
from registry_core.elevation.gates import InProcessGate, choose_gate
from registry_core.elevation.messages import REQUEST_CODE_TOOL
from registry_core.errors import ElevationDeniedError

EXIT_DENIED = 77
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if len(args) != 1 or not args[0].strip():
        print("usage: ollie-elevate -- '<bash code>'", file=sys.stderr)
        return EXIT_USAGE
    code = args[0]
    bash = shutil.which("bash") or "/bin/bash"
    argv_run = [bash, "-c", code]
    env = dict(os.environ)
    gate = choose_gate(env)
    request = ElevationRequest(
        REQUEST_CODE_TOOL, Kind.SANDBOX, tuple(argv_run), {}, os.getcwd(), code
    )
    try:
        gate.authorize(request)
    except ElevationDeniedError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_DENIED
    finally:
        if isinstance(gate, InProcessGate):
            gate.close()
    completed = subprocess.run(argv_run, check=False)
    return completed.returncode


def main_entry() -> None:
    sys.exit(main())
