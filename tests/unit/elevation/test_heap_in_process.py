"""``freeze_startup_heap`` in this very process (``test_broker_heap`` runs it in
children, where mutation testing cannot see the call): it collects first, freezes,
spaces out young collections and never shortens them; everything is thawed after."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from registry_core.elevation.heap import YOUNG_THRESHOLD, freeze_startup_heap


class Node:
    def __init__(self) -> None:
        self.other: Node = self


@pytest.fixture
def thawed_after() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("thawed_after")
def test_collects_then_freezes_and_spaces_out_young_collections() -> None:
    gc.unfreeze()
    gc.set_threshold(700, 11, 12)
    cycle = Node()  # cyclic garbage: only a collection frees it
    alive = weakref.ref(cycle)
    del cycle
    frozen = freeze_startup_heap()
    assert alive() is None  # collected before freezing, not kept for good
    assert frozen > 1000  # this process's modules, at least
    assert gc.get_freeze_count() > 1000
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12) == (20_000, 11, 12)


@pytest.mark.usefixtures("thawed_after")
def test_a_higher_young_threshold_is_kept() -> None:
    gc.set_threshold(50_000, 9, 8)
    freeze_startup_heap()
    assert gc.get_threshold() == (50_000, 9, 8)
