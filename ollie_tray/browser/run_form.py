"""The "Run…" dialog: a form generated from a tool's ``args`` schema, run through a Dispatcher.

Each property becomes an editor: an enum a combo box, a boolean a
"not set / true / false" combo, a string, integer or number a line edit
(so "not set" stays possible and a bad number is reported, not silently
clamped), anything else (arrays, objects) a JSON text box.  Values are checked
field by field, then against the whole schema with the dispatcher's own
:func:`validate_args`; errors are shown next to the field.

Threading: :meth:`Dispatcher.call` blocks (the tool runs, the elevation gate
may wait for a person), so it runs on ``QThreadPool.globalInstance()``; the
result comes back through a queued Qt signal.  No asyncio is needed, so the
dialog works the same under qasync and in plain pytest-qt.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QBoxLayout,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from registry_core.dispatch import CallOptions, CallResult, Dispatcher, validate_args
from registry_core.errors import ArgumentsError
from registry_core.registry import Tool

_L = TypeVar("_L", bound=QBoxLayout)
_UNSET = "(not set)"
_INVALID = "border: 1px solid #b3261e;"
_Layout = QBoxLayout | QFormLayout
_LIMITS = {
    "minimum": "≥",
    "maximum": "≤",
    "minLength": "min length",
    "maxLength": "max length",
    "pattern": "matches",
}


def box(layout: _L, *items: QWidget | _Layout | None, margins: int | None = None) -> _L:
    """Fill ``layout`` with widgets and layouts; ``None`` adds a stretch."""
    for item in items:
        if item is None:
            layout.addStretch(1)
        elif isinstance(item, QWidget):
            layout.addWidget(item)
        else:
            layout.addLayout(item)
    if margins is not None:
        layout.setContentsMargins(margins, margins, margins, margins)
    return layout


@dataclass(frozen=True)
class ArgSpec:
    """One property of an ``args`` schema, as the browser shows and edits it."""

    name: str
    schema: Mapping[str, Any]
    required: bool

    @property
    def kind(self) -> str:
        if isinstance(self.schema.get("enum"), list):
            return "enum"
        kind = self.schema.get("type")
        return kind if kind in ("string", "integer", "number", "boolean") else "json"

    @property
    def description(self) -> str:
        return str(self.schema.get("description", ""))

    @property
    def type_text(self) -> str:
        s = self.schema
        if self.kind == "enum":
            return "one of " + " | ".join(json.dumps(v) for v in s["enum"])
        kind = s.get("type", "any")
        text = " or ".join(kind) if isinstance(kind, list) else str(kind)
        if text == "array" and isinstance(s.get("items"), Mapping):
            text = f"array of {s['items'].get('type', 'any')}"
        limits = [f"{label} {s[key]}" for key, label in _LIMITS.items() if key in s]
        if "default" in s:
            limits.append(f"default {json.dumps(s['default'])}")
        return text + (f" ({', '.join(limits)})" if limits else "")


def arg_specs(schema: Mapping[str, Any]) -> list[ArgSpec]:
    """The properties of ``schema``, required ones first, each group in schema order."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    required = schema.get("required")
    wanted = set(required) if isinstance(required, list) else set()
    specs = [ArgSpec(n, p if isinstance(p, Mapping) else {}, n in wanted) for n, p in props.items()]
    return sorted(specs, key=lambda s: not s.required)


def allows_extra(schema: Mapping[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


class FieldError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message
        super().__init__(f"{name}: {message}")


class ArgEditor:
    """The editor of one property; :meth:`value` returns (is set, value) or raises FieldError."""

    def __init__(self, spec: ArgSpec) -> None:
        self.spec = spec
        self.error = QLabel()
        self.error.setStyleSheet("color: #b3261e;")
        self.error.setWordWrap(True)
        self.error.hide()
        default = spec.schema.get("default")
        self.widget: QComboBox | QLineEdit | QPlainTextEdit
        if spec.kind in ("enum", "boolean"):
            combo = QComboBox()
            choices = spec.schema["enum"] if spec.kind == "enum" else [True, False]
            self._choices = [None, *choices] if not spec.required else list(choices)
            combo.addItems([_UNSET if c is None else self._label(c) for c in self._choices])
            if default in self._choices:
                combo.setCurrentIndex(self._choices.index(default))
            self.widget = combo
        elif spec.kind == "json":
            box = QPlainTextEdit()
            box.setFixedHeight(60)
            box.setPlaceholderText(
                "JSON, e.g. " + ('["a", "b"]' if "array" in str(spec.schema.get("type")) else "{}")
            )
            self.widget = box
        else:
            line = QLineEdit()
            hint = f"default: {default}" if default is not None else spec.description
            line.setPlaceholderText(hint)
            self.widget = line
        self.widget.setAccessibleName(spec.name)
        self.widget.setToolTip(f"{spec.type_text}\n{spec.description}".strip())

    @staticmethod
    def _label(choice: object) -> str:
        return choice if isinstance(choice, str) else json.dumps(choice)

    def value(self) -> tuple[bool, Any]:
        name, kind, w = self.spec.name, self.spec.kind, self.widget
        if isinstance(w, QComboBox):
            choice = self._choices[w.currentIndex()]
            return choice is not None, choice
        text = w.toPlainText() if isinstance(w, QPlainTextEdit) else w.text()
        if not text.strip():
            if self.spec.required:
                raise FieldError(name, "is required")
            return False, None
        if kind == "string":
            return True, text
        if kind == "integer":
            if not re.fullmatch(r"\s*[-+]?\d+\s*", text):
                raise FieldError(name, f"{text.strip()!r} is not an integer")
            return True, int(text)
        try:
            value = json.loads(text)
        except ValueError as exc:
            what = "a number" if kind == "number" else "valid JSON"
            raise FieldError(name, f"{text.strip()!r} is not {what}") from exc
        if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise FieldError(name, f"{text.strip()!r} is not a number")
        return True, value

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))
        self.widget.setStyleSheet(_INVALID if message else "")


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
            form.addRow(label, box(QVBoxLayout(), editor.widget, editor.error, margins=0))
        self.extra: QPlainTextEdit | None = None
        if allows_extra(tool.args):
            self.extra = QPlainTextEdit()
            self.extra.setFixedHeight(54)
            self.extra.setPlaceholderText('More arguments as a JSON object, e.g. {"count": 3}')
            self.extra.setAccessibleName("Additional arguments")
            form.addRow("Other (JSON):", self.extra)
        if not self.editors and self.extra is None:
            form.addRow(QLabel("This tool takes no arguments."))
        self.cwd_edit = QLineEdit(cwd or str(Path.home()))
        self.cwd_edit.setAccessibleName("Working directory")
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
        self.outputs = QTabWidget()
        for widget, title in ((self.stdout, "stdout"), (self.stderr, "stderr")):
            self.outputs.addTab(widget, title)
        self.outputs.addTab(self.content, "Content blocks")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.run_button = self.buttons.addButton("&Run", QDialogButtonBox.ButtonRole.ApplyRole)
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
        label = "Content blocks (structured)" if result.structured else "Content blocks"
        self.outputs.setTabText(2, label)
        self.content.setPlainText(json.dumps(result.content, indent=2, ensure_ascii=False))
        self.outputs.setCurrentIndex(0 if result.stdout or not result.stderr else 1)
        self.run_finished.emit(result)

    def _failed(self, message: str) -> None:
        self._finish()
        self.status.setText(f"<b style='color:#b3261e'>Did not run</b> — {message}")
        self.run_failed.emit(message)
