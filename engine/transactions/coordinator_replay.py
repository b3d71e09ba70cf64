"""How a coordinator's memory is rebuilt from its transaction journal, and checkpointed.

``CoordinatorMemory`` holds the producers, the in-flight transactions and the recent
outcomes, and changes only by ``apply``-ing a journaled record: live decisions apply
the record they just appended, recovery applies every record from the checkpoint on.
So memory is always what the journal says, after a restart as before it.

    recover:     checkpoint (producer table as of its records) -> replay records from its
                 replay_from_offset, skipping CHECKPOINT records and the INIT_PRODUCER
                 records the table already holds (those before the checkpoint's records)
    checkpoint:  replay_from_offset = the earliest in-flight BEGIN (the log end when none),
                 plus the producer table, appended as CHECKPOINT records; journal segments
                 wholly before replay_from_offset become deletable

Thread rule: the caller holds the coordinator's lock around every method.
"""

from __future__ import annotations

from collections import OrderedDict

from twinlog.engine.base.types import TransactionState
from twinlog.engine.transactions.transaction_metadata import (
    ProducerEntry,
    TransactionMetadata,
    now_ms,
)
from twinlog.journal.txn_checkpoint import Checkpoint, ProducerSnapshot
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import (
    Aborted,
    AddOffsets,
    AddPartitions,
    Begin,
    CheckpointPart,
    Committed,
    CoordinatorRecord,
    InitProducer,
    PrepareAbort,
    PrepareCommit,
)

# Completed transactions remembered (id -> final state) so that a late request gets
# "it is ABORTED" rather than "unknown"; ~100 bytes each.
RECENT_OUTCOMES_MAX = 10_000


class CoordinatorMemory:
    """The coordinator's in-memory state: exactly what its journal's records say."""

    def __init__(self) -> None:
        self.producers: dict[str, ProducerEntry] = {}
        self.producers_by_id: dict[int, ProducerEntry] = {}
        self.transactions: dict[int, TransactionMetadata] = {}
        self.recent_outcomes: OrderedDict[int, TransactionState] = OrderedDict()

    def apply(self, offset: int, record: CoordinatorRecord) -> None:
        """Apply a journaled record. Used by live decisions and by replay alike."""
        if isinstance(record, CheckpointPart):
            return  # a copy of what memory holds already; loaded only through the pointer
        if isinstance(record, InitProducer):
            entry = self.producers.get(record.transactional_id)
            if entry is None:
                entry = ProducerEntry(
                    record.transactional_id,
                    record.producer_id,
                    record.producer_generation,
                    record.timeout_ms,
                )
                self.producers[record.transactional_id] = entry
            else:
                self.producers_by_id.pop(entry.producer_id, None)
                entry.producer_id = record.producer_id
                entry.producer_generation = record.producer_generation
                entry.timeout_ms = record.timeout_ms
                # an outcome is the generation's that ended it: the new one has ended nothing
                entry.last_outcome = None
            self.producers_by_id[entry.producer_id] = entry
        elif isinstance(record, Begin):
            self.transactions[record.transaction_id] = TransactionMetadata(
                transaction_id=record.transaction_id,
                transactional_id=record.transactional_id,
                producer_id=record.producer_id,
                producer_generation=record.producer_generation,
                state=TransactionState.ONGOING,
                started_ms=record.timestamp_ms,
                timeout_ms=record.timeout_ms,
                begin_offset=offset,
                request_id=record.request_id,
            )
            producer = self.producers.get(record.transactional_id)
            if producer is not None:
                if producer.transaction_id in self.transactions:  # pipelined: still completing
                    # A live begin waits for an older one first (Coordinator.begin), so
                    # ``completing`` is free here; replay keeps the older if it is not.
                    if producer.completing not in self.transactions:
                        producer.completing = producer.transaction_id
                producer.transaction_id = record.transaction_id
                producer.last_begin = (record.request_id, record.transaction_id)
        else:
            txn = self.transactions.get(record.transaction_id)  # type: ignore[attr-defined]
            if txn is None:
                # Replay from a checkpoint meets the ends of transactions begun before it.
                return
            if isinstance(record, AddPartitions):
                txn.partitions.update(record.partitions)
                if not record.by_send:
                    if txn.explicit_partitions is None:
                        txn.explicit_partitions = set()
                    txn.explicit_partitions.update(record.partitions)
            elif isinstance(record, AddOffsets):
                txn.groups.setdefault(record.group_id, set()).update(record.partitions)
            elif isinstance(record, PrepareCommit):
                txn.state = TransactionState.PREPARE_COMMIT
                txn.attempts = record.attempts
                txn.journaled = record.journaled
            elif isinstance(record, PrepareAbort):
                txn.state = TransactionState.PREPARE_ABORT
            elif isinstance(record, Committed | Aborted):
                txn.state = (
                    TransactionState.COMMITTED
                    if isinstance(record, Committed)
                    else TransactionState.ABORTED
                )
                self._forget(txn)

    def _forget(self, txn: TransactionMetadata) -> None:
        self.transactions.pop(txn.transaction_id, None)
        self.recent_outcomes[txn.transaction_id] = txn.state
        if len(self.recent_outcomes) > RECENT_OUTCOMES_MAX:
            self.recent_outcomes.popitem(last=False)
        producer = self.producers.get(txn.transactional_id)
        if producer is not None and producer.transaction_id == txn.transaction_id:
            producer.transaction_id = None
        if producer is not None and producer.completing == txn.transaction_id:
            producer.completing = None
        if producer is not None and producer.producer_generation == txn.producer_generation:
            producer.last_outcome = (txn.transaction_id, txn.state)

    def replay(self, journal: TxnJournal) -> int:
        """Load the journal's checkpoint, then apply the records from its replay offset on;
        return how many records were read."""
        checkpoint = journal.read_checkpoint()
        start = table_end = 0
        if checkpoint is not None:
            start, table_end = checkpoint.replay_from_offset, checkpoint.checkpoint_offset
            self._load_producers(checkpoint)
        replayed = 0
        for offset, record in journal.replay(start):
            replayed += 1
            if isinstance(record, InitProducer) and offset < table_end:
                # The table holds it, and maybe a later generation than this record's: one
                # written between replay_from_offset and the checkpoint.
                continue
            self.apply(offset, record)
        return replayed

    def _load_producers(self, checkpoint: Checkpoint) -> None:
        for snapshot in checkpoint.producers:
            entry = ProducerEntry(
                snapshot.transactional_id,
                snapshot.producer_id,
                snapshot.producer_generation,
                snapshot.timeout_ms,
            )
            self.producers[entry.transactional_id] = entry
            self.producers_by_id[entry.producer_id] = entry
            if snapshot.last_transaction_id >= 0:
                outcome = TransactionState(snapshot.last_outcome)
                entry.last_outcome = (snapshot.last_transaction_id, outcome)
                self.recent_outcomes[snapshot.last_transaction_id] = outcome

    def write_checkpoint(self, journal: TxnJournal, low_watermark: int | None = None) -> Checkpoint:
        """Write a checkpoint replaying from the earliest in-flight BEGIN, its pointer
        publishing ``low_watermark``; old segments become deletable."""
        replay_from_offset = min(
            (txn.begin_offset for txn in self.transactions.values()),
            default=journal.end_offset,
        )
        return journal.write_checkpoint(
            now_ms(),
            replay_from_offset,
            tuple(
                ProducerSnapshot(
                    p.transactional_id,
                    p.producer_id,
                    p.producer_generation,
                    p.timeout_ms,
                    *((p.last_outcome[0], p.last_outcome[1].value) if p.last_outcome else ()),
                )
                for p in self.producers.values()
            ),
            low_watermark,
        )

    def low_watermark(self) -> int | None:
        """Smallest transaction id still in flight here, or None."""
        return min(self.transactions, default=None)

    def highest_transaction_id(self) -> int:
        """The highest transaction id memory knows of (in flight, recently ended, or a
        producer's latest), 0 for none: ids above it were never journaled here, or their
        records were purged (then older than a producer's latest, which the table keeps)."""
        known = [*self.transactions, *self.recent_outcomes]
        for producer in self.producers.values():
            known += [producer.transaction_id or 0, producer.completing or 0]
            if producer.last_outcome is not None:
                known.append(producer.last_outcome[0])
        return max(known, default=0)
