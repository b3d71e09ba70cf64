"""Which twinlog transaction a Kafka producer's calls belong to.

Kafka's protocol names a transaction by its producer id and epoch only: the first
AddPartitionsToTxn (or AddOffsetsToTxn) after InitProducerId or EndTxn begins one
implicitly. twinlog names each transaction by an id that ``begin_transaction`` returns,
so this table begins it at that first call and remembers the id until EndTxn; Produce
names it to the broker for each transactional batch (so a batch that arrives after its
transaction ended is refused, never put in the next one), with the batch's sequence in
the transaction's numbering (``transaction_sequences``).

The table lives in the listener's process: a transaction a listener began and did not
end before it stopped is aborted by the coordinator when its timeout passes, as a
Kafka coordinator aborts a producer's that went silent. Entries of producers that went
silent stay until the table reaches ``ENTRIES_PRUNE_AT``; then every entry whose
transaction the broker no longer has in flight is dropped.

Thread rule: any thread; ``_lock`` guards the table, and a producer's begin happens
under it so that two connections of one producer never begin two transactions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from twinlog.engine.base.errors import InvalidTxnStateError, ProducerFencedError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.rpc.wire.broker_api import BrokerApi

Remembered = TypeVar("Remembered")


def _remember(table: dict[int, Remembered], producer_id: int, value: Remembered) -> None:
    """Set the producer's value, forgetting the oldest producer past the bound."""
    table.pop(producer_id, None)
    table[producer_id] = value  # last in insertion order: the newest
    if len(table) > PRODUCERS_REMEMBERED_MAX:
        del table[next(iter(table))]


@dataclass
class OpenTransaction:
    producer_generation: int
    transaction_id: int
    # the first Kafka sequence seen of this transaction on each partition
    # (``transaction_sequences``)
    first_sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    # batches of it this listener wrote, per partition: its commit names them, so a journal
    # that lost one refuses the commit. None for a transaction adopted after a restart of
    # the listener (the batches written before are not known): its commit names none.
    batches_written: dict[TopicPartition, int] | None = field(default_factory=dict)
    # learnt from the producer's coordinator on another broker (``follow``), not begun here
    followed: bool = False


ENTRIES_PRUNE_AT = 10_000
# Producers whose latest generation and last ended transaction are remembered (for an
# EndTxn that finds no open transaction); the oldest are forgotten past this.
PRODUCERS_REMEMBERED_MAX = 10_000


class EndWithout(Enum):
    """What an EndTxn that finds no open transaction is."""

    RETRY = "the retry of an end that succeeded"  # answered NONE, as Kafka does
    FENCED = "from a generation a newer InitProducerId fenced"
    NOTHING_OPEN = "for no transaction (never begun, or aborted when it timed out)"


def ongoing_transaction_at(
    broker: BrokerApi, producer_id: int, producer_generation: int
) -> int | None:
    """The transaction ``broker`` (the producer's coordinator) has ONGOING for this
    producer generation, or None."""
    for item in broker.list_transactions():
        if (
            item.producer_id == producer_id
            and item.producer_generation == producer_generation
            and item.state is TransactionState.ONGOING
        ):
            return item.transaction_id
    return None


class OpenTransactions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_producer: dict[int, OpenTransaction] = {}
        self._latest_generation: dict[int, int] = {}  # from InitProducerId
        self._last_ended: dict[int, tuple[int, bool]] = {}  # generation, committed

    def initialised(self, producer_id: int, producer_generation: int) -> None:
        """InitProducerId gave ``producer_generation``: the coordinator fenced the older
        ones and aborted what they had open."""
        with self._lock:
            self._by_producer.pop(producer_id, None)
            self._last_ended.pop(producer_id, None)
            _remember(self._latest_generation, producer_id, producer_generation)

    def ended(
        self, producer_id: int, producer_generation: int, transaction_id: int, committed: bool
    ) -> None:
        """EndTxn ended ``transaction_id``; a retry of it is answered as it was."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is not None and found.transaction_id == transaction_id:
                del self._by_producer[producer_id]
            _remember(self._last_ended, producer_id, (producer_generation, committed))

    def end_without_transaction(
        self, producer_id: int, producer_generation: int, committed: bool
    ) -> EndWithout:
        with self._lock:
            latest = self._latest_generation.get(producer_id)
            last = self._last_ended.get(producer_id)
        if latest is not None and producer_generation < latest:
            return EndWithout.FENCED
        if last == (producer_generation, committed):
            return EndWithout.RETRY
        return EndWithout.NOTHING_OPEN

    def current(self, producer_id: int, producer_generation: int) -> int | None:
        """The open transaction of this producer generation, if one was begun here."""
        with self._lock:
            found = self._by_producer.get(producer_id)
        if found is None or found.producer_generation != producer_generation:
            return None
        return found.transaction_id

    def ensure_open(self, broker: BrokerApi, producer_id: int, producer_generation: int) -> int:
        """The producer's open transaction, begun now if it has none."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is not None and found.followed:
                # this broker coordinates the producer now: the broker says what is open
                del self._by_producer[producer_id]
                found = None
            if found is not None:
                if found.producer_generation == producer_generation:
                    return found.transaction_id
                if found.producer_generation > producer_generation:
                    raise ProducerFencedError(
                        f"producer {producer_id} generation {producer_generation} is older "
                        f"than generation {found.producer_generation}, which has a transaction "
                        "open: a newer producer with the same transactional id fenced it"
                    )
            if len(self._by_producer) >= ENTRIES_PRUNE_AT:
                self._prune(broker)
            try:
                transaction_id = broker.begin_transaction(producer_id, producer_generation)
            except InvalidTxnStateError:
                # It has one open that this table does not know (begun before a restart of
                # the listener): that is the one the producer goes on with.
                in_flight = ongoing_transaction_at(broker, producer_id, producer_generation)
                if in_flight is None:
                    raise
                self._by_producer[producer_id] = OpenTransaction(
                    producer_generation, in_flight, batches_written=None
                )
                return in_flight
            self._by_producer[producer_id] = OpenTransaction(producer_generation, transaction_id)
            return transaction_id

    def adopt(self, broker: BrokerApi, producer_id: int, producer_generation: int) -> int | None:
        """The producer's open transaction at the broker when this table has none (begun
        before the listener restarted), remembered from now on; None when it has none."""
        with self._lock:
            found = ongoing_transaction_at(broker, producer_id, producer_generation)
            if found is not None:
                self._by_producer[producer_id] = OpenTransaction(
                    producer_generation, found, batches_written=None
                )
            return found

    def _prune(self, broker: BrokerApi) -> None:
        """Drop the entries of transactions no longer in flight (timed out, aborted by an
        operator). Under ``_lock``."""
        in_flight = {item.transaction_id for item in broker.list_transactions()}
        for producer_id, entry in list(self._by_producer.items()):
            if entry.transaction_id not in in_flight:
                del self._by_producer[producer_id]

    def follow(
        self, producer_id: int, producer_generation: int, transaction_id: int | None
    ) -> None:
        """A cluster broker's listener that does not coordinate the producer: its open
        transaction is ``transaction_id`` as its coordinator says (None: it has none). The
        entry, with its first sequences, is kept while the transaction stays the same."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if transaction_id is None:
                self._by_producer.pop(producer_id, None)
                return
            if (
                found is not None
                and found.producer_generation == producer_generation
                and found.transaction_id == transaction_id
            ):
                return
            self._by_producer.pop(producer_id, None)
            self._by_producer[producer_id] = OpenTransaction(
                producer_generation, transaction_id, batches_written=None, followed=True
            )
            if len(self._by_producer) > ENTRIES_PRUNE_AT:  # the oldest followed goes
                del self._by_producer[next(iter(self._by_producer))]

    def first_sequence(
        self, producer_id: int, transaction_id: int, topic: str, partition: int, sequence: int
    ) -> int:
        """The first sequence of the transaction on the partition: ``sequence`` if it is the
        first seen there (0 when the transaction is not open here any more)."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is None or found.transaction_id != transaction_id:
                return 0
            return found.first_sequences.setdefault((topic, partition), sequence)

    def batch_written(
        self, producer_id: int, transaction_id: int, topic_partition: TopicPartition
    ) -> None:
        """A batch of the transaction was written (not a duplicate of one written before)."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is None or found.transaction_id != transaction_id:
                return
            if found.batches_written is not None:
                written = found.batches_written
                written[topic_partition] = written.get(topic_partition, 0) + 1

    def batches_written(
        self, producer_id: int, transaction_id: int
    ) -> dict[TopicPartition, int] | None:
        """What the transaction's commit names (None: not known, so not checked)."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is None or found.transaction_id != transaction_id:
                return None
            return None if found.batches_written is None else dict(found.batches_written)

    def forget(self, producer_id: int, transaction_id: int | None = None) -> None:
        """Drop the producer's entry (only if it is ``transaction_id``, when given)."""
        with self._lock:
            found = self._by_producer.get(producer_id)
            if found is not None and transaction_id in (None, found.transaction_id):
                del self._by_producer[producer_id]

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_producer)
