"""The MCP server: handlers, live registry, calls on worker threads.

Threading/ordering: the SDK runs on an asyncio loop (one stdio session).
``tools/call`` runs the dispatcher on a worker thread, so several calls may
run at once and the loop keeps answering (progress, cancellation, other
requests).  The registry snapshot is shared: the loop's inotify reader and
the dispatcher's ``registry()`` both drain the watcher and refresh the
loader under one lock.  A changed listing (debounced, as the Tool Browser
does) sends ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import unicodedata
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession

from registry_core.dispatch import CallOptions, CallResult, Dispatcher
from registry_core.dispatch.dispatcher import DEFAULT_TIMEOUT
from registry_core.dispatch.gate_choice import askpass_program, this_host
from registry_core.errors import (
    ArgumentsError,
    ElevationDeniedError,
    OllieError,
    ToolChangedError,
    ToolNotFoundError,
)
from registry_core.mcp.cancel import CallCanceller
from registry_core.mcp.gate import McpGate
from registry_core.mcp.listing import ListedTools, ListingCache, listing_key
from registry_core.mcp.results import call_result, error_result
from registry_core.paths import scan_cache_dir, tools_path
from registry_core.registry import Registry, RegistryLoader
from registry_core.registry.watch import DirectoryWatcher

_log = logging.getLogger(__name__)

SERVER_NAME = "ollie-tools"
DEBOUNCE = 0.1
PROGRESS_INTERVAL = 1.0
MAX_CLIENT_LABEL = 128
INSTRUCTIONS = (
    "Tools of this computer's Ollie tool registry. Each call runs sandboxed; tools marked "
    "'asks for approval' run only after the person approves on their desktop."
)


def client_label(session: ServerSession) -> str | None:
    """The client's name from ``initialize``, made printable (the broker shows it)."""
    params = session.client_params
    if params is None:
        return None
    name = params.clientInfo.name
    text = "".join(ch for ch in name if unicodedata.category(ch)[0] not in "CZ" or ch == " ")
    text = " ".join(text.split())[:MAX_CLIENT_LABEL]
    return text or None


class _Server(Server[Any, Any]):
    """The SDK's server announcing ``tools.listChanged`` on every transport (the HTTP
    session manager builds its initialization options without arguments)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
        )


class RegistryServer:
    """One MCP server over one registry (its own loader, watcher and dispatcher)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        cwd: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        profile: str = "default",
        progress_interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self.env = dict(env)
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.timeout = timeout
        self.profile = profile
        self.progress_interval = progress_interval
        self.loader = RegistryLoader(tools_path(self.env), self.env, cache_dir=scan_cache_dir(env))
        self._lock = threading.Lock()
        self._pending: set[Path] = set()
        self._watcher: DirectoryWatcher | None = None
        try:
            self._watcher = DirectoryWatcher(self.loader.dirs)
        except OSError as exc:  # no inotify: the listing is fixed at start
            _log.warning("not watching the tools directories: %s", exc)
        self._registry = self.loader.load()
        self._listed = listing_key(self._registry)
        self._listings = ListingCache()
        self._listed_result: ListedTools | None = None
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._debounce: asyncio.TimerHandle | None = None
        self.gate = McpGate(self.env, host=this_host())
        self.dispatcher = Dispatcher(
            registry=self.current, env=self.env, gate=self.gate, askpass=askpass_program()
        )
        self.server: Server[Any, Any] = _Server(
            SERVER_NAME, version=_version(), instructions=INSTRUCTIONS
        )
        # Registered as plain request handlers, not through the SDK's ``list_tools``/
        # ``call_tool`` decorators: those re-check every listed name on each listing and,
        # for a call of a name they have not seen listed (a hidden tool, a typo, a call
        # before any listing), run the whole listing handler again; the dispatcher
        # already validates the arguments against the snapshot's schema.
        self.server.request_handlers[types.ListToolsRequest] = self._handle_list
        self.server.request_handlers[types.CallToolRequest] = self._handle_call

    # --- the registry ------------------------------------------------------------

    def current(self) -> Registry:
        """The registry with every change seen so far applied (any thread)."""
        with self._lock:
            if self._watcher is not None:
                self._pending |= self._watcher.changes()
            if self._pending:
                self._registry = self.loader.refresh(self._pending)
                self._pending.clear()
            return self._registry

    def _on_fs_event(self) -> None:
        with self._lock:
            if self._watcher is not None:
                self._pending |= self._watcher.changes()
        if self._debounce is not None:
            self._debounce.cancel()
        self._debounce = asyncio.get_running_loop().call_later(DEBOUNCE, self._flush)

    def _flush(self) -> None:
        self._debounce = None
        try:
            key = listing_key(self.current())
        except OllieError as exc:
            _log.warning("could not refresh the registry: %s", exc)
            return
        if key == self._listed:
            return
        self._listed = key
        for session in list(self._sessions):
            task = asyncio.get_running_loop().create_task(session.send_tool_list_changed())
            task.add_done_callback(_log_failure)

    # --- handlers ----------------------------------------------------------------

    async def _handle_list(self, request: types.ListToolsRequest) -> types.ServerResult:
        self._sessions.add(self.server.request_context.session)
        for attempt in (1, 2):
            registry = self.current()
            try:
                listing = self._listings.listing(registry)
            except ToolChangedError:  # a .meta changed after the scan: refresh, once more
                if attempt == 2:
                    raise
                continue
            if listing is not self._listed_result:
                self._listed_result = listing
                self._listed = listing_key(registry)
            return listing
        raise AssertionError("unreachable")

    async def _handle_call(self, request: types.CallToolRequest) -> types.ServerResult:
        try:
            result = await self._call_tool(request.params.name, request.params.arguments or {})
        except Exception as exc:  # as the SDK's own handler: a failed call, not a dead session
            _log.exception("tools/call %s failed", request.params.name)
            result = error_result(str(exc))
        return types.ServerResult(result)

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        ctx = self.server.request_context
        self._sessions.add(ctx.session)
        canceller = CallCanceller()
        options = CallOptions(
            cwd=self.cwd,
            timeout=self.timeout,
            profile=self.profile,
            client=client_label(ctx.session),
            on_start=canceller.started,
        )

        def work() -> CallResult:
            self.gate.bind(canceller)
            return self.dispatcher.call(name, arguments, options)

        token = ctx.meta.progressToken if ctx.meta is not None else None
        async with anyio.create_task_group() as group:
            if token is not None:
                group.start_soon(self._progress, ctx.session, token, ctx.request_id, canceller)
            try:
                result = await self._run(work, canceller)
            finally:
                group.cancel_scope.cancel()
        return result

    async def _run(self, work: Any, canceller: CallCanceller) -> types.CallToolResult:
        try:
            result: CallResult = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            canceller.cancel()  # the thread sees the group die and finishes on its own
            raise
        except ArgumentsError as exc:
            return error_result(f"invalid arguments: {exc}", field=exc.field)
        except ElevationDeniedError as exc:
            return error_result(f"denied: {exc}", denied=True)
        except ToolNotFoundError as exc:
            return error_result(f"unknown tool: {exc}")
        except OllieError as exc:
            return error_result(str(exc))
        return call_result(result)

    async def _progress(
        self, session: ServerSession, token: str | int, request: Any, call: CallCanceller
    ) -> None:
        start = time.monotonic()
        while True:
            await anyio.sleep(self.progress_interval)
            elapsed = time.monotonic() - start
            if call.awaiting_approval:
                await session.send_progress_notification(
                    token,
                    progress=round(elapsed, 3),
                    message=f"waiting {elapsed:.0f} s for the person's approval ({call.approver})",
                    related_request_id=str(request),
                )
                continue
            await session.send_progress_notification(
                token,
                progress=round(elapsed, 3),
                total=self.timeout,
                message=f"running for {elapsed:.0f} s (killed after {self.timeout:g} s)",
                related_request_id=str(request),
            )

    # --- running -----------------------------------------------------------------

    def watch(self) -> None:
        """Follow the tools directories from the running loop (undo with :meth:`unwatch`)."""
        if self._watcher is not None:
            asyncio.get_running_loop().add_reader(self._watcher.fileno(), self._on_fs_event)

    def unwatch(self) -> None:
        if self._watcher is not None:
            asyncio.get_running_loop().remove_reader(self._watcher.fileno())

    async def serve_stdio(self) -> None:
        from registry_core.mcp.stdio import stdio_transport

        self.watch()
        try:
            async with stdio_transport() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            self.unwatch()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning("could not send list_changed: %s", task.exception())


def _version() -> str:
    from registry_core.version import version

    return version()
