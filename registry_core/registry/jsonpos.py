"""Find the line and column of a value inside a JSON document.

Only used when reporting an error, so it favours simplicity over speed: it
walks the text with the standard library's scanner and stops at the member
named by ``path`` (a sequence of object keys and array indices).
"""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable, Sequence

_scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
_WS = " \t\n\r"


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _skip_value(text: str, pos: int) -> int:
    """Return the offset just after the JSON value starting at ``pos``."""
    _, end = json.JSONDecoder().raw_decode(text, pos)
    return end


def _find(text: str, pos: int, path: Sequence[str | int]) -> int | None:
    pos = _skip_ws(text, pos)
    if not path:
        return pos
    step, rest = path[0], path[1:]
    if pos >= len(text):
        return None
    if text[pos] == "{" and isinstance(step, str):
        pos = _skip_ws(text, pos + 1)
        while pos < len(text) and text[pos] == '"':
            key_pos = pos
            key, pos = _scanstring(text, pos + 1)
            pos = _skip_ws(text, pos)
            if pos >= len(text) or text[pos] != ":":
                return None
            value_pos = _skip_ws(text, pos + 1)
            if key == step:
                found = _find(text, value_pos, rest)
                # Point at the key itself when the path ends here: easier to read.
                return key_pos if found == value_pos and not rest else found
            pos = _skip_ws(text, _skip_value(text, value_pos))
            if pos < len(text) and text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
        return None
    if text[pos] == "[" and isinstance(step, int):
        pos = _skip_ws(text, pos + 1)
        index = 0
        while pos < len(text) and text[pos] != "]":
            if index == step:
                return _find(text, pos, rest)
            pos = _skip_ws(text, _skip_value(text, pos))
            if pos < len(text) and text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
            index += 1
        return None
    return None


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def locate(text: str, path: Sequence[str | int]) -> tuple[int, int] | None:
    """Line and column of the member at ``path``, or ``None`` when not found."""
    try:
        offset = _find(text, 0, path)
    except (ValueError, IndexError):
        return None
    if offset is None:
        return None
    return line_col(text, offset)


def format_path(path: Sequence[str | int]) -> str:
    """``["variants", 1, "match"]`` → ``variants[1].match``."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += ("." if out else "") + step
    return out or "(top level)"
