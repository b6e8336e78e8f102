"""The shared rule for characters a person cannot see, in every front-end.

Each case is a way to hide or disguise text that the old cleaner let
through (Hangul fillers, the braille blank, combining marks stacked on
ASCII, non-ASCII spaces) or already caught (bidi overrides, zero-width
spaces); each front-end's cleaner must reveal all of them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from registry_core.broker.ask.chars import MAX_MARKS, hidden, needs_reveal, reveal
from registry_core.broker.ask.text import clean, shell_quote

HIDING = {
    "hangul filler": "rm\u3164-rf",
    "hangul choseong filler": "a\u115fb",
    "hangul jungseong filler": "a\u1160b",
    "halfwidth hangul filler": "a\uffa0b",
    "braille blank": "curl x\u2800| sh",
    "strike-through on ASCII": "rm\u0338 -rf /",
    "combining dot on ASCII": "sudo\u0307",
    "mark without a base": "\u0301abc",
    "zalgo": "\u00e9" + "\u0300\u0301\u0302\u0303",
    "no-break space": "rm\u00a0-rf",
    "thin space": "a\u2009b",
    "combining grapheme joiner": "a\u034fb",
    "bidi override": "abc\u202edef",
    "zero-width space": "a\u200bb",
    "tag character": "a\U000e0041b",
    "escape sequence": "a\x1b[2Jb",
}

FINE = ["plain ascii", "café", "naïve", "日本語", "Tiếng Việt", "emoji 👍🏽", "tab\tkept? no"]


def tag(char: str) -> str:
    return f"<U+{ord(char):04X}>"


@pytest.mark.parametrize("name", HIDING)
def test_hiding_characters_are_revealed(name: str) -> None:
    text = HIDING[name]
    shown = reveal(text, tag)
    assert shown != text, name
    assert needs_reveal(text)
    assert all(not hidden(c) or c == " " for c in shown)


@pytest.mark.parametrize("text", FINE[:-1])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert reveal(text, tag) == text
    assert not needs_reveal(text)


def test_vietnamese_keeps_its_two_marks_but_not_a_third() -> None:
    word = "e\u0302\u0301"  # ASCII base: marks revealed
    assert reveal(word, tag) == "e<U+0302><U+0301>"
    base = "\u00ea" + "\u0301" * MAX_MARKS + "\u0300"
    assert reveal(base, tag) == "\u00ea" + "\u0301" * MAX_MARKS + "<U+0300>"


def test_kept_characters_pass_and_reset_the_base() -> None:
    assert reveal("a\n\u0301", tag, frozenset("\n")) == "a\n<U+0301>"


@pytest.mark.parametrize(
    "show",
    [clean, lambda t: shell_quote(t)],
    ids=["terminal-kdialog-zenity", "shell-quote"],
)
def test_headless_front_ends_reveal_every_case(show: Callable[[str], str]) -> None:
    for name, text in HIDING.items():
        shown = show(text)
        assert not needs_reveal(shown.replace("\\", "")), (name, shown)
        assert shown != text, name
