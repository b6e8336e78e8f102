"""Property-based tests of the registry's two central promises.

* Variant merging: a variant's field wins where it is set, the top level
  (then the default) everywhere else.
* Isolation: a broken file never affects another tool -- every valid tool in a
  directory full of garbage is exactly what it would be alone.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.registry.evaluate import evaluate
from registry_core.registry.hostfacts import HostFacts
from registry_core.registry.loader import RegistryLoader
from registry_core.registry.meta import parse_meta
from registry_core.registry.model import Fields, Status, Tier
from registry_core.registry.serialize import tool_details

SETTINGS = settings(max_examples=60, deadline=None)

_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
_schemas = st.sampled_from(
    [
        {"type": "object", "properties": {}},
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}},
        {"properties": {"p": {"pattern": "^x"}}, "additionalProperties": False},
    ]
)
_tiers = st.sampled_from(list(Tier))
_cmds = st.sampled_from(["/bin/sh", "helper", "sub/run", "/nonexistent/x"])

_FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "description": _text,
    "prompt": _text,
    "args": _schemas,
    "tier": _tiers,
    "read_only": st.booleans(),
    "cmd": _cmds,
    "sudo": st.booleans(),
    "elevated": st.booleans(),
}
_META_KEY = {
    "description": "description",
    "prompt": "prompt",
    "args": "args",
    "tier": "tier",
    "read_only": "readOnly",
    "cmd": "cmd",
    "sudo": "sudo",
    "elevated": "elevated",
}
_DEFAULTS: dict[str, Any] = {
    "description": "",
    "prompt": "",
    "args": {"type": "object", "properties": {}},
    "tier": Tier.HOT,
    "read_only": False,
    "cmd": None,
    "sudo": False,
    "elevated": False,
}

fields_st = st.fixed_dictionaries({}, optional=_FIELD_STRATEGIES).map(lambda d: Fields(**d))


def as_meta(fields: Fields) -> dict[str, Any]:
    """The ``.meta`` spelling of ``fields`` (only the set ones)."""
    out: dict[str, Any] = {}
    for attr, key in _META_KEY.items():
        value = getattr(fields, attr)
        if value is not None:
            out[key] = value.value if isinstance(value, Tier) else value
    return out


# --- variant merging -----------------------------------------------------------------------------


@SETTINGS
@given(top=fields_st, variant=fields_st)
def test_merged_field_is_the_variants_where_set_else_the_tops(top: Fields, variant: Fields) -> None:
    merged = variant.merged_over(top)
    for attr in _META_KEY:
        own = getattr(variant, attr)
        assert getattr(merged, attr) == (own if own is not None else getattr(top, attr))


@SETTINGS
@given(
    top=fields_st,
    variants=st.lists(st.tuples(st.booleans(), fields_st), min_size=1, max_size=4),
)
def test_evaluated_tool_takes_the_first_matching_variant_over_the_top_level(
    top: Fields, variants: list[tuple[bool, Fields]]
) -> None:
    facts = HostFacts(os_name="linux", arch="amd64", env={})
    doc = as_meta(top)
    doc["variants"] = [
        {"match": {"os": "linux" if matches else "darwin"}, **as_meta(fields)}
        for matches, fields in variants
    ]
    parsed = parse_meta(Path("/nonexistent-tools/t.meta"), json.dumps(doc).encode())
    assert parsed.meta is not None, [str(e) for e in parsed.errors]
    tool = evaluate(parsed.meta, facts)

    winner = next((i for i, (matches, _) in enumerate(variants) if matches), None)
    if winner is None:
        assert tool.status is Status.HIDDEN
        return
    assert tool.status is Status.AVAILABLE
    assert tool.variant == winner
    chosen = variants[winner][1]
    for attr in _META_KEY:
        own, inherited = getattr(chosen, attr), getattr(top, attr)
        expected = own if own is not None else inherited
        if expected is None:
            expected = _DEFAULTS[attr]
        assert getattr(tool, attr) == expected, attr


# --- a broken file never affects another tool ----------------------------------------------------

_conditions = st.dictionaries(
    st.sampled_from(["os", "arch", "env", "nenv", "file", "binary"]),
    st.sampled_from(["linux", "amd64", "HOME", "DISPLAY", "/", "/nonexistent", "sh", "/bin/sh"]),
    max_size=3,
)
_variant_docs = st.lists(
    st.fixed_dictionaries(
        {"match": _conditions},
        optional={"description": _text, "cmd": _cmds, "args": _schemas, "tier": _tiers.map(str)},
    ),
    max_size=3,
)
valid_docs = st.fixed_dictionaries(
    {},
    optional={
        "description": _text,
        "prompt": _text,
        "args": _schemas,
        "tier": _tiers.map(str),
        "readOnly": st.booleans(),
        "cmd": _cmds,
        "sudo": st.booleans(),
        "elevated": st.booleans(),
        "variants": _variant_docs,
        "x-unknown": st.integers(),
    },
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_garbage = st.one_of(
    st.binary(max_size=120),
    _json_values.map(lambda v: json.dumps(v).encode()),
    # Valid JSON objects with wrong field types.
    st.dictionaries(
        st.sampled_from(["description", "tier", "readOnly", "args", "variants", "cmd"]),
        _json_values,
        min_size=1,
        max_size=3,
    ).map(lambda d: json.dumps(d).encode()),
    st.just(b'{"args": {"$schema": ["x"]}}'),
    st.just(b"\xff\xfe{}"),
)


def _normalised(details: dict[str, Any], root: Path) -> str:
    return json.dumps(details, sort_keys=True).replace(str(root), "<ROOT>")


@settings(max_examples=40, deadline=None)
@given(valid=st.lists(valid_docs, min_size=1, max_size=4), garbage=st.lists(_garbage, max_size=5))
def test_a_broken_file_never_affects_another_tool(
    valid: list[dict[str, Any]], garbage: list[bytes]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {"PATH": str(base / "no-bin"), "HOME": str(base)}
        mixed_root, mixed = base / "mixed", base / "mixed" / "tools"
        mixed.mkdir(parents=True)
        for i, data in enumerate(garbage):
            (mixed / f"g{i}.meta").write_bytes(data)
        for i, doc in enumerate(valid):
            (mixed / f"v{i}.meta").write_text(json.dumps(doc))
        registry = RegistryLoader([mixed], env=env).load()
        assert len(registry) == len(valid) + len(garbage)

        for i, doc in enumerate(valid):
            alone_root = base / f"alone{i}"
            alone = alone_root / "tools"
            alone.mkdir(parents=True)
            (alone / f"v{i}.meta").write_text(json.dumps(doc))
            expected = RegistryLoader([alone], env=env).load().get(f"v{i}")
            got = registry.get(f"v{i}")
            assert got.status is not Status.BROKEN, got.problem
            assert _normalised(tool_details(got), mixed_root) == _normalised(
                tool_details(expected), alone_root
            )


@settings(max_examples=25, deadline=None)
@given(valid=st.lists(valid_docs, min_size=1, max_size=3), garbage=_garbage)
def test_a_file_turning_bad_on_refresh_leaves_the_others_untouched(
    valid: list[dict[str, Any]], garbage: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tools = Path(tmp) / "tools"
        tools.mkdir()
        for i, doc in enumerate(valid):
            (tools / f"v{i}.meta").write_text(json.dumps(doc))
        victim = tools / "victim.meta"
        victim.write_text("{}")
        loader = RegistryLoader([tools], env={"PATH": str(Path(tmp) / "no-bin")})
        before = loader.load()
        victim.write_bytes(garbage + b" ")  # never equal to "{}": the file always changes
        after = loader.refresh([victim])
        for i in range(len(valid)):
            assert after.get(f"v{i}") is before.get(f"v{i}")


# --- the parser's fast path agrees with the full check -----------------------------------------

_any_field = st.one_of(_json_values, _schemas, _tiers.map(str), st.sampled_from(["", " ", "a\0b"]))
_maybe_variant = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "match": st.one_of(_conditions, _json_values, st.just({"distro": "x"})),
            "description": st.one_of(_text, _any_field),
            "args": st.one_of(_schemas, _any_field, st.just({"type": "string"})),
            "tier": st.one_of(_tiers.map(str), _any_field),
            "readOnly": st.one_of(st.booleans(), _any_field),
            "cmd": st.one_of(_cmds, _any_field),
            "x-extra": st.integers(),
        },
    ),
    _json_values,
)
_maybe_docs = st.one_of(
    valid_docs,
    st.fixed_dictionaries(
        {},
        optional={
            "description": st.one_of(_text, _any_field),
            "prompt": st.one_of(_text, _any_field),
            "args": st.one_of(_schemas, _any_field, st.just({"type": "array"})),
            "tier": st.one_of(_tiers.map(str), _any_field),
            "readOnly": st.one_of(st.booleans(), _any_field),
            "cmd": st.one_of(_cmds, _any_field),
            "sudo": st.one_of(st.booleans(), _any_field),
            "elevated": st.one_of(st.booleans(), _any_field),
            "variants": st.one_of(st.lists(_maybe_variant, max_size=3), _any_field),
            "unknown": st.integers(),
        },
    ),
)


@settings(max_examples=300, deadline=None)
@given(doc=_maybe_docs)
def test_fast_path_builds_exactly_what_the_full_check_builds(doc: dict[str, Any]) -> None:
    from unittest import mock

    from registry_core.registry import meta as meta_mod

    path = "/tools/t.meta"
    text = json.dumps(doc, indent=1)
    fast = meta_mod.check_document(path, "t", text, doc)
    with mock.patch.object(meta_mod, "_quick_meta", return_value=None):
        full = meta_mod.check_document(path, "t", text, doc)
    assert fast.meta == full.meta
    assert [str(e) for e in fast.errors] == [str(e) for e in full.errors]
    assert fast.warnings == full.warnings


# --- the scan cache changes nothing but the speed ---------------------------------------------


_flawless_docs = valid_docs.map(lambda d: {k: v for k, v in d.items() if k != "x-unknown"})


@settings(max_examples=60, deadline=None)
@given(docs=st.lists(st.one_of(_flawless_docs, _maybe_docs), min_size=1, max_size=5))
def test_a_load_through_the_scan_cache_is_the_load_without_it(docs: list[Any]) -> None:
    from unittest import mock

    from registry_core.registry import scan_cache

    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(scan_cache, "SETTLE_NS", 0):
        base = Path(tmp)
        tools = base / "tools"
        tools.mkdir()
        for i, doc in enumerate(docs):
            (tools / f"t{i}.meta").write_text(json.dumps(doc, indent=1))
        env = {"PATH": str(base / "no-bin"), "HOME": str(base)}
        fresh = RegistryLoader([tools], env=env).load()
        RegistryLoader([tools], env=env, cache_dir=base / "cache").load()  # fills the cache
        cached = RegistryLoader([tools], env=env, cache_dir=base / "cache").load()
        for i, doc in enumerate(docs):
            name = f"t{i}"
            fast = parse_meta(tools / f"{name}.meta", json.dumps(doc, indent=1).encode()).fast
            assert cached.get(name).docs.decoded is not fast  # known without reading it
            want, got = tool_details(fresh.get(name)), tool_details(cached.get(name))
            for details in (want, got):
                details["errors"] = [e["message"] for e in details["errors"]]
            assert got == want
