"""The ``ollie-tools`` command: list, show and check (registry_core.cli.tools)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from registry_core.cli.tools import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "resources" / "examples"


def write(directory: Path, name: str, content: dict[str, Any] | str, exe: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.meta"
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    if exe:
        script = directory / name
        script.write_text("#!/bin/sh\ncat\n")
        script.chmod(0o755)
    return path


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tools dir with one tool of each status, on OLLIE_TOOLS_PATH, and an empty PATH."""
    directory = tmp_path / "tools"
    write(
        directory,
        "avail",
        {"description": "Available tool.", "tier": "warm", "readOnly": True},
        exe=True,
    )
    write(
        directory,
        "multi",
        {
            "description": "Top.",
            "variants": [
                {"match": {"env": "OLLIE_CLI_TEST_NOPE"}, "description": "never"},
                {"match": {"nenv": "OLLIE_CLI_TEST_NOPE"}, "description": "Second variant."},
            ],
        },
        exe=True,
    )
    write(directory, "hid", {"description": "Hidden.", "variants": [{"match": {"os": "plan9"}}]})
    write(directory, "brk", '{\n  "tier": "lukewarm"\n}')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(directory))
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("OLLIE_CLI_TEST_NOPE", raising=False)
    return directory


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


# --- list ---------------------------------------------------------------------------------


def test_list_shows_available_tools_only(tools: Path) -> None:
    code, out = run("list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "TIER", "FLAGS", "DESCRIPTION"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["avail", "multi"]
    assert "Available tool." in out
    assert "Second variant." in out


def test_list_columns_are_aligned(tools: Path) -> None:
    _, out = run("list", "--all")
    lines = out.splitlines()
    column = lines[0].index("STATUS")
    assert all(line[column - 2 : column] == "  " for line in lines)
    assert {line[column:].split()[0] for line in lines[1:]} == {"available", "hidden", "broken"}


def test_list_all_json_has_every_status(tools: Path) -> None:
    code, out = run("list", "--all", "--json")
    assert code == 0
    data = json.loads(out)
    assert {d["name"]: d["status"] for d in data} == {
        "avail": "available",
        "brk": "broken",
        "hid": "hidden",
        "multi": "available",
    }
    for item in data:
        assert {
            "name",
            "status",
            "description",
            "tier",
            "readOnly",
            "executable",
            "variant",
        } <= set(item)
    avail = next(d for d in data if d["name"] == "avail")
    assert avail["tier"] == "warm"
    assert avail["readOnly"] is True
    assert avail["executable"] == str(tools / "avail")
    assert avail["variant"] is None
    multi = next(d for d in data if d["name"] == "multi")
    assert multi["variant"] == 1


def test_list_json_without_all_is_available_only(tools: Path) -> None:
    _, out = run("list", "--json")
    assert [d["name"] for d in json.loads(out)] == ["avail", "multi"]


def test_list_with_no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path / "none"))
    assert run("list") == (0, "no tools\n")
    assert run("list", "--json") == (0, "[]\n")


# --- show -------------------------------------------------------------------------------------


def test_show_json_has_every_key(tools: Path) -> None:
    code, out = run("show", "multi", "--json")
    assert code == 0
    data = json.loads(out)
    required = {
        "name", "status", "source", "shadowed", "description", "prompt", "args", "tier",
        "readOnly", "sudo", "elevated", "variant", "variants", "executable", "resolution",
        "errors", "warnings",
    }  # fmt: skip
    assert required <= set(data)
    assert data["source"] == str(tools / "multi.meta")
    assert data["variant"] == 1
    assert data["resolution"] == "tools_dir"
    assert [v["matched"] for v in data["variants"]] == [False, True]
    (cond,) = data["variants"][0]["conditions"]
    assert cond == {
        "key": "env",
        "value": "OLLIE_CLI_TEST_NOPE",
        "passed": False,
        "detail": "unset",
    }


def test_show_json_of_a_broken_tool_has_positioned_errors(tools: Path) -> None:
    _, out = run("show", "brk", "--json")
    data = json.loads(out)
    assert data["status"] == "broken"
    (err,) = data["errors"]
    assert (err["line"], err["column"]) == (2, 3)
    assert err["path"] == str(tools / "brk.meta")


class Utf8Out(io.TextIOWrapper):
    """A text stream that says it is UTF-8, like a terminal's stdout."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8")

    def getvalue(self) -> str:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode("utf-8")


def test_show_text_marks_conditions(tools: Path) -> None:
    out = Utf8Out()
    assert main(["show", "multi"], out=out) == 0
    text = out.getvalue()
    assert text.startswith("multi  [available]\n")
    assert "✗  env" in text
    assert "✓  nenv" in text
    assert "[1] selected" in text
    assert f"executable:  {tools / 'multi'}" in text


def test_show_text_falls_back_to_ascii_marks(tools: Path) -> None:
    _, out = run("show", "multi")  # StringIO declares no encoding
    assert "FAIL  env" in out
    assert "ok  nenv" in out


def test_show_text_of_a_hidden_tool_says_why(tools: Path) -> None:
    _, out = run("show", "hid")
    assert "problem:     no variant matches this host (variant 0: os plan9 → host os is " in out


def test_show_unknown_name_exits_1_with_a_message(
    tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run("show", "nope")
    assert code == 1
    assert out == ""
    assert capsys.readouterr().err == "ollie-tools: no tool named 'nope'\n"


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"], out=io.StringIO())
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# --- check ---------------------------------------------------------------------------------------


def test_check_prints_path_line_col_and_exits_1_on_errors(tmp_path: Path) -> None:
    d = tmp_path / "lint"
    bad = write(d, "bad", '{\n  "description": "x"\n  "tier": "hot"\n}')
    wrong = write(d, "wrong", '{\n  "readOnly": "yes"\n}')
    write(d, "fine", {"description": "ok"}, exe=True)
    code, out = run("check", str(d))
    assert code == 1
    assert out.splitlines() == [
        f"{bad}:3:3: error: invalid JSON: Expecting ',' delimiter",
        f'{wrong}:2:3: error: readOnly: must be true or false, not "yes"',
        "checked 3 file(s): 2 error(s), 0 warning(s)",
    ]


def test_check_with_only_warnings_exits_0(tmp_path: Path) -> None:
    d = tmp_path / "lint"
    path = write(d, "warned", '{\n  "description": "x",\n  "colour": "red"\n}', exe=True)
    code, out = run("check", str(d))
    assert code == 0
    assert out.splitlines() == [
        f"{path}:3:3: warning: colour: unknown key 'colour' (ignored)",
        "checked 1 file(s): 0 error(s), 1 warning(s)",
    ]


def test_check_single_files_and_missing_ones(tmp_path: Path) -> None:
    good = write(tmp_path / "d", "good", {"description": "ok"}, exe=True)
    code, out = run("check", str(good))
    assert (code, out) == (0, "checked 1 file(s): 0 error(s), 0 warning(s)\n")
    code, out = run("check", str(tmp_path / "d" / "missing.meta"))
    assert code == 1
    assert f"{tmp_path / 'd' / 'missing.meta'}: error: no such file" in out


def test_check_defaults_to_the_tools_path(tools: Path) -> None:
    code, out = run("check")
    assert code == 1
    assert f"{tools / 'brk.meta'}:2:3: error: tier: unknown tier" in out


def test_check_demo_tools_is_clean() -> None:
    code, out = run("check", str(EXAMPLES / "tools"))
    assert code == 0, out
    assert " 0 error(s)" in out


def test_check_demo_broken_tools_fail() -> None:
    code, out = run("check", str(EXAMPLES / "broken"))
    assert code == 1
    assert "error:" in out
    assert f"{EXAMPLES / 'broken' / 'broken_example.meta'}:" in out


# --- the installed entry point -----------------------------------------------------------------


def test_installed_entry_point(tools: Path) -> None:
    exe = Path(sys.executable).parent / "ollie-tools"
    assert exe.is_file(), f"{exe} missing: install the project (pip install -e .)"
    env = {**os.environ}
    listed = subprocess.run(
        [str(exe), "list", "--all", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert {d["name"] for d in json.loads(listed.stdout)} == {"avail", "brk", "hid", "multi"}
    missing = subprocess.run(
        [str(exe), "show", "nope"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert missing.returncode == 1
    assert "no tool named 'nope'" in missing.stderr
