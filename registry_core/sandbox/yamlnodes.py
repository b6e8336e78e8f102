"""Read a YAML profile the way ollie-core's loader (Go, ``gopkg.in/yaml.v3``) reads it.

PyYAML resolves plain scalars by YAML 1.1 (``yes`` is a boolean, ``0x50`` an
integer, ``y`` a string) while yaml.v3 resolves by YAML 1.2 and then converts
each scalar into the Go type of the field it fills.  To give every profile the
meaning it has in ollie-core, we only *compose* the document (a tree of nodes
keeping each scalar's source text and quoting) and convert the nodes
ourselves, field by field, with yaml.v3's rules:

- a ``bool`` field takes plain ``true``/``True``/``TRUE``/``false``/...; and,
  in any quoting, the YAML 1.1 words ``y Y yes Yes YES on On ON`` and
  ``n N no No NO off Off OFF``;
- a ``string`` field takes any scalar's text as written (``80`` is "80");
- a plain ``~``, ``null``, ``Null``, ``NULL`` or nothing is the zero value;
- a duplicate mapping key is an error; ``<<`` merges mappings; only the first
  document of a stream counts.
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_PLAIN_BOOLS = {"true": True, "True": True, "TRUE": True}
_PLAIN_BOOLS.update({"false": False, "False": False, "FALSE": False})
_YAML11_TRUE = frozenset({"y", "Y", "yes", "Yes", "YES", "on", "On", "ON"})
_YAML11_FALSE = frozenset({"n", "N", "no", "No", "NO", "off", "Off", "OFF"})
_MERGE_KEY = "<<"


class NodeError(ValueError):
    """A node that does not fit its field: ``key`` is the dotted field name."""

    def __init__(self, key: str, message: str, node: Node | None, value: str | None = None) -> None:
        where = f" (line {node.start_mark.line + 1})" if node is not None else ""
        shown = repr(value) if value is not None else describe(node)
        super().__init__(f"{key}: {message}, got {shown}{where}")
        self.key = key


def describe(node: Node | None) -> str:
    if node is None:
        return "nothing"
    if isinstance(node, ScalarNode):
        return repr(node.value)
    if isinstance(node, SequenceNode):
        return "a list"
    return "a mapping"


def compose_first(text: str) -> Node | None:
    """The node tree of the first document of ``text`` (None for an empty stream).

    Raises :class:`yaml.YAMLError` for a syntax error in that document.
    """
    loader = yaml.BaseLoader(text)  # no implicit typing: every scalar keeps its text
    try:
        if loader.check_node():
            node: Node | None = loader.get_node()
            return node
        return None
    finally:
        loader.dispose()


def is_null(node: Node | None) -> bool:
    return node is None or (
        isinstance(node, ScalarNode) and node.style is None and node.value in _NULLS
    )


def _merge_sources(key: str, value: Node) -> list[MappingNode]:
    if isinstance(value, MappingNode):
        return [value]
    if isinstance(value, SequenceNode) and all(isinstance(v, MappingNode) for v in value.value):
        return list(value.value)
    raise NodeError(key, "a merge (<<) takes a mapping or a list of mappings", value)


def mapping(key: str, node: Node | None) -> dict[str, Node]:
    """The entries of a mapping node (null: empty); explicit keys win over ``<<`` merges."""
    if is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        raise NodeError(key, "expected a mapping", node)
    own: dict[str, Node] = {}
    merged: dict[str, Node] = {}
    for key_node, value in node.value:
        if not isinstance(key_node, ScalarNode):
            raise NodeError(key, "mapping keys must be plain words", key_node)
        name = key_node.value
        if name == _MERGE_KEY and key_node.style is None:
            for source in _merge_sources(key, value):
                for sub, sub_value in mapping(key, source).items():
                    merged.setdefault(sub, sub_value)
            continue
        if name in own:
            raise NodeError(f"{key}.{name}", "key defined twice", key_node)
        own[name] = value
    return {**merged, **own}


def boolean(key: str, node: Node | None) -> bool:
    """A Go ``bool`` field; null is ``false`` (Go's zero value)."""
    if is_null(node):
        return False
    if isinstance(node, ScalarNode):
        if node.style is None and node.value in _PLAIN_BOOLS:
            return _PLAIN_BOOLS[node.value]
        if node.value in _YAML11_TRUE:
            return True
        if node.value in _YAML11_FALSE:
            return False
    raise NodeError(key, "expected true or false (or yes/no, on/off, y/n)", node)


def string(key: str, node: Node | None) -> str:
    """A Go ``string`` field: any scalar's text; null is ``""``."""
    if is_null(node):
        return ""
    if isinstance(node, ScalarNode):
        return str(node.value)
    raise NodeError(key, "expected a single value", node)


def strings(key: str, node: Node | None) -> tuple[str, ...]:
    """A Go ``[]string`` field: a list of scalars (a null item is ``""``)."""
    if is_null(node):
        return ()
    if not isinstance(node, SequenceNode):
        raise NodeError(key, "expected a list of strings", node)
    return tuple(string(key, item) for item in node.value)


def unknown_keys(key: str, entries: Mapping[str, Node], known: tuple[str, ...]) -> list[str]:
    """Warnings for keys ollie-core would ignore too."""
    prefix = f"{key}." if key else ""
    return [f"unknown key '{prefix}{name}' (ignored)" for name in entries if name not in known]
