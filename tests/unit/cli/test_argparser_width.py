"""The CLI's help is argparse's, at the width argparse would choose, without shutil."""

from __future__ import annotations

import argparse
import io
import types

import pytest

from registry_core.cli import argparser
from registry_core.cli.argparser import HelpFormatter, Parser, terminal_columns
from registry_core.cli.tools import build_parser


def test_columns_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "123")
    assert terminal_columns() == 123


@pytest.mark.parametrize("value", ["0", "-5", "wide", ""])
def test_no_usable_columns_and_no_terminal_is_80(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("COLUMNS", value)
    # The module's view of sys is replaced, never sys itself: other code (a test
    # runner's progress printer, say) may write to the real sys.__stdout__ meanwhile.
    fake_sys = types.SimpleNamespace(__stdout__=io.StringIO())  # no file descriptor
    monkeypatch.setattr(argparser, "sys", fake_sys)
    assert terminal_columns() == 80
    fake_sys.__stdout__ = None
    assert terminal_columns() == 80


@pytest.mark.parametrize("columns", ["40", "100", "200"])
def test_help_is_word_for_word_argparses(monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    for command in ("call", "list", None):
        ours, theirs = build_parser(command), build_parser(command)
        pairs = [(ours, theirs)]
        if ours._subparsers is not None and theirs._subparsers is not None:
            mine = ours._subparsers._group_actions[0].choices
            other = theirs._subparsers._group_actions[0].choices
            assert isinstance(mine, dict) and isinstance(other, dict)
            pairs += [(mine[name], other[name]) for name in mine]
        for a, b in pairs:
            b.formatter_class = argparse.HelpFormatter
            assert a.format_help() == b.format_help()
        assert HelpFormatter("p")._width == int(columns) - 2
    call = build_parser("call")._subparsers._group_actions[0].choices["call"]  # type: ignore[union-attr]
    assert isinstance(call, Parser)
    assert "--timeout TIMEOUT" in call.format_help()


def test_an_explicit_width_is_kept() -> None:
    assert HelpFormatter("p", width=50)._width == 50
