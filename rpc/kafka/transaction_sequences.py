"""Sequence numbers of transactional batches, from Kafka's counting to twinlog's.

A Kafka producer numbers its batches per partition for as long as its epoch lasts: the
first batch of its third transaction on a partition may carry sequence 120. twinlog's
broker checks a transactional batch's sequence within its transaction, from 0 on each
partition (the journal keeps each transaction apart). So the first sequence this
listener sees of a transaction on a partition becomes 0, and every later batch of that
transaction there is numbered from it: retries, duplicates and gaps keep their meaning,
since the broker sees the same differences the producer sent. The batch's CRC is checked
before its header is rewritten.
"""

from __future__ import annotations

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TRANSACTION_ID,
    RECORDS_OFFSET,
    compute_crc,
    unpack_header,
)
from twinlog.rpc.kafka.batch_recompression import repacked
from twinlog.rpc.kafka.open_transactions import OpenTransactions


def in_transaction_terms(
    batch: bytes, topic: str, partition: int, transactions: OpenTransactions
) -> tuple[bytes, int]:
    """The batch as the broker checks it, and the transaction it belongs to
    (NO_TRANSACTION_ID: not transactional, or no transaction begun here: the broker
    decides)."""
    if len(batch) < RECORDS_OFFSET:
        return batch, NO_TRANSACTION_ID
    header = unpack_header(batch)
    if not header.is_transactional or header.producer_id == NO_PRODUCER_ID:
        return batch, NO_TRANSACTION_ID
    transaction_id = transactions.current(header.producer_id, header.producer_generation)
    if transaction_id is None or header.base_sequence == NO_SEQUENCE:
        return batch, NO_TRANSACTION_ID
    first = transactions.first_sequence(
        header.producer_id, transaction_id, topic, partition, header.base_sequence
    )
    if first == 0 or header.base_sequence < first:
        return batch, transaction_id  # already twinlog's numbering, or stale: the broker judges
    if header.size_bytes != len(batch):
        return batch, transaction_id  # the broker refuses it, naming the lengths
    crc = compute_crc(batch, 0, header.batch_length)
    if crc != header.crc:
        raise CorruptBatchError(
            f"batch CRC-32C mismatch: header says 0x{header.crc:08x}, bytes give 0x{crc:08x}"
        )
    section = memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
    return repacked(header, section, base_sequence=header.base_sequence - first), transaction_id
