"""A CompletionWorker over fake partition leaders, for tests of how a prepared commit is applied."""

from __future__ import annotations

import threading

from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.transactions.coordinator_completion import CompletionWorker
from twinlog.engine.transactions.partition_calls import CallEpochs, PartitionLeaders
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata
from twinlog.journal.txn_records import CoordinatorRecord

TRANSACTION_ID = 7


def prepared_commit(
    partitions: list[TopicPartition], transaction_id: int = TRANSACTION_ID, producer_id: int = 1
) -> TransactionMetadata:
    """A transaction in PREPARE_COMMIT over ``partitions``, one entry on each."""
    return TransactionMetadata(
        transaction_id=transaction_id,
        transactional_id=f"writer-{producer_id}",
        producer_id=producer_id,
        producer_generation=0,
        state=TransactionState.PREPARE_COMMIT,
        started_ms=0,
        timeout_ms=60_000,
        begin_offset=0,
        request_id=0,
        partitions=set(partitions),
        journaled=tuple((partition, 1) for partition in partitions),
    )


def completion_worker(leaders: PartitionLeaders, txn: TransactionMetadata) -> CompletionWorker:
    """A worker that completes ``txn`` through ``leaders``; its journal write marks it
    COMMITTED. Not started: call ``start()`` and ``queue()``, or ``complete()``."""

    def write(record: CoordinatorRecord) -> int:
        txn.state = TransactionState.COMMITTED
        return 0

    return CompletionWorker(
        0,
        threading.RLock(),
        {txn.transaction_id: txn}.get,
        write,
        leaders,
        lambda _tp: CallEpochs(0, 1, 1),
    )
