"""The editors of the Run… form: one per property of a tool's ``args`` schema.

Each property becomes an editor: an enum a combo box, a boolean a
"not set / true / false" combo, a string, integer or number a line edit
(so "not set" stays possible and a bad number is reported, not silently
clamped), anything else (arrays, objects) a JSON text box.  A path-like
string (``format: path``, or a name ending in ``path``/``file``) also gets a
Browse… button with a file chooser.  GUI thread only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtWidgets import (
    QBoxLayout,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)

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


def is_path_like(spec: ArgSpec) -> bool:
    """``format: path`` (or ``file``), or a name ending in ``path`` or ``file``: offer a chooser."""
    fmt = spec.schema.get("format")
    name = spec.name.lower()
    return fmt in ("path", "file") or name.endswith(("path", "file"))


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
        self.browse_button: QPushButton | None = None
        self.file_dialog: QFileDialog | None = None
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
            if spec.kind == "string" and is_path_like(spec):
                self.browse_button = QPushButton("&Browse…")
                self.browse_button.setAccessibleName(f"Choose a file for {spec.name}")
                self.browse_button.clicked.connect(self.choose_file)
        self.widget.setAccessibleName(spec.name)
        self.widget.setToolTip(f"{spec.type_text}\n{spec.description}".strip())

    def row(self) -> QWidget | _Layout:
        """The editor as placed in the form: with its Browse… button, if any."""
        if self.browse_button is None:
            return self.widget
        return box(QHBoxLayout(), self.widget, self.browse_button, margins=0)

    def choose_file(self) -> QFileDialog:
        """A file chooser (window-modal, opened with ``open()``); the choice fills the field."""
        assert isinstance(self.widget, QLineEdit)
        line = self.widget
        start = os.path.expanduser(line.text().strip()) or str(Path.home())
        dialog = QFileDialog(line.window(), f"Choose {self.spec.name}", start)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.fileSelected.connect(line.setText)
        dialog.finished.connect(dialog.deleteLater)
        self.file_dialog = dialog
        dialog.open()
        return dialog

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
