"""The transaction of a request that does not name one: Kafka's protocol.

A Kafka producer's requests carry its producer id and epoch, never a transaction id: its
first AddPartitionsToTxn (or AddOffsetsToTxn) after InitProducerId or EndTxn begins a
transaction implicitly, its transactional batches carry only the transactional bit, and
EndTxn ends "the" transaction. The coordinator knows which transaction each producer
generation has open, so these answers are the engine's, and every front door gets the
same ones:

- ``open_or_begin``: the producer generation's open transaction, begun if it has none;
- ``transaction_of_batch``: the open transaction a transactional batch belongs to. The
  partition's gate knows it once the transaction registered there (``TransactionGate``:
  an entry registered and not frozen is still open, since every end freezes it first);
  only a transaction's first batch on a partition asks the coordinator, wherever it is
  (``TransactionCoordinators.lookup_producer``: in-process, or over the seam on a
  cluster). A batch whose producer has no open transaction is refused, so a late batch
  never joins a transaction begun after its own ended, except in the window Kafka has
  too: a batch delayed past its transaction's end *and* the next one's begin joins that
  next one (KAFKA-17754; KIP-890 closes it by bumping the epoch at every end).

Such a producer numbers its batches per partition for its whole epoch (a transaction's
first batch may carry sequence 120); ``Partition.append_transactional`` checks the first
sequence of each transaction against the sequence after the producer's last batch there,
when the partition knows it (``sequences_per_epoch``; any sequence when it does not, after
a restart or a failover, as Kafka takes a producer it has no state for), and the journal
keeps the producer's own numbers, so a retry is recognised after a restart or a failover
too.

Thread rule: stateless; any thread.
"""

from __future__ import annotations

from collections.abc import Callable

from twinlog.engine.base.errors import InvalidTxnStateError
from twinlog.engine.broker.partition import Partition
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.partition_calls import LookupProducer, TransactionCoordinators


def transaction_of_batch(
    target: Partition, header: BatchHeader, coordinators: TransactionCoordinators
) -> int:
    """The open transaction of the batch's producer generation; InvalidTxnStateError when
    it has none (never begun, ended, or a fenced generation's)."""
    sender = (header.producer_id, header.producer_generation)
    registered = target.transaction_gate.open_transaction_of(sender)
    if registered is not None:
        return registered
    issued = coordinators.lookup_producer(LookupProducer(*sender))
    if issued.ongoing_transaction_id is None:
        raise InvalidTxnStateError(
            f"producer {sender[0]} generation {sender[1]} has no open transaction for this "
            f"transactional batch to {target.name} (begin one first, with AddPartitionsToTxn; "
            "a batch of an ended transaction, or of a fenced generation, is refused)"
        )
    return issued.ongoing_transaction_id


def open_or_begin(
    coordinator: Coordinator,
    producer_id: int,
    producer_generation: int,
    begin: Callable[[int, int], int],
) -> int:
    """The producer generation's open transaction, begun with ``begin`` if it has none.
    Two connections of one producer racing here get the same transaction: the loser's
    begin is refused (one open transaction per producer) and it takes the winner's."""
    found = coordinator.ongoing_transaction_of(producer_id, producer_generation)
    if found is not None:
        return found
    try:
        return begin(producer_id, producer_generation)
    except InvalidTxnStateError:
        found = coordinator.ongoing_transaction_of(producer_id, producer_generation)
        if found is None:
            raise
        return found
