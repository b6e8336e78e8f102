"""The headless broker's start-up heap, left out of the garbage collector's walks.

A broker holds its registry in memory (10,000 tools are a few hundred
thousand objects) and then serves connections, each of which allocates
transports, protocols, tasks and records.  Those allocations trigger the
cyclic garbage collector, and its full collections walk every object alive,
the registry included: with 5,000 clients connecting at once that was more
than half of the broker's CPU time (two full collections of about 0.45 s
each and twenty middle ones of about 18 ms, issue 19).
:func:`freeze_startup_heap` collects once after start-up and moves what is
alive then into the interpreter's permanent generation (:func:`gc.freeze`),
which later collections skip.

Frozen objects are still freed by reference counting when the last
reference goes (a tool replaced by a refresh); only a reference cycle among
them would stay until the process ends.

It also collects the youngest generation every :data:`YOUNG_THRESHOLD`
net allocations instead of Python's 700: each connection allocates a few
dozen tracked objects, and with thousands of connections open every young
collection walked all of theirs (a fifth of the collector's time in that
run went to some 250 such collections; about 8 remain).  Cyclic garbage
waits a little longer; reference counting frees everything else at once.

Called by ``ollie-broker`` once, after its registry is loaded; never by a
library on its own.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Net allocations of tracked objects between two collections of the youngest generation."""


def freeze_startup_heap() -> int:
    """Collect, then freeze every object alive now, and collect the youngest generation
    every :data:`YOUNG_THRESHOLD` allocations; how many objects are frozen in all."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
    return gc.get_freeze_count()
