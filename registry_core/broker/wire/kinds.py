"""The kinds of elevation (kept apart from the protocol messages: the dispatcher
names them on every call, and needs nothing else of the protocol to run a sandboxed tool)."""

from __future__ import annotations

import enum


class Kind(enum.StrEnum):
    """What an ``elevate`` request asks for."""

    SANDBOX = "sandbox"  # run outside Landlock, still as the current user
    SUDO = "sudo"  # run as root through ``sudo -A`` (implies leaving the sandbox)
