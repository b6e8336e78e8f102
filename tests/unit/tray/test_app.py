"""The whole tray application in-process: real socket, real broker, real dialogs (offscreen).

An agent-side client in a worker thread asks for elevation; the test answers
the dialog the way a person would (after the arming delay) and checks what the
client got, the audit log and the policy store.  The event loop is qasync's,
as in the real app.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import qasync
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ollie_tray.app import AppOptions, TrayApp
from ollie_tray.dialogs.approval import ApprovalDialog
from registry_core.broker.remember.policies import file_sha256
from registry_core.broker.serve.server import bind_socket
from registry_core.broker.wire import messages as m
from registry_core.broker.wire.client import BrokerClient, broker_alive
from registry_core.pinned import approved_argv
from registry_core.trusted import trusted_program

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "resources" / "examples" / "tools"


@pytest.fixture
def tray_env(tmp_path: Path) -> dict[str, str]:
    tools = tmp_path / "tools"
    shutil.copytree(EXAMPLES, tools)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {
        "HOME": str(tmp_path / "home"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(runtime),
        "OLLIE_TOOLS_PATH": str(tools),
        # No session bus: notifications fall back to the tray's own message.
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus",
    }
    Path(env["HOME"]).mkdir()
    return env


def run_app(
    qapp: QApplication,
    env: dict[str, str],
    scenario: Callable[[TrayApp], Any],
    options: AppOptions | None = None,
) -> tuple[int, Any]:
    """Run the app on a qasync loop until ``scenario`` (a coroutine function) finishes."""
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    app_box: dict[str, Any] = {}

    async def main() -> tuple[int, Any]:
        app = TrayApp(qapp, env, options or AppOptions(countdown_s=30, arm_delay_ms=50))
        app_box["app"] = app
        runner = asyncio.ensure_future(app.run())
        socket_path = Path(env["XDG_RUNTIME_DIR"]) / "ollie" / "elevate.sock"
        for _ in range(200):
            if socket_path.exists():
                break
            await asyncio.sleep(0.01)
        try:
            result = await scenario(app)
        finally:
            app.quit()
        code = await runner
        return code, result

    try:
        with loop:
            return loop.run_until_complete(main())
    finally:
        asyncio.set_event_loop(None)


def run_argv(executable: Path | None) -> list[str]:
    """The argv the dispatcher would send for ``executable`` (registry_core.pinned)."""
    exe = str(executable)
    return approved_argv(trusted_program("python3"), file_sha256(exe) or "", exe)


def elevate_in_thread(
    socket_path: Path, tool: str, argv: list[str]
) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            with BrokerClient(socket_path, timeout=30) as client:
                box["reply"] = client.elevate(tool, m.Kind.SANDBOX, argv, {}, "/tmp")
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, box


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


async def join(thread: threading.Thread) -> None:
    await wait_for(lambda: not thread.is_alive(), 30)


def test_approval_through_the_dialog_reaches_the_client_audit_and_policy(
    qapp: QApplication, tray_env: dict[str, str]
) -> None:
    async def scenario(app: TrayApp) -> Any:
        tool = app.loader.current.get("write_protected_note")
        thread, box = elevate_in_thread(app.socket_path, tool.name, run_argv(tool.executable))
        dialog = await wait_for(lambda: app.prompter.current_dialog)
        assert isinstance(dialog, ApprovalDialog)
        assert not dialog.approve_button.isEnabled()  # armed only after the delay
        assert app.broker.pending  # the tray lists it
        await wait_for(lambda: dialog.approve_button.isEnabled())
        index = dialog.remember_combo.findText("For 15 minutes")
        dialog.remember_combo.setCurrentIndex(index)
        QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)  # a real click
        await join(thread)
        return box, app

    options = AppOptions(countdown_s=30, arm_delay_ms=1500)
    code, (box, app) = run_app(qapp, tray_env, scenario, options)
    assert code == 0
    reply = box["reply"]
    assert reply.decision is m.Decision.ALLOW
    assert reply.by is m.DecidedBy.USER
    assert [p.tool for p in app.policies.list()] == ["write_protected_note"]
    audit = app.audit.tail(5)
    assert audit[-1].decision is m.Decision.ALLOW
    assert audit[-1].tool == "write_protected_note"


def test_escape_denies_and_disconnect_withdraws_the_dialog(
    qapp: QApplication, tray_env: dict[str, str]
) -> None:
    async def scenario(app: TrayApp) -> Any:
        tool = app.loader.current.get("write_protected_note")
        thread, box = elevate_in_thread(app.socket_path, tool.name, run_argv(tool.executable))
        dialog = await wait_for(lambda: app.prompter.current_dialog)
        dialog.reject()  # Esc
        await join(thread)
        first = box["reply"]

        # A client that goes away mid-prompt: its dialog disappears.
        client = BrokerClient(app.socket_path)
        client.send(
            m.ElevateRequest(
                id="gone",
                tool=tool.name,
                kind=m.Kind.SANDBOX,
                argv=(str(tool.executable),),
                args={},
                cwd="/tmp",
            )
        )
        second_dialog = await wait_for(lambda: app.prompter.current_dialog)
        client.close()
        await wait_for(lambda: app.prompter.current_dialog is None)
        await wait_for(lambda: not app.broker.pending)
        return first, second_dialog, app

    code, (first, second_dialog, app) = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert first.decision is m.Decision.DENY
    assert second_dialog is not None
    reasons = [(r.by, r.decision) for r in app.audit.tail(5)]
    assert (m.DecidedBy.CLIENT_GONE, m.Decision.DENY) in reasons


def test_quit_denies_pending_and_removes_the_socket(
    qapp: QApplication, tray_env: dict[str, str]
) -> None:
    async def scenario(app: TrayApp) -> Any:
        tool = app.loader.current.get("write_protected_note")
        thread, box = elevate_in_thread(app.socket_path, tool.name, run_argv(tool.executable))
        await wait_for(lambda: app.prompter.current_dialog)
        app.quit()
        await join(thread)
        return box, app.socket_path

    code, (box, socket_path) = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert box["reply"].decision is m.Decision.DENY
    assert box["reply"].by is m.DecidedBy.SHUTDOWN
    assert not socket_path.exists()


def test_sigterm_quits_cleanly(qapp: QApplication, tray_env: dict[str, str]) -> None:
    async def scenario(app: TrayApp) -> Any:
        assert await asyncio.to_thread(broker_alive, app.socket_path)
        os.kill(os.getpid(), signal.SIGTERM)
        await wait_for(lambda: not app.socket_path.exists())
        return app.socket_path

    code, socket_path = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert not socket_path.exists()


def test_sighup_takes_the_shutdown_path(qapp: QApplication, tray_env: dict[str, str]) -> None:
    """A closed terminal (SIGHUP) quits like SIGTERM: pending denied as shutdown, socket gone."""

    async def scenario(app: TrayApp) -> Any:
        tool = app.loader.current.get("write_protected_note")
        thread, box = elevate_in_thread(app.socket_path, tool.name, run_argv(tool.executable))
        await wait_for(lambda: app.prompter.current_dialog)
        os.kill(os.getpid(), signal.SIGHUP)
        await join(thread)
        await wait_for(lambda: not app.socket_path.exists())
        return box, app.socket_path

    code, (box, socket_path) = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert box["reply"].by is m.DecidedBy.SHUTDOWN
    assert not socket_path.exists()


def test_pause_denies_everything(qapp: QApplication, tray_env: dict[str, str]) -> None:
    async def scenario(app: TrayApp) -> Any:
        app.broker.set_paused(True)
        tool = app.loader.current.get("write_protected_note")
        thread, box = elevate_in_thread(app.socket_path, tool.name, run_argv(tool.executable))
        await join(thread)
        return box

    _code, box = run_app(qapp, tray_env, scenario)
    assert box["reply"].decision is m.Decision.DENY
    assert box["reply"].by is m.DecidedBy.PAUSED


def test_a_second_instance_is_refused(qapp: QApplication, tray_env: dict[str, str]) -> None:
    path = Path(tray_env["XDG_RUNTIME_DIR"]) / "ollie" / "elevate.sock"
    other = bind_socket(path)  # a live instance holds the socket
    try:
        loop = qasync.QEventLoop(qapp)
        asyncio.set_event_loop(loop)
        try:
            with loop:
                app = TrayApp(qapp, tray_env, AppOptions())
                code = loop.run_until_complete(app.run())
        finally:
            asyncio.set_event_loop(None)
    finally:
        other.close()
    assert code == 1


def test_live_registry_updates_from_inotify(qapp: QApplication, tray_env: dict[str, str]) -> None:
    tools = Path(tray_env["OLLIE_TOOLS_PATH"])

    async def scenario(app: TrayApp) -> Any:
        assert "fresh" not in app.loader.current
        (tools / "fresh.meta").write_text('{"description": "new", "cmd": "/bin/true"}')
        await wait_for(lambda: "fresh" in app.loader.current)
        (tools / "fresh.meta").unlink()
        await wait_for(lambda: "fresh" not in app.loader.current)
        return True

    code, ok = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert ok
