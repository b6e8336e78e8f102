"""The gate an agent's call holds: it picks a real one only when a call needs elevation.

Kept apart from :mod:`registry_core.dispatch.broker_gate` so that a call of a
sandboxed tool, which never asks anyone, does not import the protocol client.
"""

from __future__ import annotations

from collections.abc import Mapping

from registry_core.dispatch.gate import Authorization, ElevationGate, ElevationRequest


class LazyGate:
    """Chooses (and starts) a gate only when a call actually needs elevation."""

    def __init__(
        self, env: Mapping[str, str], host: str | None = None, timeout: float | None = None
    ) -> None:
        self._env = dict(env)
        self._host = host
        self._timeout = timeout
        self._gate: ElevationGate | None = None

    def _chosen(self) -> ElevationGate:
        if self._gate is None:
            from registry_core.dispatch.broker_gate import choose_gate

            self._gate = choose_gate(self._env, self._host, self._timeout)
        return self._gate

    def authorize(self, request: ElevationRequest) -> Authorization:
        return self._chosen().authorize(request)

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        if self._gate is None:
            return None
        return self._gate.report_sudo(grant, exit_code, auth_failed)

    def close(self) -> None:
        if self._gate is not None:
            self._gate.close()  # an in-process broker stops with its command
        self._gate = None
