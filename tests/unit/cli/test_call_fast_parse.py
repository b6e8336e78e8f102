"""``ollie-tools call``'s own parser gives argparse's answer or steps aside.

An agent's call is parsed without importing and building argparse
(:func:`registry_core.cli.call_cmd.fast_parse`).  Whatever it accepts must be
exactly what argparse makes of the same words; everything else (help, errors,
abbreviations, ``--``, repeats) must be left to argparse.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.cli.call_cmd import DEFAULTS, cmd_call, fast_parse
from registry_core.cli.tools import build_parser


def _comparable(parsed: dict[str, Any]) -> dict[str, Any]:
    """``parsed`` with a NaN (``--timeout nan``, refused later by ``cmd_call``) as a
    string: NaN equals nothing, itself included."""
    return {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in parsed.items()}


def _argparse(words: list[str]) -> dict[str, Any] | None:
    """What argparse makes of ``call WORDS`` (``None``: it refuses or prints help)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return _comparable(vars(build_parser("call").parse_args(["call", *words])))
        except SystemExit:
            return None


def _fast(words: list[str]) -> dict[str, Any] | None:
    parsed = fast_parse(words)
    return None if parsed is None else _comparable(vars(parsed))


PLAIN = [
    ["greet"],
    ["greet", "--args", '{"name": "x"}'],
    ["--json", "greet", "--args={}"],
    ["greet", "--args", "-"],
    ["greet", "--args", "@/tmp/a.json", "--timeout", "2.5", "--elevated", "-v"],
    ["greet", "--profile=strict", "--timeout=1e3", "--verbose", "--json"],
    ["greet", "--args=", "--profile", ""],
    ["greet", "--timeout", "inf"],
    ["greet", "--timeout", "nan"],  # parsed alike; cmd_call refuses both (test_timeout_options)
]


@pytest.mark.parametrize("words", PLAIN)
def test_the_plain_forms_are_parsed_as_argparse_parses_them(words: list[str]) -> None:
    fast = _fast(words)
    assert fast is not None
    assert fast == _argparse(words)


def test_the_defaults_are_argparses() -> None:
    assert _fast(["t"]) == {"command": "call", "name": "t", **DEFAULTS, "func": cmd_call}
    assert _argparse(["t"]) == _fast(["t"])


STEP_ASIDE = [
    [],  # no name: argparse's usage error
    ["-h"],
    ["greet", "--help"],
    ["greet", "--tim", "5"],  # an abbreviation argparse accepts
    ["greet", "--timeout", "soon"],  # argparse's error message
    ["greet", "--timeout"],
    ["greet", "--json", "--json"],
    ["greet", "--args", "{}", "--args", "[]"],
    ["greet", "other"],
    ["greet", "--", "--json"],
    ["-x"],
    ["-"],
    ["greet", "--args", "-1"],  # argparse may take it for an option
    ["greet", "--json=yes"],
    ["greet", "-vv"],
    ["greet", "--unknown"],
]


@pytest.mark.parametrize("words", STEP_ASIDE)
def test_anything_else_is_left_to_argparse(words: list[str]) -> None:
    assert fast_parse(words) is None


_CHUNKS = st.sampled_from(
    [
        ["-v"],
        ["--verbose"],
        ["--json"],
        ["--elevated"],
        ["--args", "{}"],
        ["--args", "-"],
        ["--args", "-1"],
        ["--args={}"],
        ["--args=-"],
        ["--profile", "p"],
        ["--profile=p"],
        ["--timeout", "2"],
        ["--timeout=0.5"],
        ["--timeout", "x"],
        ["--timeout"],
        ["--tim", "5"],
        ["--js"],
        ["-vv"],
        ["--"],
        ["-"],
        ["other"],
    ]
)
_NAMES = st.sampled_from(["greet", "x y", "", "2", "nan", "@f", "=", "-t"])


@settings(max_examples=500, deadline=None)
@given(_NAMES, st.lists(_CHUNKS, max_size=5), st.integers(min_value=0, max_value=5))
def test_fast_parse_never_disagrees_with_argparse(
    name: str, chunks: list[list[str]], at: int
) -> None:
    chunks = [*chunks[:at], [name], *chunks[at:]]
    words = [word for chunk in chunks for word in chunk]
    fast = _fast(words)
    if fast is None:
        return
    theirs = _argparse(words)
    assert theirs is not None, f"argparse refuses {words} but the fast path accepted it"
    assert fast == theirs


def test_main_takes_the_fast_path_only_for_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from registry_core.cli import call_cmd, tools

    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path))

    seen: list[SimpleNamespace] = []

    def fake_call(args: SimpleNamespace, env: dict[str, str], out: Any) -> int:
        seen.append(args)
        return 3

    monkeypatch.setattr(call_cmd, "fast_parse", lambda words: _record(words))
    calls: list[list[str]] = []

    def _record(words: list[str]) -> SimpleNamespace:
        calls.append(list(words))
        return SimpleNamespace(func=fake_call, name="t")

    assert tools.main(("call", "t", "--json")) == 3
    assert calls == [["t", "--json"]] and seen[0].name == "t"
    with contextlib.redirect_stdout(io.StringIO()):
        assert tools.main(["list", "--json"]) == 0
    assert calls == [["t", "--json"]]  # list never asked the fast parser
