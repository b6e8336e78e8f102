"""Refuse a sandbox whose rules would let the tool replace the broker's socket.

Whoever can write the directory holding the broker socket can rename the
real socket away and bind its own there, then answer ``elevate`` requests
(and collect passwords) in the broker's place.  So before a sandboxed call
runs, every ``rw``/``rwx`` rule is compared with the socket's directory: a
rule at that directory or at any directory above it (a Landlock rule covers
everything beneath its path) refuses the call with
:class:`~registry_core.errors.BrokerSocketExposedError`, naming the profile,
the rule and the socket.  Paths are compared after resolving symlinks, as the
kernel does when the rule is installed.

Rules *below* the socket's directory are harmless here: they cannot rename
or remove entries of the directory itself.  Under the namespace sandbox the
``{TMPDIR}`` rule names the tool's private ``/tmp`` (a fresh directory bound
there), not the host's, so the dispatcher passes it as ``private``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

from registry_core import paths
from registry_core.errors import BrokerSocketExposedError, SandboxError
from registry_core.sandbox.profiles import Access
from registry_core.sandbox.rules import EffectiveRules, PathRule

_WRITABLE = (Access.RW, Access.RWX)


def _covers(rule_path: str, directory: str) -> bool:
    return directory == rule_path or directory.startswith(rule_path.rstrip("/") + "/")


def exposing_rule(
    rules: EffectiveRules, socket: Path, private: Collection[str] = ()
) -> PathRule | None:
    """The first writable rule at or above ``socket``'s directory, if any.

    ``private``: rule paths that do not name the host's directory of that name
    (the namespace sandbox's private ``/tmp``, a fresh directory per call)."""
    directory = os.path.realpath(socket.parent)
    for rule in rules.paths:
        if rule.access not in _WRITABLE or rule.path in private:
            continue
        try:
            real = os.path.realpath(rule.path)
        except OSError as exc:  # a path inside the working directory changing under us
            raise SandboxError(f"cannot resolve {rule.path} of {rules.source}: {exc}") from exc
        if _covers(real, directory):
            return rule
    return None


def refuse_exposed_socket(
    rules: EffectiveRules, socket: Path, private: Collection[str] = ()
) -> None:
    """Raise :class:`BrokerSocketExposedError` when ``rules`` make ``socket``'s
    directory writable for the tool."""
    rule = exposing_rule(rules, socket, private)
    if rule is not None:
        raise BrokerSocketExposedError(
            rules.profile, rules.source, rule.path, rule.access.value, rule.origin, str(socket)
        )


def guard_broker_socket(
    rules: EffectiveRules, env: Mapping[str, str], private: Collection[str] = ()
) -> None:
    """The dispatcher's check: the configured broker socket (``$OLLIE_ELEVATE_SOCKET``
    or the default) and the runtime directory where in-process brokers put theirs."""
    refuse_exposed_socket(rules, paths.elevate_socket(env), private)
    refuse_exposed_socket(rules, paths.runtime_dir(env) / "ollie" / "elevate.sock", private)
