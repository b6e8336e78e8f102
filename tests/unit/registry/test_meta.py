"""Parsing and validating one ``.meta`` file (registry_core.registry.meta)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry_core.errors import MetaError
from registry_core.registry.meta import (
    MAX_META_BYTES,
    ParsedMeta,
    parse_meta,
    tool_name_error,
)
from registry_core.registry.model import Condition, Fields, MatchKey, MetaFile, Tier

PATH = Path("/tools/t.meta")


def parse(text: str, path: Path = PATH) -> ParsedMeta:
    return parse_meta(path, text.encode("utf-8"))


def ok(text: str) -> MetaFile:
    parsed = parse(text)
    assert parsed.errors == (), [str(e) for e in parsed.errors]
    assert parsed.meta is not None
    return parsed.meta


def only_error(text: str) -> MetaError:
    parsed = parse(text)
    assert parsed.meta is None
    assert len(parsed.errors) == 1, [str(e) for e in parsed.errors]
    return parsed.errors[0]


# --- the happy path ---------------------------------------------------------------


def test_empty_object_declares_nothing() -> None:
    meta = ok("{}")
    assert meta.name == "t"
    assert meta.path == str(PATH)
    assert meta.top == Fields()
    assert meta.variants is None
    assert meta.warnings == ()


def test_every_field_of_the_spec_table_is_read() -> None:
    doc: dict[str, Any] = {
        "description": "One-liner.",
        "prompt": "## t\n\nDocs.",
        "args": {
            "type": "object",
            "required": ["path"],
            "properties": {"path": {"type": "string"}},
        },
        "tier": "warm",
        "readOnly": True,
        "cmd": "/usr/bin/rg",
        "sudo": True,
        "elevated": False,
    }
    meta = ok(json.dumps(doc))
    assert meta.top == Fields(
        description="One-liner.",
        prompt="## t\n\nDocs.",
        args=doc["args"],
        tier=Tier.WARM,
        read_only=True,
        cmd="/usr/bin/rg",
        sudo=True,
        elevated=False,
    )


@pytest.mark.parametrize(
    ("raw", "tier"), [("hot", Tier.HOT), ("warm", Tier.WARM), ("cold", Tier.COLD)]
)
def test_each_tier_is_accepted(raw: str, tier: Tier) -> None:
    assert ok(json.dumps({"tier": raw})).top.tier is tier


def test_unset_fields_stay_none_so_defaults_apply_later() -> None:
    top = ok('{"description": "d"}').top
    assert top.tier is None
    assert top.read_only is None
    assert top.sudo is None
    assert top.elevated is None


def test_variants_are_parsed_in_order_with_their_conditions() -> None:
    doc = {
        "variants": [
            {"match": {"binary": "journalctl", "os": "linux"}, "cmd": "a"},
            {"match": {"file": "/var/log/syslog"}, "tier": "cold"},
            {"match": {"arch": "amd64", "env": "DISPLAY", "nenv": "SSH_CONNECTION"}},
        ]
    }
    meta = ok(json.dumps(doc))
    assert meta.variants is not None
    assert [v.index for v in meta.variants] == [0, 1, 2]
    assert meta.variants[0].conditions == (
        Condition(MatchKey.BINARY, "journalctl"),
        Condition(MatchKey.OS, "linux"),
    )
    assert meta.variants[0].fields == Fields(cmd="a")
    assert meta.variants[1].fields == Fields(tier=Tier.COLD)
    assert [c.key for c in meta.variants[2].conditions] == [
        MatchKey.ARCH,
        MatchKey.ENV,
        MatchKey.NENV,
    ]


def test_name_argument_overrides_the_file_name() -> None:
    parsed = parse_meta(Path("/x/whatever.meta"), b"{}", name="other")
    assert parsed.meta is not None
    assert parsed.meta.name == "other"


# --- tool names ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "file_read", "lsp-go", "v1.2", "_x", "-x", "A9"])
def test_valid_tool_names(name: str) -> None:
    assert tool_name_error(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty tool name"),
        (".hidden", "must not start with '.'"),
        ("bad name", "may only contain"),
        ("semi;colon", "may only contain"),
        ("ünï", "may only contain"),
        ("trailing\n", "may only contain"),
    ],
)
def test_invalid_tool_names(name: str, fragment: str) -> None:
    problem = tool_name_error(name)
    assert problem is not None
    assert fragment in problem


@pytest.mark.parametrize(
    ("filename", "fragment"),
    [(".hidden.meta", "must not start with '.'"), ("bad name.meta", "may only contain")],
)
def test_bad_tool_name_makes_the_file_broken(filename: str, fragment: str) -> None:
    path = Path("/tools") / filename
    parsed = parse_meta(path, b"{}")
    assert parsed.meta is None
    (err,) = parsed.errors
    assert err.path == str(path)
    assert fragment in err.message
    assert err.line is None


# --- byte-level problems ---------------------------------------------------------------


def test_invalid_json_reports_exact_line_and_column() -> None:
    text = '{\n  "description": "x"\n  "tier": "hot"\n}\n'
    err = only_error(text)
    assert err.message == "invalid JSON: Expecting ',' delimiter"
    assert (err.line, err.column) == (3, 3)
    assert str(err) == f"{PATH}:3:3: invalid JSON: Expecting ',' delimiter"


def test_invalid_json_column_counts_characters_not_bytes() -> None:
    err = only_error('{"d": "ééé" x}')
    assert (err.line, err.column) == (1, 13)


def test_truncated_json() -> None:
    err = only_error('{"description": "x",\n')
    assert err.message.startswith("invalid JSON: ")
    assert err.line == 2


def test_empty_file_is_invalid_json() -> None:
    err = only_error("")
    assert err.message == "invalid JSON: Expecting value"
    assert (err.line, err.column) == (1, 1)


def test_non_utf8_bytes_report_the_offending_position() -> None:
    parsed = parse_meta(PATH, b'{\n  "description": "caf\xe9"\n}')
    (err,) = parsed.errors
    assert err.message == "not valid UTF-8"
    assert (err.line, err.column) == (2, 22)


def test_non_utf8_column_counts_characters_before_the_bad_byte() -> None:
    # "é" is two bytes but one column: the bad byte is the 9th character.
    parsed = parse_meta(PATH, '{"d": "é'.encode() + b'\xff"}')
    (err,) = parsed.errors
    assert (err.line, err.column) == (1, 9)


def test_file_over_one_mebibyte_is_broken() -> None:
    data = b'{"description": "' + b"x" * MAX_META_BYTES + b'"}'
    parsed = parse_meta(PATH, data)
    assert parsed.meta is None
    (err,) = parsed.errors
    assert err.message == f"file is {len(data)} bytes, over the 1 MiB limit"


def test_file_of_exactly_one_mebibyte_is_accepted() -> None:
    head = b'{"description": "'
    data = head + b"x" * (MAX_META_BYTES - len(head) - 2) + b'"}'
    assert len(data) == MAX_META_BYTES
    assert parse_meta(PATH, data).meta is not None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[]", "an array"),
        ('"x"', "a string"),
        ("3", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
    ],
)
def test_top_level_must_be_an_object(text: str, kind: str) -> None:
    err = only_error(text)
    assert err.message == f"the top level must be a JSON object, not {kind}"


# --- wrong types, one field at a time ------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("description", "3", "description: must be a string, not a number"),
        ("description", "null", "description: must be a string, not null"),
        ("prompt", "[]", "prompt: must be a string, not an array"),
        ("prompt", "{}", "prompt: must be a string, not an object"),
        ("cmd", "true", "cmd: must be a string, not a boolean"),
        ("cmd", '""', "cmd: invalid command ''"),
        ("cmd", '"   "', "cmd: invalid command '   '"),
        ("readOnly", '"yes"', 'readOnly: must be true or false, not "yes"'),
        ("readOnly", "null", "readOnly: must be true or false, not null"),
        ("sudo", "1", "sudo: must be true or false, not 1"),
        ("elevated", '"false"', 'elevated: must be true or false, not "false"'),
        ("tier", '"lukewarm"', 'tier: unknown tier "lukewarm" (use hot, warm or cold)'),
        ("tier", '"HOT"', 'tier: unknown tier "HOT" (use hot, warm or cold)'),
        ("tier", "2", "tier: unknown tier 2 (use hot, warm or cold)"),
        ("args", '"object"', "args: must be a JSON Schema object, not a string"),
        ("args", "[]", "args: must be a JSON Schema object, not an array"),
        ("args", "true", "args: must be a JSON Schema object, not a boolean"),
        ("variants", "{}", "variants: must be an array, not an object"),
        ("variants", "null", "variants: must be an array, not null"),
    ],
)
def test_wrong_type_names_the_field_and_points_at_it(field: str, value: str, message: str) -> None:
    text = f'{{\n  "description": "fine",\n  "x-pad": 0,\n    "{field}": {value}\n}}'
    if field == "description":
        text = f'{{\n  "prompt": "fine",\n  "x-pad": 0,\n    "{field}": {value}\n}}'
    parsed = parse(text)
    assert parsed.meta is None
    assert [e.message for e in parsed.errors] == [message]
    err = parsed.errors[0]
    assert err.path == str(PATH)
    # Line 4, column 5: the field's key (after four spaces of indentation).
    assert (err.line, err.column) == (4, 5)


def test_every_wrong_field_is_reported_not_just_the_first() -> None:
    parsed = parse('{"description": 1, "readOnly": 2, "tier": "x"}')
    assert {e.message.split(":")[0] for e in parsed.errors} == {"description", "readOnly", "tier"}


def test_args_that_is_not_a_valid_json_schema_points_inside_args() -> None:
    text = '{\n  "args": {\n    "type": "strin"\n  }\n}'
    err = only_error(text)
    assert err.message.startswith("args.type: not a valid JSON Schema: ")
    assert "'strin'" in err.message
    assert (err.line, err.column) == (3, 5)


def test_invalid_nested_property_schema() -> None:
    text = json.dumps(
        {"args": {"type": "object", "properties": {"n": {"type": "integer", "minimum": "0"}}}},
        indent=1,
    )
    err = only_error(text)
    assert err.message.startswith("args.properties.n.minimum: not a valid JSON Schema: ")
    assert err.line == text.splitlines().index('    "minimum": "0"') + 1


def test_args_with_duplicate_required_is_invalid() -> None:
    err = only_error('{"args": {"type": "object", "required": ["a", "a"]}}')
    assert err.message.startswith("args.required: not a valid JSON Schema: ")


@pytest.mark.parametrize("bad", [["x"], 5, {"a": 1}])
def test_args_with_a_non_string_schema_dialect_is_an_error_not_a_crash(bad: object) -> None:
    err = only_error(json.dumps({"args": {"$schema": bad, "type": "object"}}))
    assert err.message.startswith("args.$schema: not a valid JSON Schema: ")


def test_args_with_an_unknown_schema_dialect_is_an_error() -> None:
    err = only_error('{"args": {"$schema": "https://example.com/my-dialect", "type": "object"}}')
    assert err.message.startswith("args.$schema: not a valid JSON Schema: unknown $schema")


def test_args_with_a_known_schema_dialect_uses_that_draft() -> None:
    draft7 = "http://json-schema.org/draft-07/schema#"
    meta = ok(json.dumps({"args": {"$schema": draft7, "type": "object", "items": [{}]}}))
    assert meta.top.args is not None


def test_args_schema_that_is_not_an_object_schema_is_only_a_warning() -> None:
    parsed = parse('{\n  "args": {"type": "string"}\n}')
    assert parsed.meta is not None
    (warning,) = parsed.warnings
    assert warning.message == "args.type: tool arguments should be a JSON object schema"
    assert (warning.line, warning.column) == (2, 12)


# --- variants and match ------------------------------------------------------------------


def test_variant_that_is_not_an_object() -> None:
    err = only_error('{"variants": [\n  {"match": {}},\n  "nope"\n]}')
    assert err.message == "variants[1]: a variant must be an object, not a string"
    assert (err.line, err.column) == (3, 3)


def test_match_that_is_not_an_object() -> None:
    err = only_error('{"variants": [{"match": ["binary", "x"]}]}')
    assert err.message == "variants[0].match: must be an object, not an array"
    assert (err.line, err.column) == (1, 16)


def test_unknown_match_key_is_an_error_at_its_position() -> None:
    text = '{"variants": [\n  {"match": {"os": "linux",\n             "distro": "debian"}}\n]}'
    err = only_error(text)
    assert err.message == (
        "variants[0].match.distro: unknown match key 'distro' "
        "(known: binary, file, os, arch, env, nenv)"
    )
    assert (err.line, err.column) == (3, 14)


@pytest.mark.parametrize(
    ("value", "shown"), [("3", "3"), ('""', '""'), ("null", "null"), ("[]", "[]")]
)
def test_match_value_must_be_a_non_empty_string(value: str, shown: str) -> None:
    err = only_error(f'{{"variants": [{{"match": {{"binary": {value}}}}}]}}')
    assert err.message == f"variants[0].match.binary: must be a non-empty string, not {shown}"


def test_wrong_type_inside_a_variant_is_positioned_in_that_variant() -> None:
    text = '{"variants": [\n {"match": {}},\n {"match": {},\n  "sudo": "yes"}\n]}'
    err = only_error(text)
    assert err.message == 'variants[1].sudo: must be true or false, not "yes"'
    assert (err.line, err.column) == (4, 3)


def test_variant_without_match_is_a_warning_and_always_matches() -> None:
    parsed = parse('{"variants": [{"cmd": "x"}]}')
    assert parsed.meta is not None
    assert parsed.meta.variants is not None
    assert parsed.meta.variants[0].conditions == ()
    (warning,) = parsed.warnings
    assert warning.message == "variants[0]: variant without 'match' always matches"


def test_empty_variants_is_a_warning() -> None:
    parsed = parse('{"variants": []}')
    assert parsed.meta is not None
    assert parsed.meta.variants == ()
    (warning,) = parsed.warnings
    assert "empty 'variants'" in warning.message


def test_variants_inside_a_variant_are_unknown() -> None:
    parsed = parse('{"variants": [{"match": {}, "variants": []}]}')
    assert parsed.meta is not None
    (warning,) = parsed.warnings
    assert warning.message == "variants[0].variants: unknown key 'variants' (ignored)"


def test_match_at_top_level_is_an_unknown_key() -> None:
    parsed = parse('{"match": {"os": "linux"}}')
    assert parsed.meta is not None
    (warning,) = parsed.warnings
    assert warning.message == "match: unknown key 'match' (ignored)"


# --- unknown keys ----------------------------------------------------------------------


def test_unknown_keys_are_warnings_with_positions() -> None:
    text = (
        '{\n  "description": "d",\n  "colour": "red",\n'
        '  "variants": [\n    {"match": {}, "wat": 1}\n  ]\n}'
    )
    parsed = parse(text)
    assert parsed.errors == ()
    assert parsed.meta is not None
    by_message = {w.message: (w.line, w.column) for w in parsed.warnings}
    assert by_message == {
        "colour: unknown key 'colour' (ignored)": (3, 3),
        "variants[0].wat: unknown key 'wat' (ignored)": (5, 19),
    }
    assert parsed.meta.warnings == parsed.warnings
    assert str(parsed.warnings[0]) == f"{PATH}:3:3: colour: unknown key 'colour' (ignored)"


def test_read_only_spelled_differently_is_unknown() -> None:
    parsed = parse('{"readonly": true}')
    assert parsed.meta is not None
    assert parsed.meta.top.read_only is None
    assert [w.message for w in parsed.warnings] == ["readonly: unknown key 'readonly' (ignored)"]


def test_warnings_survive_next_to_errors() -> None:
    parsed = parse('{"colour": 1, "tier": "x"}')
    assert parsed.meta is None
    assert len(parsed.errors) == 1
    assert len(parsed.warnings) == 1
