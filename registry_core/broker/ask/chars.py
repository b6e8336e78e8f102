"""Which characters a person cannot see, and how every front-end shows them instead.

One rule for the Qt dialog, the desktop notification, kdialog, zenity and
the terminal: text from a request must not hide or disguise anything.  A
character is *revealed* (replaced by a visible escape chosen by the caller,
``\\u200b`` or ``<U+200B>``) when it is

* a control, format, surrogate, private-use or unassigned code point, or a
  line/paragraph separator (``Cc Cf Cs Co Cn Zl Zp``: escape sequences,
  bidi overrides, zero-width spaces, tag characters);
* a space other than the ASCII space (``Zs``: no-break and thin spaces make
  one shell word look like two);
* a letter or symbol that draws nothing: the Hangul fillers (U+3164,
  U+115F, U+1160, U+FFA0), the braille blank (U+2800), the Khmer inherent
  vowels, the combining grapheme joiner and similar (:data:`BLANK_GLYPHS`);
* a combining mark stacked on an ASCII character (``rm`` with a strike-through
  overlay, letters that look like other letters), a combining mark with no
  base, or more than :data:`MAX_MARKS` marks on any one base ("zalgo" text
  that paints over the lines around it).

Nothing here does I/O; the callers decide the escape's look.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_MARKS = frozenset({"Mn", "Me"})
MAX_MARKS = 2
"""Combining marks allowed on one non-ASCII base (Vietnamese needs two)."""

BLANK_GLYPHS = frozenset(
    "\u115f\u1160\u3164\uffa0"  # Hangul choseong/jungseong fillers, Hangul filler, halfwidth
    "\u2800"  # braille pattern blank
    "\u17b4\u17b5"  # Khmer inherent vowels
    "\u034f"  # combining grapheme joiner
    "\u180e"  # Mongolian vowel separator
    "\u2063\u2064"  # invisible separator / plus (also Cf)
    "\ufeff"  # zero width no-break space (also Cf)
    "\U0001d159\U0001d173\U0001d174\U0001d175\U0001d176\U0001d177\U0001d178\U0001d179\U0001d17a"
)
"""Code points that render as nothing although their category says letter or symbol."""


def hidden(char: str) -> bool:
    """True if ``char`` on its own cannot be seen (combining marks: see :func:`reveal`)."""
    if char in BLANK_GLYPHS:
        return True
    category = unicodedata.category(char)
    return category in UNSAFE_CATEGORIES or (category == "Zs" and char != " ")


def reveal(text: str, escape: Callable[[str], str], keep: frozenset[str] = frozenset()) -> str:
    """``text`` with every character a person could not see replaced by ``escape(char)``.

    ``keep`` lists characters to pass through (``"\\n"`` for multi-line code).
    """
    out: list[str] = []
    base_ascii = False
    has_base = False
    marks = 0
    for char in text:
        if char in keep:
            out.append(char)
            has_base, base_ascii, marks = False, False, 0
            continue
        if unicodedata.category(char) in _MARKS and char not in BLANK_GLYPHS:
            marks += 1
            if not has_base or base_ascii or marks > MAX_MARKS:
                out.append(escape(char))
            else:
                out.append(char)
            continue
        marks = 0
        if hidden(char):
            out.append(escape(char))
            has_base, base_ascii = False, False
            continue
        out.append(char)
        has_base, base_ascii = True, ord(char) < 0x80
    return "".join(out)


def needs_reveal(text: str) -> bool:
    """True if :func:`reveal` would change ``text``."""
    return reveal(text, lambda _c: "\0\0") != text
