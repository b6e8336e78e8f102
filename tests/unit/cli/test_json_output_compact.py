"""``--json`` output: compact (C encoder) into a pipe, indented on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from registry_core.cli.jsonout import write_json
from registry_core.cli.tools import main


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_one_compact_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.meta").write_text(json.dumps({"description": "a tool"}))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for argv in (["list", "--json"], ["show", "t", "--json"], ["dump"]):
        out = io.StringIO()
        assert main(argv, out) == 0
        text = out.getvalue()
        assert text.count("\n") == 1 and text.endswith("\n"), argv
        assert ", " not in text and '": ' not in text, argv
        json.loads(text)


def test_a_terminal_gets_the_indented_form() -> None:
    out = Terminal()
    write_json({"a": [1, 2]}, out)
    assert out.getvalue() == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'
