"""A broker's coordinators: one slot per partition of an internal topic, following its
leadership (CLUSTER.md §3.5; on one node its sole member leads them all).

Transaction coordinator N is whoever leads partition N of the replicated journal topic
``__txn_journal``; group coordinator P is whoever leads partition P of
``__consumer_offsets`` (the groups that hash to P). Each broker keeps one
``CoordinatorSlots`` per topic; what a slot loads (a ``Coordinator``, or the groups' offsets
folded from the partition) is the broker's ``load``. Each slot is a small state machine,
one table and one transition function (``next_slot``):

    state     event              -> state     action
    ABSENT    LEAD(e)            -> LOADING   load at e
    ABSENT    FOLLOW             -> ABSENT    -
    LOADING   LEAD(e' > e)       -> LOADING   load at e' (the loader of e gives up)
    LOADING   LOADED(e)          -> ACTIVE    install
    LOADING   LOADED(e' != e)    -> LOADING   discard (a loader of an older epoch)
    LOADING   FOLLOW             -> ABSENT    -
    ACTIVE    LEAD(e' > e)       -> LOADING   unload, load at e' (memory may be stale:
                                              another leader may have written between)
    ACTIVE    WRITE_LOST(e)      -> LOADING   unload, load at e (a journal write whose
                                              fate is unknown: memory is rebuilt from the
                                              log once the replicas hold it all)
    ACTIVE    FOLLOW             -> ABSENT    unload
    (any other pair)             -> unchanged -

Loading (``load(N, epoch)``, the broker's): the promotion barrier, then until the in-sync
replicas hold the whole partition, then (a transaction coordinator) replay from the
checkpoint, redo the PREPARE_* decisions, start, or (a group coordinator) fold the
partition's offsets into memory. Meanwhile requests get CoordinatorLoadInProgressError; a
broker that does not lead N answers NotCoordinatorError. A load that fails (too few
replicas, leadership moving) is tried again after a pause while the slot still loads
that epoch.

Invariant: at most one coordinator per slot is installed, and only at the epoch the
slot's state names; an unloaded transaction coordinator is abandoned (its completion
worker stops, it writes nothing more), and a new leader redoes what it left (APPLY is
idempotent); unloaded groups are dropped from memory.

Thread rule: events come from the cluster's role callbacks, the coordinators' journal
writes and the loader threads; one lock orders them. ``load`` and ``unload`` run
outside it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    TwinlogError,
)

log = logging.getLogger(__name__)

Loaded = TypeVar("Loaded")

# A failed load is tried again after 0.2 s, doubling up to 2 s (not jittered: one loader
# per slot, nothing to spread out).
LOAD_BACKOFF = Backoff(200, 2_000, jitter=0)
LOAD_RETRY_S_MAX = LOAD_BACKOFF.max_ms / 1000


class Phase(enum.Enum):
    ABSENT = "absent"
    LOADING = "loading"
    ACTIVE = "active"


class EventKind(enum.Enum):
    LEAD = "lead"
    FOLLOW = "follow"
    LOADED = "loaded"
    WRITE_LOST = "write_lost"


class Action(enum.Enum):
    NONE = "none"
    LOAD = "load"
    UNLOAD_AND_LOAD = "unload_and_load"
    UNLOAD = "unload"
    INSTALL = "install"
    DISCARD = "discard"


@dataclass(frozen=True)
class SlotState:
    phase: Phase
    epoch: int  # the journal partition's leader epoch being loaded or loaded; -1 if ABSENT


ABSENT = SlotState(Phase.ABSENT, -1)


def next_slot(state: SlotState, event: EventKind, epoch: int) -> tuple[SlotState, Action]:
    """The table above: the slot's next state and what to do."""
    phase = state.phase
    if event is EventKind.FOLLOW:
        return ABSENT, (Action.UNLOAD if phase is Phase.ACTIVE else Action.NONE)
    if event is EventKind.LEAD:
        if phase is Phase.ABSENT:
            return SlotState(Phase.LOADING, epoch), Action.LOAD
        if epoch > state.epoch:
            action = Action.UNLOAD_AND_LOAD if phase is Phase.ACTIVE else Action.LOAD
            return SlotState(Phase.LOADING, epoch), action
        return state, Action.NONE
    if event is EventKind.LOADED:
        if phase is Phase.LOADING and epoch == state.epoch:
            return SlotState(Phase.ACTIVE, epoch), Action.INSTALL
        return state, Action.DISCARD
    if event is EventKind.WRITE_LOST:
        if phase is Phase.ACTIVE and epoch == state.epoch:
            return SlotState(Phase.LOADING, epoch), Action.UNLOAD_AND_LOAD
        return state, Action.NONE
    raise AssertionError(f"unknown slot event {event}")


class CoordinatorSlots(Generic[Loaded]):
    def __init__(
        self,
        count: int,
        load: Callable[[int, int], Loaded],
        unload: Callable[[Loaded], None],
        is_stopping: Callable[[], bool],
        kind: str = "transaction coordinator",
        topic: str = "the transaction journal",
        roles_known: Callable[[], bool] = lambda: True,
    ) -> None:
        """``load(partition, epoch)``: the coordinator, loaded and started (raises if it
        cannot be yet); ``unload``: abandon one. ``kind`` and ``topic`` name the slots in
        logs and errors."""
        self.kind = kind
        self.topic = topic
        # False while a broker just started has not been told its roles: an ABSENT slot
        # may yet be told to lead, so "not the coordinator" is not known yet.
        self._roles_known = roles_known
        self._load = load
        self._unload = unload
        self._is_stopping = is_stopping
        self._lock = threading.Lock()
        self.count = count
        self._states = [ABSENT] * count
        self._installed: dict[int, Loaded] = {}
        # partition -> why its last load failed (cleared when one succeeds): a single
        # node's open reports a damaged journal instead of waiting for it to heal
        self._load_errors: dict[int, BaseException] = {}
        self._wake = threading.Condition(self._lock)

    # --- events -----------------------------------------------------------------------

    def lead(self, partition: int, epoch: int) -> None:
        self._on(partition, EventKind.LEAD, epoch)

    def follow(self, partition: int) -> None:
        self._on(partition, EventKind.FOLLOW, -1)

    def write_lost(self, partition: int, epoch: int) -> None:
        self._on(partition, EventKind.WRITE_LOST, epoch)

    def _on(
        self, partition: int, event: EventKind, epoch: int, loaded: Loaded | None = None
    ) -> None:
        with self._lock:
            before = self._states[partition]
            after, action = next_slot(before, event, epoch)
            self._states[partition] = after
            removed = None
            if action in (Action.UNLOAD, Action.UNLOAD_AND_LOAD):
                removed = self._installed.pop(partition, None)
            elif action is Action.INSTALL:
                assert loaded is not None
                self._installed[partition] = loaded
            self._wake.notify_all()
        if after != before:
            log.info(
                "%s %d: %s (epoch %d) -> %s (epoch %d) on %s",
                self.kind,
                partition,
                before.phase.value,
                before.epoch,
                after.phase.value,
                after.epoch,
                event.value,
            )
        if removed is not None:
            self._unload(removed)
        if action is Action.DISCARD and loaded is not None:
            self._unload(loaded)
        if action in (Action.LOAD, Action.UNLOAD_AND_LOAD):
            threading.Thread(
                target=self._load_while_wanted,
                args=(partition, after.epoch),
                name=f"{self.kind.replace(' ', '-')}-{partition}-load",
                daemon=True,
            ).start()

    def _still_loading(self, partition: int, epoch: int) -> bool:
        state = self._states[partition]
        return state.phase is Phase.LOADING and state.epoch == epoch and not self._is_stopping()

    def _load_while_wanted(self, partition: int, epoch: int) -> None:
        failed = 0
        while True:
            with self._lock:
                if not self._still_loading(partition, epoch):
                    return
            try:
                coordinator = self._load(partition, epoch)
            except Exception as error:  # retried while the slot still loads this epoch
                failed += 1
                with self._lock:
                    self._load_errors[partition] = error
                    self._wake.notify_all()
                if isinstance(error, TwinlogError) and error.retriable:  # replicas, a move
                    log.warning(
                        "%s %d (epoch %d): loading failed (%s); retrying",
                        self.kind,
                        partition,
                        epoch,
                        error,
                    )
                else:  # a damaged journal will not heal by itself: say it loudly, in full
                    log.exception(
                        "%s %d (epoch %d): loading failed; it answers "
                        "CoordinatorLoadInProgressError until a load succeeds (retrying every "
                        "%.0f s at most)",
                        self.kind,
                        partition,
                        epoch,
                        LOAD_RETRY_S_MAX,
                    )
                with self._lock:
                    self._wake.wait_for(
                        lambda: not self._still_loading(partition, epoch),
                        timeout=LOAD_BACKOFF.delay_s(failed),
                    )
                continue
            with self._lock:
                self._load_errors.pop(partition, None)
            self._on(partition, EventKind.LOADED, epoch, loaded=coordinator)
            return

    # --- lookups ----------------------------------------------------------------------

    def get(self, partition: int) -> Loaded:
        """The active coordinator N; CoordinatorLoadInProgressError while it loads here,
        NotCoordinatorError when this broker does not lead partition N of the topic."""
        with self._lock:
            coordinator = self._installed.get(partition)
            if coordinator is not None:
                return coordinator
            state = self._states[partition]
        if state.phase is Phase.LOADING:
            raise CoordinatorLoadInProgressError(
                f"{self.kind} {partition} is loading on this broker (leader epoch "
                f"{state.epoch}: promotion barrier, then reading {self.topic}); retry shortly"
            )
        if not self._roles_known():
            raise CoordinatorLoadInProgressError(
                f"this broker has just started and has not yet been told whether it is "
                f"{self.kind} {partition} (whether it leads partition {partition} of "
                f"{self.topic}); retry shortly"
            )
        raise NotCoordinatorError(
            f"this broker is not {self.kind} {partition} (it does not lead partition "
            f"{partition} of {self.topic}); find the coordinator again and retry there"
        )

    def is_active(self, partition: int) -> bool:
        with self._lock:
            return partition in self._installed

    def active(self) -> list[Loaded]:
        with self._lock:
            return [self._installed[index] for index in sorted(self._installed)]

    def load_error(self, partition: int) -> BaseException | None:
        """Why the last load of slot ``partition`` failed; None if none failed since the
        last that succeeded."""
        with self._lock:
            return self._load_errors.get(partition)

    def wait_active(self, partition: int, timeout_s: float) -> bool:
        """Until coordinator ``partition`` is active here (for tests and the demo)."""
        with self._lock:
            return self._wake.wait_for(lambda: partition in self._installed, timeout=timeout_s)

    def close(self) -> list[Loaded]:
        """Forget every slot; the coordinators that were active, for the caller to close."""
        with self._lock:
            installed = [self._installed[index] for index in sorted(self._installed)]
            self._installed.clear()
            self._states = [ABSENT] * len(self._states)
            self._wake.notify_all()
        return installed
