"""A cluster coordinator's journal append: one record into ``__txn_journal-N``, answered
once the in-sync replicas hold it (CLUSTER.md §3.5, I8: the coordinator acts only on
committed records).

Three outcomes, told apart because memory must never disagree with the log:

    refused          nothing written (not leader at the loaded epoch, too few in-sync
                     replicas, a full disk): the error as it is; memory and log agree
    acknowledged     the offset; the coordinator applies the record to memory
    unknown          written, but not acknowledged (leadership moved, or the replicas
                     did not answer within replica_ack_timeout_ms): the record may yet
                     be committed. This coordinator is finished: every later append is
                     refused, and ``on_lost`` has its slot reload it from the log once
                     the replicas hold it all (or another broker takes over). The
                     caller gets NotCoordinatorError or CoordinatorLoadInProgressError,
                     both retriable: a retried commit gets the outcome the log decides.

Thread rule: the coordinator's lock serialises appends; ``lost`` is read under it too.
"""

from __future__ import annotations

from collections.abc import Callable

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    TwinlogError,
)
from twinlog.engine.broker.partition import Partition


class ReplicatedJournalAppend:
    def __init__(self, partition: Partition, leader_epoch: int, on_lost: Callable[[], None]):
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.on_lost = on_lost
        self.lost = False  # an append's fate is unknown: memory may lag the log

    def __call__(self, batch: bytes) -> int:
        name = self.partition.name
        if self.lost:
            raise CoordinatorLoadInProgressError(
                f"the coordinator of {name} is reloading its journal after a write whose "
                "fate was unknown; retry shortly"
            )
        try:
            base_offset, end_offset = self.partition.append_as_leader(batch, self.leader_epoch)
        except NotLeaderOrFollowerError as error:
            raise NotCoordinatorError(
                f"this broker no longer leads {name} at epoch {self.leader_epoch}, so it is "
                f"not that coordinator any more ({error}); find the coordinator and retry"
            ) from error
        # appended here, not yet held by the replicas (CLUSTER.md F7's "PREPARE appended,
        # not replicated" when the record is a PREPARE)
        failpoints.hit("coordinator.journal_appended")
        try:
            self.partition.wait_acknowledged(end_offset, self.leader_epoch)
        except TwinlogError as error:
            self.lost = True
            self.on_lost()
            if isinstance(error, NotLeaderOrFollowerError):
                raise NotCoordinatorError(
                    f"leadership of {name} moved before its replicas acknowledged journal "
                    f"offset {base_offset}; the new coordinator's journal decides whether it "
                    "stands: find the coordinator and retry (a retried commit is answered "
                    "with the outcome the journal holds)"
                ) from error
            raise CoordinatorLoadInProgressError(
                f"the replicas of {name} did not acknowledge journal offset {base_offset} "
                f"({error}); the coordinator reloads from its journal: retry shortly"
            ) from error
        return base_offset
