"""Elevation gates for the dispatcher: through a running broker, or an in-process one.

:class:`BrokerGate` asks the broker on a socket.  When none is listening,
:func:`in_process_gate` starts a private broker (its own socket in a fresh
0700 directory under the runtime directory, never in ``$TMPDIR``, in a
background thread) with the spec's fallback front-ends
(kdialog → zenity → terminal), so the sudo credential gate works the same
way.  With no front-end at all, every request is denied (fail closed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from registry_core import paths
from registry_core.broker.serve.listen import make_private_dirs
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import (
    APPROVAL_WAIT,
    WAIT_ENV,
    BrokerClient,
    BrokerRefusedError,
    BrokerState,
    examine_broker,
)
from registry_core.dispatch.gate import Authorization, ElevationRequest, RefusingGate
from registry_core.dispatch.lazy_gate import LazyGate
from registry_core.errors import BrokerUnavailableError, ElevationDeniedError
from registry_core.secure import harden_process

GRANT_ENV = "OLLIE_GRANT"


class BrokerGate:
    """Ask the broker listening on ``path``; any failure to get an answer is a denial.

    ``timeout``: how long a person may take to decide (sent with the request;
    the client stops waiting for the broker a margin after it).
    """

    def __init__(
        self, path: Path, *, host: str | None = None, timeout: float | None = None
    ) -> None:
        self.path = path
        self.host = host
        self.timeout = APPROVAL_WAIT if timeout is None else timeout

    def connect(self) -> BrokerClient:
        """The connection one request is asked on (a subclass may keep hold of it)."""
        return BrokerClient(self.path)

    def close(self) -> None:
        """Nothing is held between requests: each one has a connection of its own."""

    def authorize(self, request: ElevationRequest) -> Authorization:
        try:
            with self.connect() as client:
                reply = client.elevate(
                    request.tool,
                    request.kind,
                    list(request.argv),
                    request.args,
                    request.cwd,
                    code=request.code,
                    host=self.host,
                    timeout=request.timeout if request.timeout is not None else self.timeout,
                    client=request.client,
                )
        except BrokerRefusedError as exc:  # names the cap: "broker refused: ... (limit N)"
            raise ElevationDeniedError(str(exc)) from exc
        except BrokerUnavailableError as exc:
            raise ElevationDeniedError(f"broker unreachable: {exc}") from exc
        if isinstance(reply, m.ErrorReply):
            raise ElevationDeniedError(f"{reply.code}: {reply.message}")
        if reply.decision is not m.Decision.ALLOW:
            raise ElevationDeniedError(reply.reason)
        env = {"OLLIE_ELEVATE_SOCKET": str(self.path), WAIT_ENV: f"{self.timeout:g}"}
        if reply.grant:
            env[GRANT_ENV] = reply.grant
        return Authorization(reason=reply.reason, grant=reply.grant, env=env)

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        try:
            with BrokerClient(self.path) as client:
                reply = client.sudo_result(grant, exit_code, auth_failed)
        except BrokerUnavailableError:
            return None
        if isinstance(reply, m.DecisionReply) and reply.decision is not m.Decision.ALLOW:
            return reply.reason
        return None


class InProcessBroker:
    """A private broker in a background thread, for one command's lifetime."""

    def __init__(self, env: Mapping[str, str], prompter_name: str | None = None) -> None:
        from registry_core.broker.headless import build_broker
        from registry_core.broker.serve.server import BrokerServer

        # This process will hold the sudo password: no core dumps, no ptrace.
        harden_process()
        # Imported here: an agent's call that needs no in-process broker starts faster.
        import asyncio
        import tempfile
        import threading

        # Never in $TMPDIR (a sandboxed tool may write there and could swap the
        # socket): a fresh 0700 directory beside the broker's own socket directory.
        parent = paths.runtime_dir(env) / "ollie"
        make_private_dirs(parent)
        self._dir = Path(tempfile.mkdtemp(prefix="broker-", dir=parent))
        os.chmod(self._dir, 0o700)  # pragma: no mutate (mkdtemp made it 0700: defence only)
        self.path = self._dir / "elevate.sock"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="ollie-broker"
        )
        self._thread.start()

        async def start() -> BrokerServer:
            broker = build_broker(env, prompter_name, resident=False)
            server = BrokerServer(broker, self.path)
            await server.start()
            return server

        self._server = asyncio.run_coroutine_threadsafe(start(), self._loop).result()

    @property
    def prompter_name(self) -> str:
        return self._server.broker.prompter.name

    def close(self) -> None:
        with contextlib.suppress(Exception):
            import asyncio

            asyncio.run_coroutine_threadsafe(self._server.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class InProcessGate(BrokerGate):
    def __init__(self, broker: InProcessBroker) -> None:
        super().__init__(broker.path)
        self.broker = broker

    def close(self) -> None:
        self.broker.close()


def choose_gate(
    env: Mapping[str, str], host: str | None = None, timeout: float | None = None
) -> BrokerGate | RefusingGate:
    """The running broker if one answers, else an in-process one, else a refusal.

    ``host`` is sent with each request (this machine's name, for a broker that
    may sit at the other end of an ollie-remote forward); ``timeout`` is how long
    a person may take.  A broker that holds the socket but does not answer
    (stopped, hung) is a refusal naming that, never replaced by another; so is one
    that refuses this process at one of its caps (the refusal names the cap)."""
    path = paths.elevate_socket(env)
    state, why = examine_broker(path)
    if state is BrokerState.ALIVE:
        return BrokerGate(path, host=host, timeout=timeout)
    if state is BrokerState.REFUSED:
        return RefusingGate(f"{why} (the elevation broker on {path})")
    if state is BrokerState.NOT_RESPONDING:
        return RefusingGate(
            f"the elevation broker on {path} is not responding (stopped or hung?): "
            "denied; restart it (ollie-tray or ollie-broker)"
        )
    from registry_core.broker.ask.choose import fallback_chain

    if not fallback_chain(env):
        return RefusingGate(
            f"no elevation broker on {path} and no front-end (kdialog, zenity, terminal) can ask"
        )
    gate = InProcessGate(InProcessBroker(env))
    gate.timeout = APPROVAL_WAIT if timeout is None else timeout
    return gate


__all__ = ["BrokerGate", "InProcessBroker", "InProcessGate", "LazyGate", "choose_gate"]
