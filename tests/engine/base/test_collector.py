"""``freeze_startup_objects``: garbage is freed first, then what lives is never walked again."""

from __future__ import annotations

import gc
import re
import weakref

from twinlog.engine.base.collector import freeze_startup_objects


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_start_up_objects_leave_the_collections_and_garbage_is_not_frozen() -> None:
    kept = [[index] for index in range(50_000)]  # lists are tracked by the collector
    cycle = _Node()
    cycle.other = cycle  # garbage only the cyclic collector can free
    cycle_gone = weakref.ref(cycle)
    del cycle
    try:
        said = freeze_startup_objects()
        assert cycle_gone() is None  # collected before the freeze, not frozen forever
        # (The count moves as other threads free frozen objects: read it from the line.)
        told = re.fullmatch(r"gc: ([0-9,]+) start-up objects frozen", said)
        assert told is not None, said
        assert int(told.group(1).replace(",", "")) >= len(kept)
        assert gc.get_freeze_count() >= len(kept)
        walked = {id(thing) for thing in gc.get_objects()}  # every generation a collection walks
        assert not any(id(thing) in walked for thing in kept)
        made_after = [0]
        assert any(thing is made_after for thing in gc.get_objects())  # later ones are walked
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
