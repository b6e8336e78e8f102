"""Text helpers, colours and small widgets shared by the tray's dialogs and windows.

Everything a dialog shows about a request may come from the requesting
process (argv, args, command lines, code), so it is treated as hostile text:

* labels are always ``Qt.PlainText`` (no rich-text injection);
* :func:`visible` replaces control and invisible formatting characters
  (bidi overrides, zero-width spaces, Hangul fillers, the braille blank,
  combining marks on ASCII…: the shared rule of
  :mod:`registry_core.broker.ask.chars`) with a visible
  ``<U+XXXX>`` so the text cannot reorder or hide itself on screen;
* long values go into the read-only, height-limited boxes of
  :mod:`ollie_tray.dialogs.textboxes`, so a huge value cannot push the
  buttons off the screen.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QPainter,
    QPainterPath,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from registry_core.broker.ask.chars import reveal

RED = "#c62828"
RED_DARK = "#8e0000"
RED_TINT = "#fdecea"
AMBER = "#e08a00"
AMBER_DARK = "#6d4300"
AMBER_TINT = "#fff4e0"
GREEN = "#2e7d32"
INK = "#1b1b1b"

_KEEP = frozenset("\n\t")


def visible(text: str, *, multiline: bool = False) -> str:
    """``text`` with control and invisible format characters shown as ``<U+XXXX>``.

    With ``multiline`` newlines and tabs are kept (code, JSON); otherwise
    they are escaped too, so a one-line value stays one line.
    """
    return reveal(text, unicode_tag, _KEEP if multiline else frozenset())


def unicode_tag(char: str) -> str:
    """How the dialogs show a character a person could not see: ``<U+200B>``."""
    return f"<U+{ord(char):04X}>"


def shell_join(argv: Sequence[str]) -> str:
    """``argv`` as one shell-quoted line (what a person would type)."""
    return visible(shlex.join(argv))


def pretty_json(value: Mapping[str, Any] | None) -> str:
    """``value`` as indented JSON for display (non-ASCII kept, invisibles escaped)."""
    if value is None:
        return "null"
    text = json.dumps(dict(value), indent=2, ensure_ascii=False, default=repr)
    return visible(text, multiline=True)


def short_sha(sha256: str | None, length: int = 12) -> str:
    return (sha256 or "")[:length]


def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def scaled_font(base: QFont, factor: float, *, bold: bool = False) -> QFont:
    font = QFont(base)
    if font.pointSizeF() > 0:
        font.setPointSizeF(font.pointSizeF() * factor)
    else:
        font.setPixelSize(round(font.pixelSize() * factor))
    font.setBold(bold)
    return font


class Form(QGridLayout):
    """Rows of muted, right-aligned captions and their values.

    A grid rather than ``QFormLayout``: the latter misjudges the height of
    wrapped values (height-for-width) and leaves gaps or squeezes rows.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setHorizontalSpacing(14)
        self.setVerticalSpacing(7)
        self.setColumnStretch(1, 1)
        self._rows = 0

    def add_row(self, caption: str, field: QWidget, *, control: bool = False) -> QLabel:
        """Add ``caption: field``; the caption is the field's buddy (for its ``&`` mnemonic).

        ``control`` centres the caption on an input row; text values align to the top.
        """
        label = QLabel(caption)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setAccessibleName(caption.replace("&", ""))
        label.setBuddy(field)
        palette = label.palette()
        palette.setColor(label.foregroundRole(), palette.color(palette.ColorRole.PlaceholderText))
        label.setPalette(palette)
        vertical = Qt.AlignmentFlag.AlignVCenter if control else Qt.AlignmentFlag.AlignTop
        label.setAlignment(Qt.AlignmentFlag.AlignRight | vertical)
        if getattr(field, "framed", False):  # a framed textboxes.MonoBox
            label.setContentsMargins(0, 5, 0, 0)  # line up with the box's first line
        self.addWidget(label, self._rows, 0, Qt.AlignmentFlag.AlignRight | vertical)
        self.addWidget(field, self._rows, 1)
        self._rows += 1
        return label

    def add_space(self, height: int) -> None:
        """An empty row (a little air before an input)."""
        self.setRowMinimumHeight(self._rows, height)
        self._rows += 1


def plain_label(
    text: str, *, wrap: bool = True, scale: float | None = None, style: str = ""
) -> QLabel:
    """A plain-text label named after its text; ``scale`` makes it a bold title."""
    label = QLabel(visible(text))
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    if scale is not None:
        label.setFont(scaled_font(label.font(), scale, bold=True))
    if style:
        label.setStyleSheet(style)
    label.setAccessibleName(label.text())
    return label


def header_row(icon: QLabel, *rows: QWidget | QLayout) -> QHBoxLayout:
    """An icon on the left of a column of title, explanation, tags."""
    column = QVBoxLayout()
    column.setSpacing(4)
    for item in rows:
        if isinstance(item, QWidget):
            column.addWidget(item)
        else:
            column.addLayout(item)
    row = QHBoxLayout()
    row.setSpacing(14)
    row.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
    row.addLayout(column, 1)
    return row


def section_title(text: str, parent: QWidget | None = None) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setFont(scaled_font(label.font(), 1.0, bold=True))
    label.setContentsMargins(0, 8, 0, 2)
    label.setAccessibleName(text)
    return label


def badge(text: str, background: str, foreground: str = "#ffffff") -> QLabel:
    """A small pill-shaped tag such as ``REMOTE · build-server``."""
    label = QLabel(visible(text))
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setStyleSheet(
        f"QLabel {{ background: {background}; color: {foreground}; border-radius: 8px;"
        " padding: 2px 9px; font-weight: bold; }"
    )
    label.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
    label.setAccessibleName(visible(text))
    return label


class Panel(QFrame):
    """A tinted, bordered box for headers and warnings; its text is always dark on light."""

    def __init__(self, border: str, tint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("panel")
        self.setStyleSheet(
            f"QFrame#panel {{ background: {tint}; border: 1px solid {border};"
            f" border-left: 5px solid {border}; border-radius: 6px; }}"
            f" QFrame#panel QLabel {{ color: {INK}; background: transparent; }}"
        )
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(14, 10, 14, 10)
        self.body.setSpacing(4)


def warning_panel(title: str, lines: Iterable[str], name: str) -> Panel:
    """The loud red panel for things a person must not miss (registry mismatches)."""
    panel = Panel(RED, RED_TINT)
    panel.setAccessibleName(name)
    heading = QLabel(title)
    heading.setTextFormat(Qt.TextFormat.PlainText)
    heading.setWordWrap(True)
    heading.setFont(scaled_font(heading.font(), 1.05, bold=True))
    heading.setStyleSheet(f"color: {RED_DARK};")
    heading.setAccessibleName(title)
    panel.body.addWidget(heading)
    for line in lines:
        item = QLabel(f"•  {visible(line)}")
        item.setTextFormat(Qt.TextFormat.PlainText)
        item.setWordWrap(True)
        item.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        item.setAccessibleName(visible(line))
        panel.body.addWidget(item)
    return panel


def glyph_pixmap(color: str, glyph: str, size: int = 48, *, shape: str = "circle") -> QPixmap:
    """A crisp icon: a filled circle, triangle, rounded square or padlock with a white glyph.

    Drawn rather than taken from the style, so it looks the same on every
    desktop (and in the offscreen platform the tests use).
    """
    ratio = 2.0  # draw at 2x so it stays sharp on HiDPI screens
    pixmap = QPixmap(round(size * ratio), round(size * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    box = QRectF(1, 1, size - 2, size - 2)
    text_box = QRectF(box)
    if shape == "triangle":
        path = QPainterPath()
        path.moveTo(QPointF(size / 2, 2))
        path.lineTo(QPointF(size - 2, size - 4))
        path.lineTo(QPointF(2, size - 4))
        path.closeSubpath()
        pen = QPen(QColor(color), 3)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        painter.setPen(pen)
        painter.drawPath(path)
        text_box = QRectF(0, size * 0.22, size, size * 0.72)
    elif shape == "square":
        painter.drawRoundedRect(box, size * 0.22, size * 0.22)
    elif shape == "lock":
        painter.setPen(QPen(QColor(color), size * 0.11))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(size * 0.27, size * 0.08, size * 0.46, size * 0.6), 9, 9)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(color))
        text_box = QRectF(size * 0.1, size * 0.4, size * 0.8, size * 0.56)
        painter.drawRoundedRect(text_box, size * 0.1, size * 0.1)
    else:
        painter.drawEllipse(box)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(round(size * (0.5 if shape != "triangle" else 0.46)))
    painter.setFont(font)
    painter.setPen(QColor("#ffffff"))
    painter.drawText(text_box, Qt.AlignmentFlag.AlignCenter, glyph)
    painter.end()
    return pixmap


def icon_label(pixmap: QPixmap, name: str) -> QLabel:
    label = QLabel()
    label.setPixmap(pixmap)
    label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter)
    label.setAccessibleName(name)
    return label


def hbox(*widgets: QWidget, stretch_after: bool = True, spacing: int = 8) -> QHBoxLayout:
    row = QHBoxLayout()
    row.setSpacing(spacing)
    for widget in widgets:
        row.addWidget(widget)
    if stretch_after:
        row.addStretch(1)
    return row
