"""Policies and Audit windows: Close and Esc, the audit detail pane, rules made in the GUI,
plurals, and agreement with ``ollie-tools policy list`` / ``audit`` (pytest-qt)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.windows.audit import AuditWindow
from ollie_tray.windows.policies import PoliciesWindow
from registry_core.broker.question import Remember
from registry_core.broker.record.audit import AuditLog, AuditRecord, AuditRequester
from registry_core.broker.remember.policies import PolicyStore, file_sha256
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind
from registry_core.cli import tools as ollie_tools
from registry_core.paths import audit_file, policies_file
from registry_core.registry import Registry, RegistryLoader

CODE = "\n".join(f"echo line {i}  # {'x' * 80}" for i in range(200)) + "\nrm -rf /tmp/the-end"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, extra in (("greet", {}), ("rootly", {"sudo": True})):
        (tools / f"{name}.meta").write_text(json.dumps({"description": "d", **extra}))
        (tools / name).write_text("#!/bin/sh\necho hi\n")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tools))
    return dict(os.environ)


def registry(env: dict[str, str]) -> Registry:
    return RegistryLoader([Path(env["OLLIE_TOOLS_PATH"])], env).load()


def policies_window(qtbot: QtBot, env: dict[str, str]) -> PoliciesWindow:
    window = PoliciesWindow(
        PolicyStore(policies_file(env)), registry=lambda: registry(env), host="laptop"
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def audit_window(qtbot: QtBot, env: dict[str, str]) -> AuditWindow:
    window = AuditWindow(AuditLog(audit_file(env)))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def add_record(env: dict[str, str], tool: str = "execute_code", code: str | None = CODE) -> None:
    AuditLog(audit_file(env)).append(
        AuditRecord(
            tool=tool,
            kind=Kind.SANDBOX,
            host="laptop",
            requester=AuditRequester(4242, "/usr/bin/agent", ("agent", "--go"), "/home/a"),
            decision=Decision.DENY,
            by=DecidedBy.USER,
            reason="denied by the user",
            time=1_750_000_000.0,
            executable="/usr/bin/bash",
            argv=("/usr/bin/bash", "-c", "…"),
            code=code,
        )
    )


def cli(env: dict[str, str], capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert ollie_tools.main(list(argv)) == 0
    return capsys.readouterr().out


# --- Close and Esc --------------------------------------------------------------------


@pytest.mark.parametrize("make", [policies_window, audit_window], ids=["policies", "audit"])
@pytest.mark.parametrize("how", ["escape", "close-button"])
def test_close_button_and_escape_close_the_window(
    qtbot: QtBot, env: dict[str, str], make: object, how: str
) -> None:
    window: QWidget = make(qtbot, env)  # type: ignore[operator]
    if how == "escape":
        table = window.table  # type: ignore[attr-defined]
        table.setFocus()
        qtbot.keyClick(table, Qt.Key.Key_Escape)  # travels up from the focused widget
    else:
        [button] = [
            b for b in window.findChildren(QWidget) if b.accessibleName() == "Close this window"
        ]
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=2000)


# --- the audit detail pane -----------------------------------------------------------


def test_audit_detail_shows_every_field_and_the_code_in_full_and_copies(
    qtbot: QtBot, env: dict[str, str]
) -> None:
    add_record(env)
    window = audit_window(qtbot, env)
    assert window.detail.toPlainText() == ""
    assert not window.copy_button.isEnabled()
    window.table.selectRow(0)
    text = window.detail.toPlainText()
    assert CODE in text  # every line, nothing elided
    record = json.loads(text[text.index("record:\n") + len("record:\n") :])
    assert record == AuditLog(audit_file(env)).tail(1)[0].to_json()
    assert window.detail.isReadOnly()
    qtbot.mouseClick(window.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == text


def test_audit_window_shows_what_ollie_tools_audit_shows(
    qtbot: QtBot, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    add_record(env, "first", None)
    out = cli(env, capsys, "audit")
    window = audit_window(qtbot, env)
    row = [str(window.proxy.index(0, col).data()) for col in range(7)]
    _header, line = out.splitlines()
    assert line.split() == [*row[0].split(), *row[1:6], *row[6].split()]
    assert window.status_label.text() == "1 most recent decision."


# --- rules made in the GUI ----------------------------------------------------------


def test_new_allow_from_the_gui_is_what_the_cli_would_store(
    qtbot: QtBot, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    window = policies_window(qtbot, env)
    qtbot.mouseClick(window.new_button, Qt.MouseButton.LeftButton)
    editor = window.editor
    assert editor is not None and editor.isVisible()
    assert [editor.tool_combo.itemText(i) for i in range(editor.tool_combo.count())] == [
        "greet",
        "rootly",
    ]
    editor.tool_combo.setCurrentText("rootly")
    editor.duration_combo.setCurrentIndex(editor.duration_combo.findData(Remember.HOUR.value))
    qtbot.mouseClick(editor.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.model.rowCount() == 1)
    [policy] = PolicyStore(policies_file(env)).list()
    exe = str(Path(env["OLLIE_TOOLS_PATH"]) / "rootly")
    assert (policy.tool, policy.kind, policy.host, policy.decision, policy.remember) == (
        "rootly",
        Kind.SUDO,
        "laptop",
        Decision.ALLOW,
        Remember.HOUR,
    )
    assert (policy.executable, policy.sha256) == (exe, file_sha256(exe))
    assert window.status_label.text() == "Remembered: allow rootly on laptop."
    listed = cli(env, capsys, "policy", "list").splitlines()[1].split()
    assert listed[:4] == ["rootly", "sudo", "laptop", "allow"]


def test_deny_for_an_unknown_tool_is_refused_in_the_gui_too(
    qtbot: QtBot, env: dict[str, str]
) -> None:
    window = policies_window(qtbot, env)
    editor = window.open_editor()
    editor.tool_combo.setCurrentText("ghost")
    editor.decision_combo.setCurrentIndex(editor.decision_combo.findData("deny"))
    assert not editor.duration_combo.isEnabled()
    qtbot.mouseClick(editor.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "ghost" in window.status_label.text())
    assert window.status_label.text() == "no tool named 'ghost' on this host"
    assert PolicyStore(policies_file(env)).list() == []


def test_edit_moves_a_rule_to_another_host_and_the_window_shows_cli_rules(
    qtbot: QtBot, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    cli(env, capsys, "policy", "deny", "greet", "--kind", "sudo", "--host", "laptop")
    window = policies_window(qtbot, env)
    assert window.model.rowCount() == 1  # made with the CLI, shown here
    assert window.status_label.text() == "1 remembered decision."
    window.select_row(0)
    assert window.edit_button.isEnabled()
    qtbot.mouseClick(window.edit_button, Qt.MouseButton.LeftButton)
    editor = window.editor
    assert editor is not None
    assert (editor.tool_combo.currentText(), editor.host_edit.text()) == ("greet", "laptop")
    editor.host_edit.setText("build")
    qtbot.mouseClick(editor.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "build" in window.status_label.text())
    keys = [(p.tool, p.kind, p.host) for p in PolicyStore(policies_file(env)).list()]
    assert keys == [("greet", Kind.SUDO, "build")]


def test_session_rules_are_said_to_be_the_trays_alone(
    qtbot: QtBot, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store = PolicyStore(policies_file(env))
    exe = str(Path(env["OLLIE_TOOLS_PATH"]) / "greet")
    store.remember("greet", Kind.SANDBOX, "laptop", Remember.SESSION, exe, file_sha256(exe))
    window = PoliciesWindow(store, registry=lambda: registry(env), host="laptop")
    qtbot.addWidget(window)
    assert window.model.rowCount() == 1
    assert window.status_label.text() == (
        "1 remembered decision (1 for this session only: kept by the tray, not in"
        " policies.yaml, so `ollie-tools policy list` does not show it)."
    )
    assert cli(env, capsys, "policy", "list") == "no remembered policies\n"
