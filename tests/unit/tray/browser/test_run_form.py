"""The "Run…" form: fields from the schema, validation, and a real sandboxed run."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QBuffer, QIODevice, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPlainTextEdit
from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from ollie_tray.browser.content_view import ContentView
from ollie_tray.browser.run_form import ArgSpec, FieldError, RunForm, arg_specs, is_path_like
from registry_core.dispatch import CallResult, Dispatcher
from registry_core.registry import RegistryLoader, Tool

MakeWindow = Callable[..., BrowserWindow]
RUN_TIMEOUT = 30_000

KINDS_SCHEMA = {
    "type": "object",
    "required": ["count"],
    "properties": {
        "label": {"type": "string", "description": "A label", "default": "x"},
        "count": {"type": "integer", "minimum": 0, "description": "How many"},
        "ratio": {"type": "number"},
        "verbose": {"type": "boolean"},
        "level": {"type": "string", "enum": ["low", "high"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "additionalProperties": False,
}


@pytest.fixture
def kinds_tool(demo_dirs: list[Path], loader: RegistryLoader) -> Tool:
    meta = {"description": "Every argument type.", "args": KINDS_SCHEMA, "cmd": "/usr/bin/cat"}
    (demo_dirs[0] / "kinds.meta").write_text(json.dumps(meta))
    return loader.load().tools["kinds"]


@pytest.fixture
def form(qtbot: QtBot, kinds_tool: Tool, dispatcher: Dispatcher, tmp_path: Path) -> RunForm:
    form = RunForm(kinds_tool, dispatcher, cwd=str(work_dir(tmp_path)))
    qtbot.addWidget(form)
    form.show()
    return form


def test_arg_specs_put_required_first_and_describe_types() -> None:
    specs = arg_specs(KINDS_SCHEMA)
    assert [s.name for s in specs][:2] == ["count", "label"]
    by_name = {s.name: s for s in specs}
    assert by_name["count"].required
    assert by_name["count"].type_text == "integer (≥ 0)"
    assert by_name["label"].type_text == 'string (default "x")'
    assert by_name["level"].type_text == 'one of "low" | "high"'
    assert by_name["tags"].type_text == "array of string"
    assert [s.kind for s in specs] == [
        "integer",
        "string",
        "number",
        "boolean",
        "enum",
        "json",
        "json",
    ]
    assert arg_specs({"type": "object"}) == []
    assert ArgSpec("x", {"type": ["string", "null"]}, False).type_text == "string or null"


def test_fields_are_generated_per_schema_type(form: RunForm) -> None:
    widgets = {name: editor.widget for name, editor in form.editors.items()}
    assert isinstance(widgets["label"], QLineEdit)
    assert isinstance(widgets["count"], QLineEdit)
    assert isinstance(widgets["ratio"], QLineEdit)
    assert isinstance(widgets["verbose"], QComboBox)
    assert isinstance(widgets["level"], QComboBox)
    assert isinstance(widgets["tags"], QPlainTextEdit)
    assert isinstance(widgets["extra"], QPlainTextEdit)
    verbose = widgets["verbose"]
    assert isinstance(verbose, QComboBox)
    assert [verbose.itemText(i) for i in range(verbose.count())] == ["(not set)", "true", "false"]
    level = widgets["level"]
    assert isinstance(level, QComboBox)
    assert [level.itemText(i) for i in range(level.count())] == ["(not set)", "low", "high"]
    assert form.extra is None  # additionalProperties: false
    assert widgets["label"].placeholderText() == "default: x"


def test_collect_builds_typed_arguments(form: RunForm) -> None:
    w = {name: editor.widget for name, editor in form.editors.items()}
    w["count"].setText("3")  # type: ignore[union-attr]
    w["ratio"].setText("2.5")  # type: ignore[union-attr]
    w["verbose"].setCurrentIndex(1)  # type: ignore[union-attr]
    w["level"].setCurrentIndex(2)  # type: ignore[union-attr]
    w["tags"].setPlainText('["a", "b"]')  # type: ignore[union-attr]
    assert form.collect() == {
        "count": 3,
        "ratio": 2.5,
        "verbose": True,
        "level": "high",
        "tags": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("count", "abc", "count: 'abc' is not an integer"),
        ("count", "", "count: is required"),
        ("count", "-1", "count: -1 is less than the minimum of 0"),
        ("ratio", "fast", "ratio: 'fast' is not a number"),
        ("tags", "[1,", "tags: '[1,' is not valid JSON"),
        ("tags", "[1]", "tags[0]: 1 is not of type 'string'"),
    ],
)
def test_validation_errors_are_shown_and_nothing_runs(
    qtbot: QtBot, form: RunForm, field: str, text: str, message: str
) -> None:
    form.editors["count"].widget.setText("1")  # type: ignore[union-attr]
    editor = form.editors[field]
    if isinstance(editor.widget, QPlainTextEdit):
        editor.widget.setPlainText(text)
    else:
        editor.widget.setText(text)  # type: ignore[union-attr]
    with qtbot.waitSignal(form.invalid) as blocker:
        form.run_button.click()
    assert blocker.args == [message]
    assert not form.running
    assert editor.error.isVisible()
    assert "Not run" in form.message.text()
    assert form.status.text() == "Not run yet."


def test_field_error_carries_the_field() -> None:
    err = FieldError("count", "is required")
    assert (err.name, err.message, str(err)) == ("count", "is required", "count: is required")


def work_dir(tmp_path: Path) -> Path:
    """A project directory: not ``tmp_path``, which holds the dispatcher's config dir."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work


def test_a_real_sandboxed_run_of_greet_shows_stdout_and_exit_code(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher, tmp_path: Path
) -> None:
    greet = loader.load().tools["greet"]
    form = RunForm(greet, dispatcher, cwd=str(work_dir(tmp_path)))
    qtbot.addWidget(form)
    form.show()
    form.editors["name"].widget.setText("Ada")  # type: ignore[union-attr]
    with qtbot.waitSignal(form.run_finished, timeout=RUN_TIMEOUT) as blocker:
        form.run_button.click()
        assert form.running
        assert not form.run_button.isEnabled()
    result: CallResult = blocker.args[0]
    assert result.exit_code == 0
    assert result.sandboxed
    assert result.stdout == "Hello, Ada\n"
    assert form.stdout.toPlainText() == "Hello, Ada\n"
    assert "exit code 0" in form.status.text()
    assert "sandboxed" in form.status.text()
    assert json.loads(form.content.toPlainText()) == [{"type": "text", "text": "Hello, Ada\n"}]
    assert form.run_button.isEnabled()


def test_structured_output_shows_content_blocks(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher, tmp_path: Path
) -> None:
    target = work_dir(tmp_path) / "hello.txt"  # only the cwd is in the tool's view
    target.write_text("hi")
    file_info = loader.load().tools["file_info"]
    form = RunForm(file_info, dispatcher, cwd=str(work_dir(tmp_path)))
    qtbot.addWidget(form)
    form.editors["path"].widget.setText(str(target))  # type: ignore[union-attr]
    with qtbot.waitSignal(form.run_finished, timeout=RUN_TIMEOUT) as blocker:
        form.run()
    result: CallResult = blocker.args[0]
    assert result.structured, result
    # Rendered from the structured content, not shown as JSON; raw JSON one click away.
    assert form.outputs.currentIndex() == 0
    assert form.outputs.tabText(0) == "Result"
    [text] = form.result_view.texts()
    assert "hello.txt" in text
    assert not text.lstrip().startswith("{")
    assert form.outputs.tabText(3) == "Raw JSON (structured)"
    assert json.loads(form.content.toPlainText()) == result.content


def test_dispatcher_errors_are_reported(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher, demo_dirs: list[Path]
) -> None:
    greet = loader.load().tools["greet"]
    form = RunForm(greet, dispatcher)
    qtbot.addWidget(form)
    (demo_dirs[0] / "greet").chmod(0o644)  # the dispatcher reloads and finds no executable
    with qtbot.waitSignal(form.run_failed, timeout=RUN_TIMEOUT) as blocker:
        form.run()
    assert blocker.args[0].startswith("ExecutableError: greet:")
    assert "Did not run" in form.status.text()
    assert not form.running


def test_window_opens_the_form_for_available_tools_only(
    make_window: MakeWindow, dispatcher: Dispatcher
) -> None:
    assert make_window().open_run_form() is None  # no dispatcher: no Run…
    window = make_window(dispatcher=dispatcher)
    window.select_tool("gpu_status")
    assert not window.details.run_button.isEnabled()
    assert window.open_run_form() is None
    window.select_tool("echo_args")
    assert window.details.run_button.isEnabled()
    assert window.run_action.isEnabled()
    form = window.open_run_form()
    assert isinstance(form, RunForm)
    assert form.tool.name == "echo_args"
    assert form.extra is not None  # additionalProperties: true → free JSON field
    assert form.isVisible()
    form.close()


def test_extra_json_must_be_an_object(
    qtbot: QtBot, make_window: MakeWindow, dispatcher: Dispatcher
) -> None:
    window = make_window(dispatcher=dispatcher)
    window.select_tool("echo_args")
    form = window.open_run_form()
    assert form is not None
    assert form.extra is not None
    form.extra.setPlainText("[1, 2]")
    with qtbot.waitSignal(form.invalid) as blocker:
        form.run()
    assert blocker.args == ["(other): must be a JSON object"]
    form.close()


def test_enter_in_a_field_runs_and_keeps_the_form(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher, tmp_path: Path
) -> None:
    greet = loader.load().tools["greet"]
    form = RunForm(greet, dispatcher, cwd=str(work_dir(tmp_path)))
    qtbot.addWidget(form)
    form.show()
    qtbot.waitExposed(form)
    field = form.editors["name"].widget
    assert isinstance(field, QLineEdit)
    field.setFocus()
    qtbot.keyClicks(field, "Ada")
    with qtbot.waitSignal(form.run_finished, timeout=RUN_TIMEOUT):
        qtbot.keyClick(field, Qt.Key.Key_Return)
    assert form.isVisible()  # not closed, nothing typed was lost
    assert field.text() == "Ada"
    assert form.result_view.texts() == ["Hello, Ada\n"]


def test_path_like_arguments_get_a_file_chooser(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher, tmp_path: Path
) -> None:
    file_info = loader.load().tools["file_info"]
    form = RunForm(file_info, dispatcher, cwd=str(work_dir(tmp_path)))
    qtbot.addWidget(form)
    form.show()
    editor = form.editors["path"]
    assert editor.browse_button is not None
    target = tmp_path / "chosen.txt"
    target.write_text("x")
    qtbot.mouseClick(editor.browse_button, Qt.MouseButton.LeftButton)
    dialog = editor.file_dialog
    assert dialog is not None and dialog.isVisible()
    dialog.fileSelected.emit(str(target))  # what choosing a file and OK do
    dialog.reject()
    assert editor.widget.text() == str(target)  # type: ignore[union-attr]


def test_only_path_like_strings_get_a_chooser() -> None:
    def chooser(name: str, schema: dict[str, object]) -> bool:
        return is_path_like(ArgSpec(name, schema, False))

    assert chooser("path", {"type": "string"})
    assert chooser("config_file", {"type": "string"})
    assert chooser("target", {"type": "string", "format": "path"})
    assert not chooser("name", {"type": "string"})
    assert not chooser("filename_pattern", {"type": "string"})


def test_image_blocks_are_pictures_and_unknown_blocks_stay_readable(qtbot: QtBot) -> None:
    image = QImage(3, 2, QImage.Format.Format_RGB32)
    image.fill(0xFF336699)
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    data = base64.b64encode(bytes(buffer.data().data())).decode()
    view = ContentView()
    qtbot.addWidget(view)
    view.show_blocks(
        [
            {"type": "text", "text": "before"},
            {"type": "image", "data": data, "mimeType": "image/png"},
            {"type": "resource", "uri": "file:///x"},
            {"type": "image", "data": "not base64!", "mimeType": "image/png"},
        ]
    )
    picture = view.blocks[1]
    assert len(view.blocks) == 4
    assert view.texts()[0] == "before"
    assert isinstance(picture, QLabel)
    assert (picture.pixmap().width(), picture.pixmap().height()) == (3, 2)
    assert json.loads(view.texts()[2]) == {"type": "resource", "uri": "file:///x"}
    assert "not base64!" in view.texts()[3]  # shown as its JSON, not dropped


def test_the_default_working_directory_is_a_scratch_directory_a_call_may_use(
    qtbot: QtBot, loader: RegistryLoader, dispatcher: Dispatcher
) -> None:
    greet = loader.load().tools["greet"]
    form = RunForm(greet, dispatcher)
    qtbot.addWidget(form)
    scratch = Path(form.cwd_edit.text())
    assert scratch.is_dir() and scratch != Path.home()
    assert list(scratch.iterdir()) == []
    form.editors["name"].widget.setText("Ada")  # type: ignore[union-attr]
    with qtbot.waitSignal(form.run_finished, timeout=RUN_TIMEOUT) as blocker:
        form.run()
    result: CallResult = blocker.args[0]
    assert (result.exit_code, result.stdout) == (0, "Hello, Ada\n"), result
    scratch.rmdir()
