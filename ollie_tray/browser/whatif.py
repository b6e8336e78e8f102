"""The "What if…" panel: evaluate the registry for another host.

A :class:`WhatIf` holds the overrides (os, arch, environment variables set or
unset, ``$PATH``, binaries and files that exist or not).  :meth:`WhatIf.facts`
turns them into a simulated :class:`HostFacts` on top of this host's facts,
and :func:`simulated_loader` builds a separate :class:`RegistryLoader` whose
``facts_factory`` returns those facts, so the real registry is never touched.
Every condition detail the simulation produces ends in "(simulated)", and the
window shows a SIMULATED banner while one is active.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from registry_core.errors import MetaError
from registry_core.registry import HostFacts, RegistryLoader, Status, Tool
from registry_core.registry.evaluate import evaluate
from registry_core.registry.meta import MAX_META_BYTES, parse_meta

OS_NAMES = ("linux", "darwin", "freebsd", "openbsd", "netbsd", "windows")
ARCH_NAMES = ("amd64", "arm64", "386", "arm", "riscv64", "ppc64le", "s390x")
BANNER_STYLE = (
    "background: #fff4ce; color: #5c4400; border: 1px solid #e0b000;"
    " border-radius: 4px; padding: 6px 10px;"
)


class WhatIfError(ValueError):
    """A line of the "What if…" form that cannot be understood."""

    def __init__(self, field_name: str, line: int, message: str) -> None:
        self.field_name = field_name
        self.line = line
        super().__init__(f"{field_name}, line {line}: {message}")


def _lines(text: str) -> list[tuple[int, str]]:
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((number, line))
    return out


def parse_env(text: str) -> tuple[dict[str, str], frozenset[str]]:
    """``KEY=VALUE`` lines set a variable (``KEY=`` makes it empty); ``-KEY`` unsets it."""
    values: dict[str, str] = {}
    unset: set[str] = set()
    for number, line in _lines(text):
        if line.startswith("-") or line.startswith("unset "):
            name = line.removeprefix("unset ").lstrip("-").strip()
            if not name.isidentifier():
                raise WhatIfError("Environment", number, f"not a variable name: {name!r}")
            unset.add(name)
            values.pop(name, None)
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise WhatIfError("Environment", number, "write KEY=VALUE, or -KEY to unset")
        values[name] = value
        unset.discard(name)
    return values, frozenset(unset)


def parse_binaries(text: str) -> dict[str, str]:
    """``name=/abs/path`` lines (a bare ``name`` means ``/usr/bin/name``)."""
    found: dict[str, str] = {}
    for number, line in _lines(text):
        name, sep, path = (part.strip() for part in line.partition("="))
        if not name or "/" in name:
            raise WhatIfError("Binaries present", number, "write name=/path/to/name")
        path = path if sep and path else f"/usr/bin/{name}"
        if not path.startswith("/"):
            raise WhatIfError("Binaries present", number, f"{path!r} is not an absolute path")
        found[name] = path
    return found


def parse_names(text: str, field_name: str, absolute: bool = False) -> frozenset[str]:
    names: set[str] = set()
    for number, line in _lines(text):
        if absolute and not line.startswith(("/", "~")):
            raise WhatIfError(field_name, number, f"{line!r} is not an absolute path")
        names.add(line)
    return frozenset(names)


@dataclass(frozen=True)
class WhatIf:
    """Overrides describing a hypothetical host; ``None``/empty = as on this host."""

    os_name: str | None = None
    arch: str | None = None
    path: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    unset: frozenset[str] = frozenset()
    binaries: Mapping[str, str] = field(default_factory=dict)
    missing_binaries: frozenset[str] = frozenset()
    present_files: frozenset[str] = frozenset()
    absent_files: frozenset[str] = frozenset()

    def is_empty(self) -> bool:
        return self == WhatIf()

    def describe(self) -> str:
        parts = []
        if self.os_name:
            parts.append(f"os={self.os_name}")
        if self.arch:
            parts.append(f"arch={self.arch}")
        if self.path is not None:
            parts.append("PATH overridden")
        parts += [f"{k}={v!r}" for k, v in sorted(self.env.items())]
        parts += [f"unset {k}" for k in sorted(self.unset)]
        parts += [f"+binary {b}" for b in sorted(self.binaries)]
        parts += [f"no binary {b}" for b in sorted(self.missing_binaries)]
        parts += [f"+file {f}" for f in sorted(self.present_files)]
        parts += [f"no file {f}" for f in sorted(self.absent_files)]
        return ", ".join(parts) or "no overrides"

    def facts(self, base: HostFacts) -> HostFacts:
        """A fresh simulated HostFacts: ``base`` with these overrides applied."""
        env = {k: v for k, v in base.env.items() if k not in self.unset}
        env.update(self.env)
        if self.path is not None:
            env["PATH"] = self.path
        return HostFacts(
            os_name=self.os_name or base.os_name,
            arch=self.arch or base.arch,
            env=env,
            simulated=True,
            extra_binaries={**base.extra_binaries, **self.binaries},
            missing_binaries=(base.missing_binaries | self.missing_binaries) - set(self.binaries),
            present_files=(base.present_files | self.present_files) - self.absent_files,
            absent_files=(base.absent_files | self.absent_files) - self.present_files,
        )


def simulated_loader(loader: RegistryLoader, what_if: WhatIf) -> RegistryLoader:
    """A loader over the same directories that sees the hypothetical host."""
    base = loader.facts
    return RegistryLoader(loader.dirs, env=base.env, facts_factory=lambda: what_if.facts(base))


def evaluate_meta_file(path: Path, facts: HostFacts) -> Tool:
    """Parse and evaluate one ``.meta`` on its own (a shadowed definition's own view)."""
    name = path.name.removesuffix(".meta")
    try:
        data = path.read_bytes()[: MAX_META_BYTES + 1]
    except OSError as exc:
        error = MetaError(str(path), f"cannot read: {exc.strerror or exc}")
        return Tool(name=name, source_file=str(path), status=Status.BROKEN, errors=(error,))
    parsed = parse_meta(path, data)
    if parsed.meta is None:
        return Tool(name, str(path), Status.BROKEN, errors=parsed.errors, warnings=parsed.warnings)
    return evaluate(parsed.meta, facts)


def _text_box(placeholder: str, name: str) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setPlaceholderText(placeholder)
    box.setAccessibleName(name)
    box.setTabChangesFocus(True)
    box.setFixedHeight(64)
    return box


def _combo(choices: tuple[str, ...], current: str, name: str) -> QComboBox:
    combo = QComboBox()
    combo.setEditable(True)
    combo.addItem("")
    combo.addItems(list(choices))
    combo.setAccessibleName(name)
    line = combo.lineEdit()
    if line is not None:
        line.setPlaceholderText(f"as this host ({current})")
    return combo


class WhatIfPanel(QWidget):
    """Form for the overrides; emits :attr:`changed` with a WhatIf, or None when cleared."""

    changed = Signal(object)

    def __init__(self, host: HostFacts, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("What if simulation")
        self.active: WhatIf | None = None
        intro = QLabel(
            "<b>SIMULATED host.</b> Override what this machine looks like to see which"
            " variant another host would get. Nothing here changes the real registry."
        )
        intro.setWordWrap(True)
        intro.setStyleSheet(BANNER_STYLE)
        self.os_combo = _combo(OS_NAMES, host.os_name, "Simulated operating system")
        self.arch_combo = _combo(ARCH_NAMES, host.arch, "Simulated architecture")
        self.path_edit = QLineEdit()
        self.path_edit.setPlaceholderText("as this host (leave empty)")
        self.path_edit.setAccessibleName("Simulated PATH")
        self.env_edit = _text_box("DISPLAY=:0\n-SSH_CONNECTION  (unset)", "Environment variables")
        self.binaries_edit = _text_box("nvidia-smi=/usr/bin/nvidia-smi", "Binaries present")
        self.missing_edit = _text_box("journalctl", "Binaries missing")
        self.present_edit = _text_box("/var/log/syslog", "Files present")
        self.absent_edit = _text_box("/etc/os-release", "Files absent")
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("&OS:", self.os_combo)
        form.addRow("&Arch:", self.arch_combo)
        form.addRow("&PATH:", self.path_edit)
        form.addRow("&Environment:", self.env_edit)
        form.addRow("&Binaries present:", self.binaries_edit)
        form.addRow("Binaries &missing:", self.missing_edit)
        form.addRow("Files p&resent:", self.present_edit)
        form.addRow("Files a&bsent:", self.absent_edit)
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #b3261e;")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.apply_button = QPushButton("&Simulate")
        self.apply_button.setDefault(True)
        self.apply_button.setToolTip("Re-evaluate every tool for this host (Ctrl+Return)")
        self.apply_button.clicked.connect(self.apply)
        self.clear_button = QPushButton("&Clear")
        self.clear_button.setToolTip("Back to this machine")
        self.clear_button.clicked.connect(self.clear)
        QShortcut(QKeySequence("Ctrl+Return"), self, self.apply)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.clear_button)
        buttons.addWidget(self.apply_button)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addLayout(buttons)
        layout.addStretch(1)

    def what_if(self) -> WhatIf:
        """The form's overrides; raises :class:`WhatIfError` for a bad line."""
        env, unset = parse_env(self.env_edit.toPlainText())
        path = self.path_edit.text().strip()
        return WhatIf(
            os_name=self.os_combo.currentText().strip() or None,
            arch=self.arch_combo.currentText().strip() or None,
            path=path or None,
            env=env,
            unset=unset,
            binaries=parse_binaries(self.binaries_edit.toPlainText()),
            missing_binaries=parse_names(self.missing_edit.toPlainText(), "Binaries missing"),
            present_files=parse_names(self.present_edit.toPlainText(), "Files present", True),
            absent_files=parse_names(self.absent_edit.toPlainText(), "Files absent", True),
        )

    def apply(self) -> None:
        try:
            what_if = self.what_if()
        except WhatIfError as exc:
            self.error_label.setText(str(exc))
            self.error_label.show()
            return
        self.error_label.hide()
        self.active = None if what_if.is_empty() else what_if
        self.changed.emit(self.active)

    def clear(self) -> None:
        for combo in (self.os_combo, self.arch_combo):
            combo.setCurrentIndex(0)
            combo.setEditText("")
        self.path_edit.clear()
        for box in (
            self.env_edit,
            self.binaries_edit,
            self.missing_edit,
            self.present_edit,
            self.absent_edit,
        ):
            box.clear()
        self.error_label.hide()
        self.active = None
        self.changed.emit(None)


__all__ = ["WhatIf", "WhatIfError", "WhatIfPanel", "simulated_loader"]
