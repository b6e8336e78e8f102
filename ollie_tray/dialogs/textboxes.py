"""Value labels and text boxes whose height follows their width, and window fitting.

Qt lays out wrapped text by "height for width", but ``QLabel`` guesses its
minimum height at a narrow width, ``QFormLayout`` misjudges wrapped rows and
top-level windows ignore height-for-width altogether.  The widgets here
report exact heights (one line minimum, the real height from
``heightForWidth``), and :func:`fit_height` sizes a window to its content
at its current width, capped at the screen (a :class:`FitScrollArea` then
scrolls).  All text is plain and passed through :func:`common.visible`.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics, QResizeEvent, QTextLayout, QTextOption
from PySide6.QtWidgets import QFrame, QLabel, QPlainTextEdit, QScrollArea, QSizePolicy, QWidget

from ollie_tray.dialogs.common import mono_font, visible


class ValueLabel(QLabel):
    """A word-wrapped label whose minimum height is one line.

    ``QLabel`` reports the height of its text wrapped at a narrow guess as
    its minimum, which makes grid rows taller than the text; the layout gets
    the real height from ``heightForWidth``.
    """

    def minimumSizeHint(self) -> QSize:
        if not self.wordWrap():
            return super().minimumSizeHint()
        margins = self.contentsMargins()
        height = self.fontMetrics().lineSpacing() + margins.top() + margins.bottom()
        return QSize(60, height)

    def sizeHint(self) -> QSize:
        if not self.wordWrap():
            return super().sizeHint()
        margins = self.contentsMargins()
        width = min(self.fontMetrics().horizontalAdvance(self.text()) + 8, 400)
        width += margins.left() + margins.right() + 2 * self.margin()
        return QSize(width, self.heightForWidth(width))


def value_label(
    text: str, name: str, *, mono: bool = False, selectable: bool = True, wrap: bool = True
) -> QLabel:
    """A plain-text, selectable value; the accessible name says what it is and its value."""
    label = ValueLabel(visible(text))
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    if selectable:
        label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        label.setCursor(Qt.CursorShape.IBeamCursor)
    if mono:
        label.setFont(mono_font())
    label.setAccessibleName(f"{name}: {visible(text)}" if text else name)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
    label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    return label


class MonoBox(QPlainTextEdit):
    """A read-only monospace text box that grows with its content up to ``max_lines``.

    It wraps anywhere (paths and base64 have no spaces) and scrolls beyond
    ``max_lines``, so no value can make its dialog taller than planned.  Its
    height follows its width (``heightForWidth``), so layouts give it room
    for exactly the lines it needs.
    """

    def __init__(
        self,
        text: str,
        name: str,
        *,
        max_lines: int = 8,
        framed: bool = True,
        mono: bool = True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._max_lines = max(1, max_lines)
        self.framed = framed
        self.setReadOnly(True)
        if mono:
            self.setFont(mono_font())
        if not framed:
            # A selectable value that looks like a label but wraps anywhere.
            self.setFrameShape(QFrame.Shape.NoFrame)
            self.document().setDocumentMargin(0)
            self.viewport().setAutoFillBackground(False)
            self.setStyleSheet("QPlainTextEdit { background: transparent; }")
            self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self._lines_key: tuple[int, str, str] | None = None
        self._lines = 1
        self.setPlainText(text)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setTabChangesFocus(True)
        self.setAccessibleName(name)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def _wrapped_lines(self, text_width: float) -> int:
        """How many screen lines the text takes at ``text_width`` pixels (cached: the
        box is read-only, and layouts ask for the same widths again and again)."""
        key = (round(text_width), self.toPlainText(), self.font().key())
        if key != self._lines_key:
            self._lines_key, self._lines = key, self._count_lines(text_width)
        return self._lines

    def _count_lines(self, text_width: float) -> int:
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        option.setTabStopDistance(self.tabStopDistance())
        total = 0
        for paragraph in self.toPlainText().split("\n"):
            layout = QTextLayout(paragraph, self.font())
            layout.setTextOption(option)
            layout.beginLayout()
            while True:
                line = layout.createLine()
                if not line.isValid():
                    break
                line.setLineWidth(max(1.0, text_width))
                total += 1
            layout.endLayout()
            if total > self._max_lines:
                break
        return max(1, total)

    def _chrome(self) -> tuple[int, int]:
        """(horizontal, vertical) pixels around the text: frame, margins, document margin."""
        margins = self.contentsMargins()
        viewport = self.viewportMargins()
        doc = round(2 * self.document().documentMargin())
        horizontal = margins.left() + margins.right() + viewport.left() + viewport.right() + doc
        vertical = margins.top() + margins.bottom() + viewport.top() + viewport.bottom() + doc
        return horizontal, vertical

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        horizontal, vertical = self._chrome()
        # Past max_lines a scroll bar appears; the height stays at max_lines.
        lines = min(self._wrapped_lines(width - horizontal), self._max_lines)
        extra = 2 if self.framed else 1
        return lines * QFontMetrics(self.font()).lineSpacing() + vertical + extra

    def sizeHint(self) -> QSize:
        horizontal, _ = self._chrome()
        metrics = QFontMetrics(self.font())
        longest = max(metrics.horizontalAdvance(line) for line in self.toPlainText().split("\n"))
        width = min(longest + horizontal + 4, 420)
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        # One line: layouts take the real height from heightForWidth.  A
        # multi-line minimum (at some narrow width) would leave gaps.
        _, vertical = self._chrome()
        return QSize(120, QFontMetrics(self.font()).lineSpacing() + vertical)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()


class FitScrollArea(QScrollArea):
    """A frameless scroll area that asks for its content's full height.

    Its window grows to show everything (see :func:`fit_height`); only when
    the screen is too small does it shrink and scroll.
    """

    def __init__(self, content: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._content = content
        self.setWidget(content)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setAutoFillBackground(False)
        content.setAutoFillBackground(False)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        margins = self.contentsMargins()
        inner = width - margins.left() - margins.right()
        height = self._content.heightForWidth(inner)
        if height < 0:
            height = self._content.sizeHint().height()
        return height + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        width = self._content.sizeHint().width()
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(200, 120)


def fit_height(widget: QWidget) -> None:
    """Make a top-level ``widget`` exactly as tall as its layout needs at its current width.

    Qt sizes top-level windows from their layout's minimum size, which ignores
    height-for-width (wrapped labels, :class:`MonoBox`): without this a long
    wrapped title would squeeze the rows below it.  Capped at the screen.
    """
    layout = widget.layout()
    if layout is None:
        return
    layout.activate()
    needed = (
        layout.totalHeightForWidth(widget.width())
        if layout.hasHeightForWidth()
        else layout.totalSizeHint().height()
    )
    screen = widget.screen()
    if screen is not None:
        needed = min(needed, screen.availableGeometry().height() - 48)
    if needed <= 0:
        return
    if widget.minimumHeight() != needed:
        widget.setMinimumHeight(needed)
    if widget.height() != needed:
        widget.resize(widget.width(), needed)
