"""The registry of another host, as that host resolved it (``ollie-tools dump`` over ssh).

Used by ``ollie-remote dump`` and the Tool Browser's host selector.  The
remote ``ollie-tools`` is found where ``deploy`` found it (recorded in
``remote-hosts.json``), else on the remote PATH, else in ``~/.local/bin``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from registry_core.errors import RemoteError
from registry_core.registry import Registry
from registry_core.registry.serialize import registry_from_dump
from registry_core.remote.deploy import remote_tools_script
from registry_core.remote.ssh import SshTarget, last_words
from registry_core.remote.state import deployed_hosts


def fetch_dump(target: SshTarget, env: Mapping[str, str], timeout: float = 60.0) -> Any:
    """The parsed output of ``ollie-tools dump --json`` on ``target``."""
    record = next((h for h in deployed_hosts(env) if h.host == target.host), None)
    script = remote_tools_script(
        record.ollie_tools if record else "",
        ["dump", "--json"],
        record.remote_path if record else None,
    )
    out = target.run(script, what=f"ollie-tools dump on {target.host}", timeout=timeout)
    if out.returncode != 0:
        err = last_words(out.stderr.decode("utf-8", "replace"))
        raise RemoteError(f"ollie-tools dump on {target.host} failed: {err or out.returncode}")
    try:
        return json.loads(out.stdout)
    except ValueError as exc:
        raise RemoteError(f"ollie-tools dump on {target.host} printed no JSON: {exc}") from exc


def fetch_registry(target: SshTarget, env: Mapping[str, str]) -> Registry:
    """``target``'s registry (read-only: its paths are paths on that host)."""
    try:
        return registry_from_dump(fetch_dump(target, env))
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteError(f"{target.host} sent a registry this version cannot read: {exc}") from exc
