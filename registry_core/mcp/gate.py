"""The elevation gate of the MCP server: the running broker, or a refusal.

``ollie-tools call`` may start a private broker whose terminal front-end asks
on the terminal; the MCP server's stdin and stdout belong to the protocol, so
it never asks by itself: an elevated or sudo call needs a running broker (the
tray or ``ollie-broker``), and without one it is refused with a reason saying
so.  The broker is looked up per call, so starting the tray later just works.

Calls run on worker threads; each binds its :class:`CallCanceller` first, so
an approval that arrives after the client cancelled is turned into a denial
(and a sudo grant handed back unused).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from registry_core import paths
from registry_core.broker.wire.client import BrokerClient, broker_alive, broker_label
from registry_core.dispatch.broker_gate import BrokerGate
from registry_core.dispatch.gate import Authorization, ElevationRequest
from registry_core.errors import ElevationDeniedError
from registry_core.mcp.cancel import CANCELLED, CallCanceller


class _WithdrawableGate(BrokerGate):
    """A :class:`BrokerGate` whose connection the call's cancel ends."""

    def __init__(self, path: Path, host: str | None, canceller: CallCanceller | None) -> None:
        super().__init__(path, host=host)
        self._canceller = canceller

    def connect(self) -> BrokerClient:
        client = super().connect()
        if self._canceller is not None:
            self._canceller.on_cancel(client.abort)
        return client


class McpGate:
    def __init__(self, env: Mapping[str, str], host: str | None = None) -> None:
        self._path = paths.elevate_socket(env)
        self._host = host
        self._local = threading.local()

    def bind(self, canceller: CallCanceller) -> None:
        """The canceller of the call this thread is about to run."""
        self._local.canceller = canceller

    def _cancelled(self) -> bool:
        canceller: CallCanceller | None = getattr(self._local, "canceller", None)
        return canceller is not None and canceller.cancelled

    def authorize(self, request: ElevationRequest) -> Authorization:
        if self._cancelled():
            raise ElevationDeniedError(CANCELLED)
        if not broker_alive(self._path):
            raise ElevationDeniedError(
                f"no elevation broker answers on {self._path}: start ollie-tray or ollie-broker "
                "(the MCP server cannot ask on its own stdin/stdout)"
            )
        canceller: CallCanceller | None = getattr(self._local, "canceller", None)
        if canceller is not None:
            canceller.approver = broker_label(self._path)
            canceller.awaiting_approval = True
        try:
            grant = _WithdrawableGate(self._path, self._host, canceller).authorize(request)
        finally:
            if canceller is not None:
                canceller.awaiting_approval = False
        if self._cancelled():
            if grant.grant:
                self.report_sudo(grant.grant, 1, False)
            raise ElevationDeniedError(CANCELLED)
        return grant

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        return BrokerGate(self._path, host=self._host).report_sudo(grant, exit_code, auth_failed)

    def close(self) -> None:
        """Nothing is held: every request connects on its own."""
