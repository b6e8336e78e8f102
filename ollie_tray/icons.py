"""Icons of the tray states and the Tool Browser statuses, from ``resources/icons``."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

from registry_core.paths import resources_dir


class TrayState(StrEnum):
    IDLE = "idle"
    PENDING = "pending"
    PAUSED = "paused"
    ERROR = "error"


def icon_path(name: str) -> Path:
    return resources_dir() / "icons" / f"{name}.svg"


@cache
def icon(name: str) -> QIcon:
    return QIcon(str(icon_path(name)))


@cache
def app_icon() -> QIcon:
    """The application's icon: the icon theme's (``--install-desktop`` puts it in the
    user's hicolor theme, a distribution package in the system's), else the shipped file."""
    from ollie_tray.app_id import APP_ID

    return QIcon.fromTheme(APP_ID, icon(APP_ID))


def state_icon(state: TrayState, count: int = 0, size: int = 64) -> QIcon:
    """The tray icon of a state; the pending icon carries the number of requests."""
    base = icon_path(f"ollie-tray-{state.value}")
    if state is not TrayState.PENDING or count <= 0:
        return QIcon(str(base))
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(str(base)).render(painter, QRectF(0, 0, size, size))
    badge = QRectF(size * 0.46, 0, size * 0.54, size * 0.54)
    painter.setBrush(QColor("#c62828"))
    painter.setPen(QColor("white"))
    painter.drawEllipse(badge)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(int(size * (0.36 if count < 10 else 0.28)))
    painter.setFont(font)
    painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, str(count) if count < 100 else "99+")
    painter.end()
    return QIcon(pixmap)
