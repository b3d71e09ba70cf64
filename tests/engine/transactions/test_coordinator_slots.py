"""The coordinator slot table (``coordinator_slots.next_slot``) and a slot's life with a fake
loader: loading answers CoordinatorLoadInProgressError, a follower NotCoordinatorError, a
failed load is retried, a newer epoch replaces an older load, a lost write reloads."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from twinlog.engine.base.errors import CoordinatorLoadInProgressError, NotCoordinatorError
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.coordinator_slots import (
    ABSENT,
    Action,
    CoordinatorSlots,
    EventKind,
    Phase,
    SlotState,
    next_slot,
)

LOADING_5 = SlotState(Phase.LOADING, 5)
ACTIVE_5 = SlotState(Phase.ACTIVE, 5)


@pytest.mark.parametrize(
    ("state", "event", "epoch", "after", "action"),
    [
        (ABSENT, EventKind.LEAD, 5, LOADING_5, Action.LOAD),
        (ABSENT, EventKind.FOLLOW, -1, ABSENT, Action.NONE),
        (ABSENT, EventKind.LOADED, 5, ABSENT, Action.DISCARD),
        (ABSENT, EventKind.WRITE_LOST, 5, ABSENT, Action.NONE),
        (LOADING_5, EventKind.LEAD, 6, SlotState(Phase.LOADING, 6), Action.LOAD),
        (LOADING_5, EventKind.LEAD, 5, LOADING_5, Action.NONE),
        (LOADING_5, EventKind.LOADED, 5, ACTIVE_5, Action.INSTALL),
        (LOADING_5, EventKind.LOADED, 4, LOADING_5, Action.DISCARD),
        (LOADING_5, EventKind.FOLLOW, -1, ABSENT, Action.NONE),
        (ACTIVE_5, EventKind.LEAD, 5, ACTIVE_5, Action.NONE),
        (ACTIVE_5, EventKind.LEAD, 7, SlotState(Phase.LOADING, 7), Action.UNLOAD_AND_LOAD),
        (ACTIVE_5, EventKind.WRITE_LOST, 5, LOADING_5, Action.UNLOAD_AND_LOAD),
        (ACTIVE_5, EventKind.WRITE_LOST, 4, ACTIVE_5, Action.NONE),
        (ACTIVE_5, EventKind.FOLLOW, -1, ABSENT, Action.UNLOAD),
        (ACTIVE_5, EventKind.LOADED, 5, ACTIVE_5, Action.DISCARD),
    ],
)
def test_the_slot_table(
    state: SlotState, event: EventKind, epoch: int, after: SlotState, action: Action
) -> None:
    assert next_slot(state, event, epoch) == (after, action)


class FakeCoordinator:
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.abandoned = False


class Loads:
    """A loader that blocks until released, failing the first ``failures`` times."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls: list[int] = []
        self.release = threading.Event()
        self.unloaded: list[FakeCoordinator] = []

    def load(self, partition: int, epoch: int) -> Coordinator:
        self.calls.append(epoch)
        if self.failures:
            self.failures -= 1
            raise CoordinatorLoadInProgressError("replicas not there yet")
        assert self.release.wait(10)
        return cast(Coordinator, FakeCoordinator(epoch))

    def unload(self, coordinator: Coordinator) -> None:
        fake = cast(Any, coordinator)
        fake.abandoned = True
        self.unloaded.append(fake)


def _slots(loads: Loads) -> CoordinatorSlots:
    return CoordinatorSlots(2, loads.load, loads.unload, lambda: False)


def test_a_slot_answers_by_phase_and_installs_what_it_loaded() -> None:
    loads = Loads(failures=2)
    slots = _slots(loads)
    with pytest.raises(NotCoordinatorError, match="not transaction coordinator 0"):
        slots.get(0)
    slots.lead(0, 5)
    with pytest.raises(CoordinatorLoadInProgressError, match="epoch 5"):
        slots.get(0)
    loads.release.set()
    assert slots.wait_active(0, timeout_s=10)
    assert cast(Any, slots.get(0)).epoch == 5
    assert loads.calls == [5, 5, 5]  # two failed loads were retried
    with pytest.raises(NotCoordinatorError):
        slots.get(1)  # the other slot is untouched


def test_a_lost_write_reloads_and_a_follow_unloads() -> None:
    loads = Loads()
    loads.release.set()
    slots = _slots(loads)
    slots.lead(0, 5)
    assert slots.wait_active(0, timeout_s=10)
    first = cast(Any, slots.get(0))
    slots.write_lost(0, 5)
    assert first.abandoned
    assert slots.wait_active(0, timeout_s=10)
    second = cast(Any, slots.get(0))
    assert second is not first and second.epoch == 5
    slots.follow(0)
    assert second.abandoned
    with pytest.raises(NotCoordinatorError):
        slots.get(0)


def test_a_load_of_an_older_epoch_is_discarded() -> None:
    loads = Loads()
    slots = _slots(loads)
    slots.lead(0, 5)
    slots.lead(0, 6)  # before the load of 5 finished
    loads.release.set()
    assert slots.wait_active(0, timeout_s=10)
    assert cast(Any, slots.get(0)).epoch == 6
    # the load of epoch 5, if it finished, was abandoned, never installed
    assert all(fake.epoch == 5 for fake in loads.unloaded)
