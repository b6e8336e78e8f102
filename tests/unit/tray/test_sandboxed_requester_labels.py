"""A requester inside the sandbox, as the tray shows it: dialog, notification, audit window.

And the tray's real front-end (QtPrompter, which owns the keyring) is never reached by
an ``askpass`` from inside the sandbox: the broker refuses it first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.notify import build_notification
from ollie_tray.qt_prompter import QtPrompter
from ollie_tray.windows.audit import requester_text
from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.record.audit import AuditLog, AuditRecord, AuditRequester
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.wire import messages as m
from registry_core.registry import RegistryLoader

Factory = Callable[..., ApprovalRequest]
LABEL = "from inside the sandbox"


def inside(request: ApprovalRequest) -> ApprovalRequest:
    requester = dataclasses.replace(
        request.requester, sandboxed=True, sandbox_reasons=("it runs in another user namespace",)
    )
    return dataclasses.replace(request, requester=requester)


def test_the_dialog_says_the_request_comes_from_inside_the_sandbox(
    qtbot: QtBot, approval_request: Factory, widget_texts: Callable[[QWidget], str]
) -> None:
    plain = ApprovalDialog(approval_request(), arm_delay_ms=50)
    qtbot.addWidget(plain)
    assert plain.sandbox_badge is None
    assert LABEL not in widget_texts(plain)

    dialog = ApprovalDialog(inside(approval_request()), arm_delay_ms=50)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.sandbox_badge is not None
    assert dialog.sandbox_badge.isVisible()
    assert dialog.sandbox_badge.text() == "FROM INSIDE THE SANDBOX"
    assert dialog.sandbox_badge.accessibleName() == f"Requested {LABEL}"
    text = widget_texts(dialog)
    assert f"This request comes {LABEL}" in text
    assert "never receives a password" in text
    assert f"for pid 4242, {LABEL})" in text  # the requester section's title


def test_the_notification_says_it(approval_request: Factory) -> None:
    body = build_notification(inside(approval_request())).body
    assert f"(pid 4242), {LABEL}" in body
    assert LABEL not in build_notification(approval_request()).body
    assert f", {LABEL}" in build_notification(inside(approval_request()), markup=True).body


def test_the_audit_window_says_it() -> None:
    record = AuditRecord(
        tool="t",
        kind=m.Kind.SUDO,
        host="h",
        requester=AuditRequester(pid=7, exe="/usr/bin/python3", sandboxed=True),
        decision=m.Decision.DENY,
        by=m.DecidedBy.USER,
    )
    assert requester_text(record) == f"7 /usr/bin/python3 ({LABEL})"  # as the CLI prints it


class RecordingVault:
    """Every keyring call, recorded (none is expected)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def available(self) -> bool:
        self.calls.append("available")
        return True

    async def available_async(self) -> bool:
        self.calls.append("available")
        return True

    async def get_async(self, user: str, host: str) -> str | None:
        self.calls.append(f"get {user}@{host}")
        return "from-keyring"

    async def store_async(self, user: str, host: str, password: str) -> bool:
        self.calls.append("store")
        return True

    async def delete_async(self, user: str, host: str) -> bool:
        self.calls.append("delete")
        return True


def test_askpass_from_inside_the_sandbox_never_reaches_the_keyring(
    tmp_path: Path, approval_request: Factory
) -> None:
    vault = RecordingVault()
    broker = Broker(
        registry=RegistryLoader([tmp_path], {}).load,
        prompter=QtPrompter(vault=vault),  # type: ignore[arg-type]
        policies=PolicyStore(tmp_path / "policies.yaml"),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        config=BrokerConfig(host="laptop"),
    )
    me = Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())
    grant = broker.grants.issue(approval_request(requester=me), me.pid, me.uid)
    sandboxed = dataclasses.replace(me, sandboxed=True)
    ask = m.AskpassRequest(id=1, grant=grant.token, prompt="Password: ", attempt=1)
    with pytest.raises(m.MessageError) as refused:
        asyncio.run(broker.askpass(ask, sandboxed))
    assert refused.value.error_code is m.ErrorCode.SANDBOXED_REQUESTER
    assert vault.calls == []
