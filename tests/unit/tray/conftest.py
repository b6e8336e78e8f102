"""Shared fixtures for the tray's widget tests: offscreen Qt and realistic requests."""

from __future__ import annotations

import os

# Before pytest-qt creates the QApplication: no display is needed or wanted.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import ctypes
import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest
from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QAbstractButton, QLabel, QLineEdit, QPlainTextEdit, QWidget

from registry_core.broker.peer.identity import ProcessInfo, Requester
from registry_core.broker.question import ApprovalRequest, PasswordRequest
from registry_core.broker.wire.messages import Kind


def none_references_lost(calls: int = 200) -> int:
    """How many references to ``None`` ``calls`` void Qt calls lose (0 with a sound binding).

    PySide6 6.12.0 on Python < 3.12 (where ``None`` is not immortal) drops one
    reference to ``None`` per call of a C++ method returning ``void``: after a
    few thousand calls the interpreter frees ``None`` and aborts.
    """
    probe = QObject()
    probe.setObjectName("warm-up")  # first calls may fill caches
    gc.disable()  # a collection during the loop could free unrelated references
    try:
        before = sys.getrefcount(None)
        for _ in range(calls):
            probe.setObjectName("probe")
        return before - sys.getrefcount(None)
    finally:
        gc.enable()


# With such a binding, keep None alive so the other tests run and report (and
# the interpreter can exit); test_qt_binding_keeps_none_alive still fails.  The
# guard list is itself never freed: freeing it at exit would drop None again.
NONE_REFCOUNT_BUG = none_references_lost() > 0
if NONE_REFCOUNT_BUG:
    _NONE_GUARD = [None] * 2_000_000
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_NONE_GUARD))


def pytest_report_header() -> str | None:
    if NONE_REFCOUNT_BUG:
        return (
            f"WARNING: PySide6 {pyside_version} on Python {sys.version.split()[0]} loses a"
            " reference to None on every void Qt call (the app would abort): pin"
            " PySide6-Essentials<6.12"
        )
    return None


SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
EXE = "/home/alice/.config/ollie/tools/system_logs_journald"


def make_requester(**overrides: Any) -> Requester:
    fields: dict[str, Any] = {
        "pid": 4242,
        "uid": 1000,
        "gid": 1000,
        "exe": "/usr/bin/python3.11",
        "cmdline": ("python3", "agent.py", "--model", "local"),
        "cwd": "/home/alice/project",
        "parents": (
            ProcessInfo(4200, "/usr/bin/bash", ("bash", "-l")),
            ProcessInfo(4100, "/usr/bin/tmux", ("tmux", "new", "-s", "agents")),
            ProcessInfo(1500, "/usr/lib/systemd/systemd", ("/lib/systemd/systemd", "--user")),
        ),
        "host": "laptop",
    }
    fields.update(overrides)
    return Requester(**fields)


def make_approval_request(**overrides: Any) -> ApprovalRequest:
    fields: dict[str, Any] = {
        "id": "r7",
        "tool": "system_logs",
        "kind": Kind.SUDO,
        "description": "Show the last lines of the system journal, optionally for one unit.",
        "variant": 0,
        "executable": EXE,
        "sha256": SHA,
        "argv": ("sudo", "-A", "--", EXE),
        "args": {"lines": 50, "unit": "ssh.service", "since": "1 hour ago"},
        "cwd": "/home/alice/project",
        "requester": make_requester(),
        "host": "laptop",
        "timeout": 60.0,
    }
    fields.update(overrides)
    return ApprovalRequest(**fields)


def make_password_request(**overrides: Any) -> PasswordRequest:
    fields: dict[str, Any] = {
        "id": "p7",
        "approval": make_approval_request(),
        "prompt": "[sudo] password for alice: ",
        "user": "alice",
        "attempt": 1,
    }
    fields.update(overrides)
    return PasswordRequest(**fields)


@pytest.fixture
def none_loss() -> Callable[[int], int]:
    """``none_loss(calls)``: references to None lost by ``calls`` void Qt calls."""
    return none_references_lost


@pytest.fixture
def approval_request() -> Callable[..., ApprovalRequest]:
    """A factory: ``approval_request(kind=Kind.SANDBOX, remote=True, ...)``."""
    return make_approval_request


@pytest.fixture
def password_request() -> Callable[..., PasswordRequest]:
    """A factory: ``password_request(attempt=2, ...)``."""
    return make_password_request


def texts_of(widget: QWidget) -> list[str]:
    """Every text a person can read in ``widget``: labels, buttons, text boxes, badges."""
    found: list[str] = []
    for child in [widget, *widget.findChildren(QWidget)]:
        if isinstance(child, QLabel | QAbstractButton):
            found.append(child.text())
        elif isinstance(child, QPlainTextEdit):
            found.append(child.toPlainText())
        elif isinstance(child, QLineEdit):
            found.append(child.text())
    return found


@pytest.fixture
def widget_texts() -> Callable[[QWidget], str]:
    """``widget_texts(w)``: all readable texts of ``w`` joined by newlines."""
    return lambda widget: "\n".join(texts_of(widget))
