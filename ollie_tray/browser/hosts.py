"""The Tool Browser's host selector: this machine, or another host as *it* resolved its tools.

The list holds this computer and every host ollie-remote connected or
deployed to (re-read each time the list opens).  Choosing a remote host runs
``ollie-tools dump --json`` there over ssh, in a worker thread, and shows the
:class:`~registry_core.registry.Registry` built from the answer: variants,
conditions and executables as that host evaluated them.  The view is
read-only (no Run…, no What if…): the tools run there, through the agent on
that host.

Threading: the ssh call runs in a plain thread; its result comes back to the
GUI thread through a queued Qt signal.  A result for a host that is no longer
selected is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QToolBar, QWidget

from registry_core.errors import MetaError, OllieError
from registry_core.registry import Registry, Status, Tool
from registry_core.remote.fetch import fetch_registry
from registry_core.remote.ssh import SshTarget, extra_options
from registry_core.remote.state import browsable_hosts

if TYPE_CHECKING:
    from ollie_tray.browser.window import BrowserWindow

Fetch = Callable[[str], Registry]


def remote_banner(host: str) -> str:
    return (
        f"REMOTE host {host} — the tools as {host} resolved them (read-only: Run… and"
        " What if… are not available for remote hosts; the tools run there)."
    )


class HostSelector(QComboBox):
    """ "This computer" plus the known remote hosts; :attr:`host_chosen` gives the host
    name, or ``None`` for this computer."""

    host_chosen = Signal(object)

    def __init__(
        self,
        env: Mapping[str, str],
        local_name: str,
        *,
        hosts: Callable[[], list[str]] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.env = dict(env)
        self.local_name = local_name
        self._hosts = hosts or (lambda: browsable_hosts(self.env))
        self.setAccessibleName("Host")
        self.setToolTip("Show the tools of this computer or of a remote host (ollie-remote)")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.reload_hosts()
        self.activated.connect(self._activated)

    def current_host(self) -> str | None:
        data = self.currentData()
        return data if isinstance(data, str) else None

    def reload_hosts(self) -> None:
        """Re-read the host list, keeping the selection when that host is still known."""
        keep = self.current_host()
        self.blockSignals(True)
        self.clear()
        self.addItem(f"This computer ({self.local_name})", None)
        for host in self._hosts():
            self.addItem(host, host)
        index = self.findData(keep) if keep is not None else 0
        self.setCurrentIndex(max(index, 0))
        self.blockSignals(False)

    def showPopup(self) -> None:
        self.reload_hosts()
        super().showPopup()

    def choose(self, host: str | None) -> None:
        """Select ``host`` (added to the list if needed) and announce it."""
        if host is not None and self.findData(host) < 0:
            self.addItem(host, host)
        self.setCurrentIndex(0 if host is None else self.findData(host))
        self.host_chosen.emit(host)

    def _activated(self, _index: int) -> None:
        self.host_chosen.emit(self.current_host())


class RemoteFetcher(QObject):
    """Fetches one host's registry in a worker thread."""

    #: (host, Registry)
    fetched = Signal(str, object)
    #: (host, error text)
    failed = Signal(str, str)

    def __init__(
        self, env: Mapping[str, str], fetch: Fetch | None = None, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.env = dict(env)
        self.fetch = fetch or self._over_ssh  # replaceable (tests)
        self._threads: list[threading.Thread] = []

    def _over_ssh(self, host: str) -> Registry:
        return fetch_registry(SshTarget(host, extra_options(self.env)), self.env)

    def start(self, host: str) -> None:
        thread = threading.Thread(target=self._work, args=(host,), daemon=True, name="fetch")
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _work(self, host: str) -> None:
        try:
            registry = self.fetch(host)
        except OllieError as exc:
            self.failed.emit(host, str(exc))
        except Exception as exc:  # a worker must report, never die silently
            self.failed.emit(host, f"{type(exc).__name__}: {exc}")
        else:
            self.fetched.emit(host, registry)

    def wait(self, timeout: float = 10.0) -> None:
        for thread in self._threads:
            thread.join(timeout)


class RemoteHostView(QObject):
    """Adds the host selector to a :class:`~ollie_tray.browser.window.BrowserWindow` and
    switches what it shows: the local (live) registry, or a fetched remote one."""

    def __init__(
        self,
        window: BrowserWindow,
        env: Mapping[str, str],
        local_name: str,
        *,
        fetch: Fetch | None = None,
        hosts: Callable[[], list[str]] | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.selector = HostSelector(env, local_name, hosts=hosts)
        self.fetcher = RemoteFetcher(env, fetch, parent=self)
        self.registry: Registry | None = None
        self.error = ""
        toolbar = window.findChild(QToolBar, "toolbar")
        if toolbar is not None:
            toolbar.addSeparator()
            toolbar.addWidget(QLabel(" Host: "))
            toolbar.addWidget(self.selector)
        self.selector.host_chosen.connect(self.show_host)
        self.fetcher.fetched.connect(self._fetched)
        self.fetcher.failed.connect(self._failed)

    def show_host(self, host: str | None) -> None:
        """Show ``host``'s registry (fetched anew), or this computer's for ``None``."""
        w = self.window
        self.registry, self.error = None, ""
        if host is None:
            w.remote_host = None
            w.whatif_action.setEnabled(True)
            w.banner.hide()
            w.refresh()
            return
        if w.what_if is not None:
            w.simulate(None)
        w.whatif_dock.hide()
        w.whatif_action.setEnabled(False)
        w.remote_host = host
        w.banner.setText(f"REMOTE host {host} — fetching its tools over ssh…")
        w.banner.show()
        w._show_registry(Registry())
        self.fetcher.start(host)

    def _fetched(self, host: str, registry: Registry) -> None:
        if host != self.window.remote_host:
            return  # another host was chosen meanwhile
        self.registry = registry
        self.window.banner.setText(remote_banner(host))
        self.window._show_registry(registry)

    def _failed(self, host: str, error: str) -> None:
        if host != self.window.remote_host:
            return
        self.error = error
        self.window.banner.setText(f"REMOTE host {host} — cannot show its tools: {error}")
        self.window._show_registry(Registry())


def remote_file_tool(path: Path, host: str) -> Tool:
    """What the details panel shows for a (shadowed) ``.meta`` that lives on ``host``."""
    return Tool(
        path.stem,
        str(path),
        Status.BROKEN,
        errors=(MetaError(str(path), f"a file on {host}: not evaluated on this computer"),),
    )
