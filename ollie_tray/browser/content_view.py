"""A tool's result as a person reads it: its content blocks rendered, not its JSON.

The Run… form shows :attr:`CallResult.content` here: ``text`` blocks as
selectable plain text, ``image`` blocks (base64 ``data`` with a ``mimeType``)
as pictures, anything else as its JSON (so nothing is hidden).  The raw JSON
stays one tab away in the form.  Text from the tool is shown as plain text
only (never rich text), with control and bidi characters made visible.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QScrollArea, QVBoxLayout, QWidget

from ollie_tray.dialogs import common as c

MAX_IMAGE_BYTES = 16 * 1024 * 1024


class ContentView(QScrollArea):
    """Rendered content blocks; :meth:`show_blocks` replaces what is shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setAccessibleName("Result")
        self.blocks: list[QWidget] = []
        self._holder = QWidget()
        self._layout = QVBoxLayout(self._holder)
        self._layout.addStretch(1)
        self.setWidget(self._holder)

    def show_blocks(self, blocks: Sequence[Mapping[str, Any]]) -> None:
        for widget in self.blocks:
            self._layout.removeWidget(widget)
            widget.deleteLater()
        self.blocks = [self._render(block) for block in blocks]
        for index, widget in enumerate(self.blocks):
            self._layout.insertWidget(index, widget)

    def texts(self) -> list[str]:
        """What each block shows as text ("" for a picture), for tests and copying."""
        out = []
        for widget in self.blocks:
            out.append(widget.toPlainText() if isinstance(widget, QPlainTextEdit) else "")
        return out

    def _render(self, block: Mapping[str, Any]) -> QWidget:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return _text(block["text"], "Text result")
        if kind == "image":
            picture = _image(block)
            if picture is not None:
                return picture
        return _text(json.dumps(block, indent=2, ensure_ascii=False), f"{kind} block (JSON)")


def _text(text: str, name: str) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setReadOnly(True)
    box.setPlainText(c.visible(text, multiline=True))
    box.setAccessibleName(name)
    box.setMinimumHeight(60)
    return box


def _image(block: Mapping[str, Any]) -> QLabel | None:
    data = block.get("data")
    if not isinstance(data, str) or len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    pixmap = QPixmap()
    if not pixmap.loadFromData(raw):
        return None
    label = QLabel()
    label.setPixmap(pixmap)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft)
    mime = block.get("mimeType")
    label.setAccessibleName(f"Image result ({mime})" if isinstance(mime, str) else "Image result")
    label.setToolTip(
        f"{pixmap.width()} x {pixmap.height()} px {mime if isinstance(mime, str) else ''}"
    )
    return label
