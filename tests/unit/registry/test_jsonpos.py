"""Positions of members inside a JSON text (registry_core.registry.jsonpos)."""

from __future__ import annotations

import pytest

from registry_core.registry.jsonpos import format_path, line_col, locate

DOC = """{
  "description": "a \\"quoted\\" key: \\"tier\\"",
  "args": {
    "type": "object",
    "properties": {
      "path": {"type": "string"},
      "n": {"type": "integer", "minimum": 0}
    }
  },
  "variants": [
    {"match": {"os": "linux"}},
    {
      "match": {"binary": "journalctl"},
      "cmd": "x"
    }
  ],
  "tier": "hot"
}"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["description"], (2, 3)),
        (["args"], (3, 3)),
        (["args", "type"], (4, 5)),
        (["args", "properties", "path", "type"], (6, 16)),
        (["args", "properties", "n", "minimum"], (7, 32)),
        (["variants", 0], (11, 5)),
        (["variants", 0, "match", "os"], (11, 16)),
        (["variants", 1], (12, 5)),
        (["variants", 1, "match"], (13, 7)),
        (["variants", 1, "cmd"], (14, 7)),
        (["tier"], (17, 3)),
    ],
)
def test_locate_points_at_the_key_or_element(
    path: list[str | int], expected: tuple[int, int]
) -> None:
    assert locate(DOC, path) == expected


def test_a_key_mentioned_inside_a_string_is_not_matched() -> None:
    # "tier" appears inside the description string on line 2; the real key is on line 17.
    assert locate(DOC, ["tier"]) == (17, 3)


def test_empty_path_is_the_start_of_the_document() -> None:
    assert locate("  \n {}", []) == (2, 2)


@pytest.mark.parametrize(
    "path",
    [["nope"], ["args", "nope"], ["variants", 5], ["variants", "x"], ["tier", "deeper"], [0]],
)
def test_missing_members_are_none(path: list[str | int]) -> None:
    assert locate(DOC, path) is None


def test_broken_text_is_none_not_an_exception() -> None:
    assert locate('{"a": [1, 2', ["b"]) is None
    assert locate('{"a" 1}', ["a"]) is None
    assert locate("", ["a"]) is None


def test_escaped_keys_are_decoded_before_comparing() -> None:
    assert locate('{"a\\u0062": 1}', ["ab"]) == (1, 2)


def test_duplicate_keys_point_at_the_first() -> None:
    assert locate('{"a": 1,\n "a": 2}', ["a"]) == (1, 2)


@pytest.mark.parametrize(
    ("text", "offset", "expected"),
    [
        ("abc", 0, (1, 1)),
        ("abc", 2, (1, 3)),
        ("a\nbc", 2, (2, 1)),
        ("a\nbc", 3, (2, 2)),
        ("\n\n", 2, (3, 1)),
    ],
)
def test_line_col_is_one_based(text: str, offset: int, expected: tuple[int, int]) -> None:
    assert line_col(text, offset) == expected


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ([], "(top level)"),
        (["tier"], "tier"),
        (["variants", 1, "match"], "variants[1].match"),
        (["args", "properties", "a", "type"], "args.properties.a.type"),
        (["variants", 0], "variants[0]"),
    ],
)
def test_format_path(path: list[str | int], text: str) -> None:
    assert format_path(path) == text
