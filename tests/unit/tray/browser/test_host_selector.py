"""The Tool Browser's host selector: another host's tools, as that host resolved them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from registry_core.errors import RemoteError
from registry_core.registry import Registry, RegistryLoader, Status
from registry_core.registry.serialize import registry_dump, registry_from_dump
from registry_core.remote.state import DeployedHost, record_deployed

MakeWindow = Callable[..., BrowserWindow]


def remote_registry(loader: RegistryLoader) -> Registry:
    """What "buildbox" sent: the demo tools, with gpu_status available there."""
    dump = registry_dump(loader.load(), "buildbox")
    for tool in dump["tools"]:
        if tool["name"] == "gpu_status":
            tool["status"] = "available"
            tool["variant"] = 0
            tool["variants"][0]["matched"] = True
            tool["executable"] = "/home/b/.config/ollie/tools/gpu_status_nvidia"
    return registry_from_dump(dump)


def test_lists_this_computer_and_the_known_hosts(make_window: MakeWindow, tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "s"), "XDG_RUNTIME_DIR": str(tmp_path / "r")}
    record_deployed(env, DeployedHost("buildbox", "~/.config/ollie/tools", "", 1.0))
    window = make_window(env=env)
    selector = window.hosts.selector
    assert selector.itemText(0).startswith("This computer (")
    assert [selector.itemText(i) for i in range(1, selector.count())] == ["buildbox"]
    record_deployed(env, DeployedHost("later", "~/t", "", 2.0))
    selector.reload_hosts()  # also done each time the list opens
    assert selector.count() == 3


def test_a_remote_host_shows_its_own_resolution_read_only(
    make_window: MakeWindow, loader: RegistryLoader, qtbot: QtBot, tmp_path: Path
) -> None:
    window = make_window(env={"XDG_STATE_HOME": str(tmp_path / "s")})
    assert window.loader.current.tools["gpu_status"].status is Status.HIDDEN
    gate = threading.Event()
    asked: list[str] = []

    def fetch(host: str) -> Registry:
        asked.append(host)
        gate.wait(10)
        return remote_registry(loader)

    window.hosts.fetcher.fetch = fetch
    window.hosts.selector.choose("buildbox")
    assert window.remote_host == "buildbox"
    assert "fetching" in window.banner.text()
    assert window.model.rowCount() == 0  # nothing shown while it loads
    with qtbot.waitSignal(window.registry_changed, timeout=10_000) as shown:
        gate.set()
    registry = shown.args[0]
    assert registry.tools["gpu_status"].status is Status.AVAILABLE
    assert window.select_tool("gpu_status")
    assert window.selected_row() is not None
    assert "REMOTE host buildbox" in window.banner.text() and "read-only" in window.banner.text()
    assert not window.details.run_button.isEnabled()
    assert window.open_run_form() is None
    assert not window.whatif_action.isEnabled()
    assert "(on buildbox)" in window.count_label.text()
    assert asked == ["buildbox"]
    # Back to this computer: the local, live registry again.
    with qtbot.waitSignal(window.registry_changed, timeout=10_000):
        window.hosts.selector.choose(None)
    assert window.remote_host is None
    assert window.loader.current.tools["gpu_status"].status is Status.HIDDEN
    assert window.whatif_action.isEnabled() and window.banner.isHidden()


def test_a_failed_fetch_says_why(make_window: MakeWindow, qtbot: QtBot, tmp_path: Path) -> None:
    window = make_window(env={"XDG_STATE_HOME": str(tmp_path / "s")})

    def fetch(host: str) -> Registry:
        raise RemoteError(f"the host key of {host} is not known here")

    window.hosts.fetcher.fetch = fetch
    with qtbot.waitSignal(window.hosts.fetcher.failed, timeout=10_000):
        window.hosts.selector.choose("stranger")
    qtbot.waitUntil(lambda: "cannot show its tools" in window.banner.text(), timeout=10_000)
    assert "host key of stranger" in window.banner.text()
    assert window.model.rowCount() == 0
