"""A partition leader's epochs, and the check every coordinator call passes first.

The leader epoch (I2) and, per coordinator partition, the highest coordinator
epoch seen (I9: "every cross-broker request carries the sender's epochs; the
receiver refuses stale ones"). Kafka's rules and names:

    expected leader epoch <  ours   FencedLeaderEpochError   (caller's metadata is stale)
    expected leader epoch >  ours   UnknownLeaderEpochError  (we have not learnt it yet)
    coordinator epoch < highest     TransactionCoordinatorFencedError (a deposed coordinator)

A call refused changes nothing, the highest coordinator epoch included.

Thread rule: any thread; one lock.
"""

from __future__ import annotations

import threading
from typing import Protocol

from twinlog.engine.base.errors import (
    FencedLeaderEpochError,
    TransactionCoordinatorFencedError,
    UnknownLeaderEpochError,
)
from twinlog.engine.transactions.partition_calls import CallEpochs


class EpochStampingLog(Protocol):
    """The data log: it holds the leader epoch, stamps it into every batch it appends and
    records where each epoch starts (its leader-epoch checkpoint)."""

    @property
    def leader_epoch(self) -> int: ...

    def become_leader(self, epoch: int) -> None: ...

    def become_follower(self) -> None: ...


class PartitionEpochs:
    def __init__(self, where: str, log: EpochStampingLog) -> None:
        self._where = where
        self._lock = threading.Lock()
        # The leader epoch has one home, the data log (it stamps it into batches and keeps
        # the epoch checkpoint), so a promotion changes what is stamped and what is checked
        # at once.
        self._log = log
        self._coordinator_epochs: dict[int, int] = {}  # coordinator partition -> highest seen

    @property
    def leader_epoch(self) -> int:
        return self._log.leader_epoch

    def become_leader(self, leader_epoch: int) -> None:
        """A newer leader epoch (a promotion); never a lower one (ValueError)."""
        with self._lock:
            self._log.become_leader(leader_epoch)

    def become_follower(self) -> None:
        """This replica follows: its log refuses a leader's append of an earlier term."""
        with self._lock:
            self._log.become_follower()

    def coordinator_epoch(self, coordinator_partition: int) -> int:
        """The highest epoch seen from that coordinator partition (0: none yet)."""
        with self._lock:
            return self._coordinator_epochs.get(coordinator_partition, 0)

    def check(self, epochs: CallEpochs) -> None:
        """Refuse a stale call (see the module text); else remember its coordinator epoch."""
        with self._lock:
            self.check_leader_epoch(epochs.leader_epoch)
            highest = self._coordinator_epochs.get(epochs.coordinator_partition, 0)
            if epochs.coordinator_epoch < highest:
                raise TransactionCoordinatorFencedError(
                    f"{self._where}: coordinator {epochs.coordinator_partition} sent epoch "
                    f"{epochs.coordinator_epoch}, but epoch {highest} has called here: that "
                    "coordinator was replaced; nothing was changed"
                )
            self._coordinator_epochs[epochs.coordinator_partition] = epochs.coordinator_epoch

    def check_leader_epoch(self, expected: int) -> None:
        ours = self._log.leader_epoch
        if expected < ours:
            raise FencedLeaderEpochError(
                f"{self._where}: the call expected leader epoch {expected}, the partition is "
                f"at {ours}; refresh metadata and retry"
            )
        if expected > ours:
            raise UnknownLeaderEpochError(
                f"{self._where}: the call expected leader epoch {expected}, the partition is "
                f"still at {ours}; retry shortly"
            )
