"""yaml.v3's reading rules on composed nodes (registry_core.sandbox.yamlnodes), from YAML text."""

from __future__ import annotations

import pytest
import yaml
from yaml.nodes import Node

from registry_core.sandbox.yamlnodes import (
    NodeError,
    boolean,
    compose_first,
    describe,
    is_null,
    mapping,
    string,
    strings,
    unknown_keys,
)


def node(text: str) -> Node:
    composed = compose_first(text)
    assert composed is not None
    return composed


def entry(text: str, key: str = "k") -> Node:
    return mapping("", node(text))[key]


def test_only_the_first_document_counts_and_an_empty_stream_is_nothing() -> None:
    assert compose_first("") is None
    assert compose_first("# only a comment\n") is None
    first = mapping("", node("a: 1\n---\nb: [\n"))
    assert list(first) == ["a"]
    with pytest.raises(yaml.YAMLError):
        compose_first("a: [\n")


def test_the_error_names_the_key_the_value_and_the_line() -> None:
    error = NodeError("general.best_effort", "expected true or false", entry("\n\nk: maybe\n"))
    assert str(error) == "general.best_effort: expected true or false, got 'maybe' (line 3)"
    assert error.key == "general.best_effort"
    assert str(NodeError("x", "missing", None)) == "x: missing, got nothing"
    assert str(NodeError("x", "bad", None, value="v")) == "x: bad, got 'v'"
    assert str(NodeError("x", "bad", entry("k: 1\n"), value="v")) == "x: bad, got 'v' (line 1)"


def test_nodes_are_described_by_kind() -> None:
    assert describe(None) == "nothing"
    assert describe(entry("k: '80'\n")) == "'80'"
    assert describe(entry("k: [1]\n")) == "a list"
    assert describe(entry("k: {a: 1}\n")) == "a mapping"


@pytest.mark.parametrize(
    ("text", "null"),
    [
        ("k:\n", True),
        ("k: ~\n", True),
        ("k: null\n", True),
        ("k: Null\n", True),
        ("k: NULL\n", True),
        ("k: nUll\n", False),
        ("k: 'null'\n", False),
        ("k: ''\n", False),
        ('k: "~"\n', False),
        ("k: []\n", False),
    ],
)
def test_what_is_null(text: str, null: bool) -> None:
    assert is_null(entry(text)) is null


def test_a_null_mapping_is_empty_and_anything_else_is_refused() -> None:
    assert mapping("net", entry("k: ~\n")) == {}
    assert mapping("net", None) == {}
    with pytest.raises(NodeError) as info:
        mapping("net", entry("k: [1]\n"))
    assert str(info.value) == "net: expected a mapping, got a list (line 1)"


def test_keys_must_be_words_and_appear_once() -> None:
    with pytest.raises(NodeError) as info:
        mapping("net", entry("k:\n  [a]: 1\n"))
    assert str(info.value) == "net: mapping keys must be plain words, got a list (line 2)"
    with pytest.raises(NodeError) as twice:
        mapping("net", entry("k:\n  a: 1\n  b: 2\n  a: 3\n"))
    assert str(twice.value) == "net.a: key defined twice, got 'a' (line 4)"
    assert twice.value.key == "net.a"


def test_merges_fill_in_and_own_keys_win() -> None:
    text = (
        "base: &base {a: base, b: base}\n"
        "more: &more {b: more, c: more}\n"
        "k:\n"
        "  <<: [*base, *more]\n"
        "  a: own\n"
    )
    merged = mapping("k", entry(text))
    assert {name: string(name, value) for name, value in merged.items()} == {
        "a": "own",
        "b": "base",  # the first merged mapping wins
        "c": "more",
    }
    single = mapping("k", entry("base: &b {x: 1}\nk: {<<: *b}\n"))
    assert string("x", single["x"]) == "1"


def test_a_quoted_merge_key_is_a_plain_key() -> None:
    entries = mapping("k", entry("k: {'<<': {x: 1}}\n"))
    assert list(entries) == ["<<"]


def test_an_error_inside_a_merged_mapping_names_the_merging_key() -> None:
    with pytest.raises(NodeError) as twice:
        mapping("k", entry("k:\n  <<: {a: 1, a: 2}\n"))
    assert str(twice.value) == "k.a: key defined twice, got 'a' (line 2)"
    with pytest.raises(NodeError) as listed:
        mapping("k", entry("k:\n  <<: {[a]: 1}\n"))
    assert str(listed.value) == "k: mapping keys must be plain words, got a list (line 2)"


@pytest.mark.parametrize("value", ["1", "[1, {a: 1}]"])
def test_a_merge_of_anything_but_mappings_is_refused(value: str) -> None:
    with pytest.raises(NodeError) as info:
        mapping("k", entry(f"k:\n  <<: {value}\n"))
    shown = "'1'" if value == "1" else "a list"
    assert str(info.value) == (
        f"k: a merge (<<) takes a mapping or a list of mappings, got {shown} (line 2)"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("yes", True),
        ("'on'", True),
        ('"Y"', True),
        ("'no'", False),
        ("OFF", False),
        ("n", False),
        ("~", False),
        ("", False),
    ],
)
def test_booleans(value: str, expected: bool) -> None:
    assert boolean("b", entry(f"k: {value}\n")) is expected


@pytest.mark.parametrize(("value", "shown"), [("'true'", "'true'"), ("1", "'1'"), ("[]", "a list")])
def test_not_booleans_word_for_word(value: str, shown: str) -> None:
    with pytest.raises(NodeError) as info:
        boolean("g.b", entry(f"k: {value}\n"))
    assert str(info.value) == (
        f"g.b: expected true or false (or yes/no, on/off, y/n), got {shown} (line 1)"
    )


def test_strings_keep_the_text_as_written() -> None:
    assert string("s", entry("k: 0x50\n")) == "0x50"
    assert string("s", entry("k: '80'\n")) == "80"
    assert string("s", entry("k: ~\n")) == ""
    with pytest.raises(NodeError) as info:
        string("s", entry("k: {a: 1}\n"))
    assert str(info.value) == "s: expected a single value, got a mapping (line 1)"
    assert strings("l", entry("k: [a, ~, '1']\n")) == ("a", "", "1")
    assert strings("l", entry("k:\n")) == ()
    with pytest.raises(NodeError) as lists:
        strings("l", entry("k: a\n"))
    assert str(lists.value) == "l: expected a list of strings, got 'a' (line 1)"


def test_unknown_keys_are_named_with_their_section() -> None:
    entries = mapping("", node("a: 1\nb: 2\nc: 3\n"))
    assert unknown_keys("net", entries, ("b",)) == [
        "unknown key 'net.a' (ignored)",
        "unknown key 'net.c' (ignored)",
    ]
    assert unknown_keys("", entries, ("a", "c")) == ["unknown key 'b' (ignored)"]
