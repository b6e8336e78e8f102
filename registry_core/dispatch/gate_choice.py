"""The elevation gate and askpass program a command-line call uses."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from registry_core.dispatch import ElevationGate
from registry_core.dispatch.gate import ASKPASS
from registry_core.dispatch.lazy_gate import LazyGate
from registry_core.paths import own_program

# protocol.md §6.2: what an elevate request's ``host`` may hold.
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")


def this_host() -> str | None:
    """This machine's name as requests carry it (``None`` if the protocol cannot)."""
    name = os.uname().nodename  # what socket.gethostname() returns, without importing it
    return name if _HOST_RE.fullmatch(name) else None


def make_gate(env: Mapping[str, str], timeout: float | None = None) -> ElevationGate:
    """Nothing is contacted until a call needs elevation.

    Requests carry this machine's name: on a remote host the broker at the other
    end of the ollie-remote forward shows it (as the host's claim; the broker
    names the host from its own record).  ``timeout``: how long a person may take
    to decide (the client gives the broker a margin beyond it, then denies)."""
    return LazyGate(env, host=this_host(), timeout=timeout)


def askpass_program() -> str | None:
    """``ollie-askpass`` of Ollie's own installation (next to this interpreter), never
    one on ``PATH``: sudo hands it the grant, and it asks for the password.  ``None``
    when missing: the dispatcher then refuses sudo tools (``require_askpass``)."""
    return own_program(ASKPASS)
