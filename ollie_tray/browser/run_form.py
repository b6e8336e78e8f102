"""The "Run…" dialog: a form generated from a tool's ``args`` schema, run through a Dispatcher.

Each property gets an editor (``arg_editors.py``; path-like strings a file
chooser).  Values are checked field by field, then against the whole schema
with the dispatcher's own :func:`validate_args`; errors are shown next to the
field.  Enter runs the tool (the form stays open); Esc and Close close it.
The result is shown rendered from its content blocks (``content_view.py``:
text, images), with stdout, stderr and the raw JSON one tab away.

Threading: :meth:`Dispatcher.call` blocks (the tool runs, the elevation gate
may wait for a person), so it runs on ``QThreadPool.globalInstance()``; the
result comes back through a queued Qt signal.  No asyncio is needed, so the
dialog works the same under qasync and in plain pytest-qt.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtGui import QFontDatabase, QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ollie_tray.browser.arg_editors import (
    ArgEditor,
    ArgSpec,
    FieldError,
    allows_extra,
    arg_specs,
    box,
    is_path_like,
)
from ollie_tray.browser.content_view import ContentView
from registry_core.dispatch import CallOptions, CallResult, Dispatcher, validate_args
from registry_core.errors import ArgumentsError
from registry_core.registry import Tool

__all__ = ["ArgEditor", "ArgSpec", "FieldError", "RunForm", "arg_specs", "is_path_like"]

STDERR_TAB = 2
RAW_TAB = 3


class _CallSignals(QObject):
    done = Signal(object)
    failed = Signal(str)


class _CallTask(QRunnable):
    def __init__(self, dispatcher: Dispatcher, name: str, args: Any, options: CallOptions) -> None:
        super().__init__()
        self.signals = _CallSignals()
        self._call = (dispatcher, name, args, options)

    def run(self) -> None:
        dispatcher, name, args, options = self._call
        try:
            result = dispatcher.call(name, args, options)
        except Exception as exc:  # every failure is shown in the dialog
            self.signals.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.signals.done.emit(result)


def _mono(widget: QPlainTextEdit) -> QPlainTextEdit:
    widget.setReadOnly(True)
    widget.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return widget


class RunForm(QDialog):
    """Fill in a tool's arguments and run it through the dispatcher."""

    #: a :class:`CallResult` after a run that started
    run_finished = Signal(object)
    #: an error message: the call could not start or the dispatcher raised
    run_failed = Signal(str)
    #: a validation message (nothing ran)
    invalid = Signal(str)

    def __init__(
        self,
        tool: Tool,
        dispatcher: Dispatcher,
        cwd: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.tool = tool
        self.dispatcher = dispatcher
        self.running = False
        self._task: _CallTask | None = None
        self.setWindowTitle(f"Run {tool.name}")
        self.resize(720, 640)
        heading = QLabel(f"<b>{tool.name}</b> — {tool.description}")
        heading.setWordWrap(True)
        form = QFormLayout()
        self.editors: dict[str, ArgEditor] = {}
        for spec in arg_specs(tool.args):
            editor = self.editors[spec.name] = ArgEditor(spec)
            label = QLabel(f"<b>{spec.name}</b> *" if spec.required else spec.name)
            label.setToolTip(spec.type_text)
            form.addRow(label, box(QVBoxLayout(), editor.row(), editor.error, margins=0))
        self.extra: QPlainTextEdit | None = None
        if allows_extra(tool.args):
            self.extra = QPlainTextEdit()
            self.extra.setFixedHeight(54)
            self.extra.setPlaceholderText('More arguments as a JSON object, e.g. {"count": 3}')
            self.extra.setAccessibleName("Additional arguments")
            form.addRow("Other (JSON):", self.extra)
        if not self.editors and self.extra is None:
            form.addRow(QLabel("This tool takes no arguments."))
        # Sandboxed calls are refused in $HOME (docs/security.md §2a): without a
        # directory of the caller's, a fresh empty scratch directory is the default.
        self.cwd_edit = QLineEdit(cwd or tempfile.mkdtemp(prefix="ollie-run-"))
        self.cwd_edit.setAccessibleName("Working directory")
        self.cwd_edit.setToolTip(
            "Where the tool runs; a sandboxed tool may write here. "
            "Your home directory and Ollie's own directories are refused."
        )
        self.timeout_spin = QDoubleSpinBox()
        self.timeout_spin.setRange(1, 3600)
        self.timeout_spin.setValue(60)
        self.timeout_spin.setSuffix(" s")
        self.elevated_box = QCheckBox("Run outside the sandbox (asks the elevation broker)")
        form.addRow("Working directory:", self.cwd_edit)
        form.addRow("Timeout:", self.timeout_spin)
        if tool.needs_elevation:
            gate = "approval, then your sudo password" if tool.sudo else "approval"
            form.addRow("Elevation:", QLabel(f"runs outside the sandbox after the broker's {gate}"))
        else:
            form.addRow("", self.elevated_box)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.status = QLabel("Not run yet.")
        self.stdout, self.stderr, self.content = (_mono(QPlainTextEdit()) for _ in range(3))
        self.result_view = ContentView()
        self.outputs = QTabWidget()
        self.outputs.addTab(self.result_view, "Result")
        for widget, title in ((self.stdout, "stdout"), (self.stderr, "stderr")):
            self.outputs.addTab(widget, title)
        self.outputs.addTab(self.content, "Raw JSON")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.run_button = self.buttons.addButton("&Run", QDialogButtonBox.ButtonRole.ApplyRole)
        # Enter runs (keyPressEvent); no button but Run may become the default.
        for button in self.buttons.buttons():
            if isinstance(button, QPushButton):
                button.setAutoDefault(False)
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.run)
        self.buttons.rejected.connect(self.reject)
        top, bottom = QWidget(), QWidget()
        box(QVBoxLayout(top), heading, form, self.message, None, margins=0)
        box(QVBoxLayout(bottom), self.status, self.outputs, margins=0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(top)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(scroll)
        splitter.addWidget(bottom)
        splitter.setChildrenCollapsible(False)
        box(QVBoxLayout(self), splitter, self.buttons)

    def collect(self) -> dict[str, Any]:
        """The arguments as a JSON object; raises FieldError / ArgumentsError when invalid."""
        args: dict[str, Any] = {}
        if self.extra is not None and self.extra.toPlainText().strip():
            try:
                extra = json.loads(self.extra.toPlainText())
            except ValueError as exc:
                raise FieldError("(other)", f"not valid JSON: {exc}") from exc
            if not isinstance(extra, dict):
                raise FieldError("(other)", "must be a JSON object")
            args.update(extra)
        for name, editor in self.editors.items():
            present, value = editor.value()
            if present:
                args[name] = value
        validate_args(self.tool, args)
        return args

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Enter runs the tool (QDialog's default would close the form and lose the input)."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        ):
            self.run()
            event.accept()
            return
        super().keyPressEvent(event)

    def _show_invalid(self, field: str, message: str) -> None:
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        editor = self.editors.get(root)
        if editor is not None:
            editor.show_error(message)
        text = f"{field}: {message}"
        self.message.setText(f"<span style='color:#b3261e'>Not run — {text}</span>")
        self.invalid.emit(text)

    def run(self) -> None:
        if self.running:
            return
        for editor in self.editors.values():
            editor.show_error("")
        try:
            args = self.collect()
        except FieldError as exc:
            self._show_invalid(exc.name, exc.message)
            return
        except ArgumentsError as exc:
            self._show_invalid(exc.field, exc.message)
            return
        cwd = os.path.expanduser(self.cwd_edit.text().strip() or "~")
        if not os.path.isdir(cwd):
            self._show_invalid("working directory", f"{cwd} is not a directory")
            return
        options = CallOptions(
            cwd=cwd, timeout=self.timeout_spin.value(), elevated=self.elevated_box.isChecked()
        )
        self.message.setText("")
        self.status.setText(f"Running {self.tool.name}…")
        self.running = True
        self.run_button.setEnabled(False)
        task = _CallTask(self.dispatcher, self.tool.name, args, options)
        task.signals.done.connect(self._done)
        task.signals.failed.connect(self._failed)
        self._task = task  # keep the Python object (and its signals) alive until it reports
        QThreadPool.globalInstance().start(task)

    def _finish(self) -> None:
        self.running = False
        self.run_button.setEnabled(True)
        self._task = None

    def _done(self, result: CallResult) -> None:
        self._finish()
        colour = "#1e7e34" if result.ok else "#b3261e"
        where = (
            "sandboxed" if result.sandboxed else ("sudo" if result.sudo else "outside the sandbox")
        )
        extras = [where, f"{result.duration * 1000:.0f} ms"]
        if result.timed_out:
            extras.append("timed out")
        if result.truncated:
            extras.append("output truncated")
        self.status.setText(
            f"<b style='color:{colour}'>exit code {result.exit_code}</b> · " + " · ".join(extras)
        )
        self.stdout.setPlainText(result.stdout)
        self.stderr.setPlainText(result.stderr)
        label = "Raw JSON (structured)" if result.structured else "Raw JSON"
        self.outputs.setTabText(RAW_TAB, label)
        self.content.setPlainText(json.dumps(result.content, indent=2, ensure_ascii=False))
        self.result_view.show_blocks(result.content)
        self.outputs.setCurrentIndex(0 if result.stdout or not result.stderr else STDERR_TAB)
        self.run_finished.emit(result)

    def _failed(self, message: str) -> None:
        self._finish()
        self.status.setText(f"<b style='color:#b3261e'>Did not run</b> — {message}")
        self.run_failed.emit(message)
