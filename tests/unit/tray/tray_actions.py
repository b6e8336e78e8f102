"""``TrayActions`` that record every call, for the tray menu tests.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ollie_tray.tray import TrayActions


def recorder(calls: list[tuple[str, Any]]) -> Callable[[str], Callable[..., None]]:
    """``rec(name)``: a callback that appends ``(name, args)`` to ``calls``."""

    def rec(name: str) -> Callable[..., None]:
        return lambda *a: calls.append((name, a))

    return rec


def recording_actions(calls: list[tuple[str, Any]], **overrides: Any) -> TrayActions:
    """Every menu action recorded in ``calls``; autostart reads as off."""
    rec = recorder(calls)
    fields: dict[str, Any] = {
        "open_request": rec("open"),
        "tool_browser": rec("browser"),
        "policies": rec("policies"),
        "audit_log": rec("audit"),
        "set_paused": rec("paused"),
        "set_autostart": rec("autostart"),
        "autostart_enabled": lambda: False,
        "quit": rec("quit"),
    }
    return TrayActions(**{**fields, **overrides})
