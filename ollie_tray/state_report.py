"""Test hook: what the tray shows, written as JSON for end-to-end tests (off by default).

Only when ``$OLLIE_TRAY_TEST_STATE_FILE`` names a file does the tray build a
:class:`StateReport`; it then rewrites that file (atomically, mode 0600)
whenever what the tray shows changes.  Reading widget contents from outside
the process (AT-SPI) is heavy and unreliable under Xvfb; this small document
is the end-to-end tests' window into the app.  Layout::

    {"pending": 1, "tray": "pending",
     "windows": [{"class": "ApprovalDialog", "title": "Ollie — approve x?",
                  "texts": [...visible labels...], "boxes": [...read-only text...],
                  "combos": ["Only this time"], "buttons": {"Approve": false},
                  "rects": {"Approve": [x, y, w, h]},
                  "rects": {  # where each button is on the screen: x, y, width, height
            w.text(): _screen_rect(w)
            for w in widget.findChildren(QAbstractButton)
            if w.isVisible() and w.text()
        },
        "checked": [...checked boxes...],
                  "actions": [{"text": "&Quit", "enabled": true, "checked": false}]}],
     "browser": {"rows": [{"name": "greet", "status": "available", "rank": 0}],
                 "selected": "greet", "conditions": ["binary x → not found"]}}

A menu's ``actions`` are listed for ``QMenu`` windows only; the tray icon's
own embedded window shows up as a ``QWidget`` without a title.

Threading: a 50 ms ``QTimer`` on the Qt thread takes the snapshot; nothing
else runs.  Secrets: line edits (the password field) are never read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, QTimer
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QWidget,
)

log = logging.getLogger(__name__)
STATE_FILE_ENV = "OLLIE_TRAY_TEST_STATE_FILE"
INTERVAL_MS = 50


def _screen_rect(widget: QWidget) -> list[int]:
    top_left = widget.mapToGlobal(QPoint(0, 0))
    return [top_left.x(), top_left.y(), widget.width(), widget.height()]


def _window(widget: QWidget) -> dict[str, Any]:
    return {
        "class": type(widget).__name__,
        "title": widget.windowTitle(),
        "texts": [w.text() for w in widget.findChildren(QLabel) if w.isVisible() and w.text()],
        "boxes": [
            w.toPlainText()
            for w in widget.findChildren(QPlainTextEdit)
            if w.isVisible() and w.isReadOnly()
        ],
        "combos": [w.currentText() for w in widget.findChildren(QComboBox) if w.isVisible()],
        "buttons": {
            w.text(): w.isEnabled()
            for w in widget.findChildren(QAbstractButton)
            if w.isVisible() and w.text()
        },
        "rects": {  # where each button is on the screen: x, y, width, height
            w.text(): _screen_rect(w)
            for w in widget.findChildren(QAbstractButton)
            if w.isVisible() and w.text()
        },
        "checked": [
            w.text()
            for w in widget.findChildren(QAbstractButton)
            if w.isVisible() and w.isChecked()
        ],
        "actions": [
            {"text": a.text(), "enabled": a.isEnabled(), "checked": a.isChecked()}
            for a in (widget.actions() if isinstance(widget, QMenu) else [])
            if not a.isSeparator()
        ],
    }


def _browser(window: QWidget) -> dict[str, Any]:
    from ollie_tray.browser.window import BrowserWindow

    if not isinstance(window, BrowserWindow):
        return {}
    rows = [
        {"name": row.name, "status": row.status.value, "rank": row.rank}
        for row in window.model.rows()
    ]
    return {
        "rows": rows,
        "selected": window.selected_tool(),
        "conditions": window.details.condition_texts(),
    }


class StateReport:
    """Writes the snapshot to ``path`` whenever it changes (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        browser: Callable[[], QWidget | None],
        pending: Callable[[], int],
        tray_state: Callable[[], str | None],
    ) -> None:
        self.path = path
        self._browser = browser
        self._pending = pending
        self._tray_state = tray_state
        self._last = ""
        self._timer = QTimer()
        self._timer.setInterval(INTERVAL_MS)
        self._timer.timeout.connect(self.update)

    def start(self) -> None:
        self.update()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def snapshot(self) -> dict[str, Any]:
        windows = [
            _window(w) for w in QApplication.topLevelWidgets() if w.isVisible() and w.isWindow()
        ]
        browser = self._browser()
        return {
            "pending": self._pending(),
            "tray": self._tray_state(),
            "windows": windows,
            "browser": _browser(browser) if browser is not None and browser.isVisible() else None,
        }

    def update(self) -> None:
        text = json.dumps(self.snapshot(), sort_keys=True, ensure_ascii=False)
        if text == self._last:
            return
        self._last = text
        try:
            fd, tmp = tempfile.mkstemp(prefix=".state-", dir=self.path.parent)
        except OSError as exc:
            log.warning("cannot write the test state file %s: %s", self.path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot write the test state file %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
