"""The invisible-character rule, character class by character class, with exact output.

``test_prompter_chars.py`` shows that each way of hiding text is caught; this
file pins what is shown instead, one Unicode category or glyph at a time, and
how the combining-mark count follows bases, hidden characters and kept ones.
"""

from __future__ import annotations

import pytest

from registry_core.broker.ask.chars import BLANK_GLYPHS, hidden, needs_reveal, reveal


def tag(char: str) -> str:
    return f"<U+{ord(char):04X}>"


@pytest.mark.parametrize(
    ("char", "category"),
    [
        ("\x07", "Cc"),
        ("\u200e", "Cf"),
        ("\ud800", "Cs"),
        ("\ue000", "Co"),
        ("\u0378", "Cn"),
        ("\u2028", "Zl"),
        ("\u2029", "Zp"),
        ("\u00a0", "Zs"),
        ("\u3000", "Zs"),
    ],
)
def test_every_unsafe_category_is_revealed_in_place(char: str, category: str) -> None:
    assert hidden(char)
    assert reveal(f"a{char}b", tag) == f"a<U+{ord(char):04X}>b", category
    assert needs_reveal(f"a{char}b")


@pytest.mark.parametrize("char", sorted(BLANK_GLYPHS))
def test_every_blank_glyph_is_revealed_even_after_a_non_ascii_base(char: str) -> None:
    # U+034F and the Khmer vowels are combining marks: one would be allowed on "é".
    assert hidden(char)
    assert reveal(f"\u00e9{char}x", tag) == f"\u00e9<U+{ord(char):04X}>x"


def test_ascii_letters_digits_and_the_plain_space_are_never_hidden() -> None:
    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    assert not any(hidden(c) for c in printable)
    assert reveal(printable, tag) == printable
    assert not needs_reveal(printable)


def test_an_enclosing_mark_counts_as_a_combining_mark() -> None:
    # U+20DD COMBINING ENCLOSING CIRCLE (category Me) may sit on a non-ASCII base only.
    assert reveal("\u00e9\u20dd", tag) == "\u00e9\u20dd"
    assert reveal("a\u20dd", tag) == "a<U+20DD>"
    assert reveal("\u20dd", tag) == "<U+20DD>"


def test_the_mark_count_starts_again_at_every_base() -> None:
    two = "\u0301\u0300"
    assert reveal(f"\u00ea{two}\u00f4{two}", tag) == f"\u00ea{two}\u00f4{two}"
    assert reveal(f"\u00ea{two}\u0301", tag) == f"\u00ea{two}<U+0301>"


def test_a_mark_after_a_hidden_character_has_no_base() -> None:
    assert reveal("\u00e9\u200b\u0301", tag) == "\u00e9<U+200B><U+0301>"
    assert reveal("\u00e9\u00a0\u0301", tag) == "\u00e9<U+00A0><U+0301>"


def test_a_mark_after_a_kept_character_has_no_base() -> None:
    keep = frozenset("\n")
    assert reveal("\u00e9\n\u0301", tag, keep) == "\u00e9\n<U+0301>"
    assert reveal("\u00e9\n\u00e9\u0301\u0300", tag, keep) == "\u00e9\n\u00e9\u0301\u0300"


def test_kept_characters_pass_only_when_asked() -> None:
    assert reveal("a\nb", tag) == "a<U+000A>b"
    assert reveal("a\nb\tc", tag, frozenset("\n")) == "a\nb<U+0009>c"


def test_needs_reveal_is_false_for_text_that_only_looks_unusual() -> None:
    assert not needs_reveal("")
    assert not needs_reveal("\u00e9\u0301 \u65e5\u672c")
    assert needs_reveal("\u0301")
