"""A cluster coordinator's journal append: one record into ``__txn_journal-N``, answered
once the in-sync replicas hold it (CLUSTER.md §3.5, I8: the coordinator acts only on
committed records).

Two steps, so that many decisions share one fsync and one replication round (group
commit): ``write`` appends without an fsync, under the coordinator's lock; ``wait_durable``
then fsyncs (``GroupFlush``: one fsync covers every record written before it) and waits
until the in-sync replicas hold the record, without the coordinator's lock. The
coordinator answers only after the wait, so nothing it answered on is lost.

Three outcomes, told apart because memory must never disagree with the log:

    refused          nothing written (not leader at the loaded epoch, too few in-sync
                     replicas, a full disk): the error as it is; memory and log agree
    acknowledged     fsynced here and held by the in-sync replicas
    unknown          written, but not made durable or not acknowledged (the fsync
                     failed, leadership moved, or the replicas did not answer within
                     replica_ack_timeout_ms): the record may yet be kept. The
                     coordinator applied it to memory at ``write``, so this coordinator
                     is finished: every later write is refused, and ``on_lost`` has its
                     slot reload it from the log (or another broker takes over). The
                     caller gets NotCoordinatorError or CoordinatorLoadInProgressError,
                     both retriable: a retried commit gets the outcome the log decides.

Thread rule: ``write`` under the coordinator's lock (one writer); ``wait_durable`` from
any thread; ``lost`` is set once, by the first wait that fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    TwinlogError,
)
from twinlog.engine.broker.partition import Partition
from twinlog.engine.log import GroupFlush


class ReplicatedJournalAppend:
    def __init__(self, partition: Partition, leader_epoch: int, on_lost: Callable[[], None]):
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.on_lost = on_lost
        self.lost = False  # an append's fate is unknown: memory may lag the log
        self._lost_lock = threading.Lock()  # on_lost is called once
        self._flush = GroupFlush(partition.log)

    def write(self, batch: bytes) -> tuple[int, int]:
        """Append without waiting: (base offset, end offset) for ``wait_durable``."""
        name = self.partition.name
        if self.lost:
            raise CoordinatorLoadInProgressError(
                f"the coordinator of {name} is reloading its journal after a write whose "
                "fate was unknown; retry shortly"
            )
        try:
            base_offset, end_offset = self.partition.append_as_leader(
                batch, self.leader_epoch, defer_flush=True
            )
        except NotLeaderOrFollowerError as error:
            raise NotCoordinatorError(
                f"this broker no longer leads {name} at epoch {self.leader_epoch}, so it is "
                f"not that coordinator any more ({error}); find the coordinator and retry"
            ) from error
        # appended here, not yet held by the replicas (CLUSTER.md F7's "PREPARE appended,
        # not replicated" when the record is a PREPARE)
        failpoints.hit("coordinator.journal_appended")
        return base_offset, end_offset

    def wait_durable(self, end_offset: int) -> None:
        """Until the journal below ``end_offset`` is fsynced here and held by the in-sync
        replicas; raises (retriable) when its fate is unknown, and the coordinator is lost."""
        name = self.partition.name
        try:
            self._flush.wait_durable(end_offset)
            self.partition.wait_acknowledged(end_offset, self.leader_epoch)
        except (TwinlogError, OSError) as error:
            self._lose()
            if isinstance(error, NotLeaderOrFollowerError):
                raise NotCoordinatorError(
                    f"leadership of {name} moved before its replicas acknowledged journal "
                    f"offsets below {end_offset}; the new coordinator's journal decides whether "
                    "they stand: find the coordinator and retry (a retried commit is answered "
                    "with the outcome the journal holds)"
                ) from error
            raise CoordinatorLoadInProgressError(
                f"the journal {name} below offset {end_offset} was not made durable and "
                f"acknowledged ({error}); the coordinator reloads from its journal: retry shortly"
            ) from error

    def _lose(self) -> None:
        with self._lost_lock:
            if self.lost:
                return
            self.lost = True
        self.on_lost()
