"""The naming walk of ``check_json_tree`` at its depth limit (issue 16).

Written against the survivors of ``messages.py``'s mutation run: the quick walk
vouches for every plain tree, so the naming walk's own depth count is only
seen on a tree it is asked to check although nothing in it is wrong (a value
of a ``str`` subclass, which the quick walk leaves to it).
"""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.elevation import messages as m
from registry_core.elevation.messages import MAX_DEPTH, MessageError, check_json_tree


def deep(depth: int, leaf: Any) -> dict[str, Any]:
    """A message whose deepest container, at ``depth`` (the message is 1), holds ``leaf``;
    lists and objects alternate on the way down, and a ``str`` subclass at the top
    makes the quick walk hand the tree to the naming walk."""
    inner: Any = [leaf]
    for level in range(depth - 2):
        inner = {"d": inner} if level % 2 else [inner]
    return {"kind": m.Kind.SUDO, "deep": inner}


def walked(obj: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> int:
    calls = 0
    real = m._check_json_tree_naming_the_field

    def counting(tree: m.JsonObject, request_id: m.RequestId | None) -> None:
        nonlocal calls
        calls += 1
        real(tree, request_id)

    monkeypatch.setattr(m, "_check_json_tree_naming_the_field", counting)
    check_json_tree(obj, "r")
    return calls


@pytest.mark.parametrize("leaf", [1, "s", None, 2.5, True])
def test_the_naming_walk_accepts_a_container_at_the_limit_holding_a_value(
    leaf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The value sits one level below the deepest container: only containers count.
    assert walked(deep(MAX_DEPTH, leaf), monkeypatch) == 1


def test_the_naming_walk_refuses_a_container_one_level_deeper() -> None:
    with pytest.raises(MessageError) as info:
        check_json_tree(deep(MAX_DEPTH + 1, 1), "r")
    path = "deep" + "[0].d" * 31 + "[0]"  # the list at depth 65
    assert info.value.message == f"field {path!r} nests deeper than {MAX_DEPTH} levels"
    assert info.value.request_id == "r"


def test_the_naming_walk_counts_objects_and_lists_alike() -> None:
    only_objects: Any = 1
    only_lists: Any = 1
    for _level in range(MAX_DEPTH - 1):
        only_objects, only_lists = {"o": only_objects}, [only_lists]
    for tree in ({"k": m.Kind.SUDO, "o": only_objects}, {"k": m.Kind.SUDO, "l": only_lists}):
        check_json_tree(tree, None)
        with pytest.raises(MessageError, match=f"nests deeper than {MAX_DEPTH} levels"):
            check_json_tree({"k": m.Kind.SUDO, "x": [tree]}, None)
