"""``check_json_tree`` at its depth limit, on trees holding a ``str`` subclass (an enum)."""

from __future__ import annotations

from typing import Any

import pytest

from registry_core.broker.wire import messages as m
from registry_core.broker.wire.messages import MAX_DEPTH, MessageError, check_json_tree


def deep(depth: int, leaf: Any) -> dict[str, Any]:
    """A message whose deepest container, at ``depth`` (the message is 1), holds ``leaf``;
    lists and objects alternate on the way down, and a ``str`` subclass is at the top."""
    inner: Any = [leaf]
    for level in range(depth - 2):
        inner = {"d": inner} if level % 2 else [inner]
    return {"kind": m.Kind.SUDO, "deep": inner}


@pytest.mark.parametrize("leaf", [1, "s", None, 2.5, True])
def test_the_walk_accepts_a_container_at_the_limit_holding_a_value(leaf: Any) -> None:
    # The value sits one level below the deepest container: only containers count.
    check_json_tree(deep(MAX_DEPTH, leaf), "r")


def test_the_walk_refuses_a_container_one_level_deeper() -> None:
    with pytest.raises(MessageError) as info:
        check_json_tree(deep(MAX_DEPTH + 1, 1), "r")
    path = "deep" + "[0].d" * 31 + "[0]"  # the list at depth 65
    assert info.value.message == f"field {path!r} nests deeper than {MAX_DEPTH} levels"
    assert info.value.request_id == "r"


def test_the_walk_counts_objects_and_lists_alike() -> None:
    only_objects: Any = 1
    only_lists: Any = 1
    for _level in range(MAX_DEPTH - 1):
        only_objects, only_lists = {"o": only_objects}, [only_lists]
    for tree in ({"k": m.Kind.SUDO, "o": only_objects}, {"k": m.Kind.SUDO, "l": only_lists}):
        check_json_tree(tree, None)
        with pytest.raises(MessageError, match=f"nests deeper than {MAX_DEPTH} levels"):
            check_json_tree({"k": m.Kind.SUDO, "x": [tree]}, None)
