"""The idempotence table is rebuilt from CRC-checked batches only.

After a crash (no producer-state snapshot) the broker rebuilds each
partition's producer sequences from the data log. A flipped bit in a batch's
sequence number must be caught there, as recovery and reads catch it, and never
make the producer's next batches look like duplicates (acknowledged, not stored).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    CorruptJournalError,
    CorruptLogError,
    OutOfOrderSequenceError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_format import read_header
from twinlog.engine.records.batch_reader import iter_batches

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}
BATCHES = 3
RECORDS_PER_BATCH = 3


def _base_sequence_position() -> int:
    """Where base_sequence lies in a header: found from a batch, so the layout is not repeated."""
    marker = 0x5A5A5A5A
    sample = batch([b"x"], ProducerIdentity(7, 0), marker)
    assert read_header(sample).base_sequence == marker
    return sample.index(struct.pack(">i", marker))


def _write(directory: Path) -> ProducerIdentity:
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("t", partitions=1)
        producer = broker.init_producer()
        for number in range(BATCHES):
            sequence = number * RECORDS_PER_BATCH
            values = [f"v{sequence + n}".encode() for n in range(RECORDS_PER_BATCH)]
            broker.produce("t", 0, batch(values, producer, sequence))
    # What a SIGKILL before the first snapshot leaves: no snapshot of the producer table
    # (close writes one), every batch fsynced before the recovery point.
    snapshots = list((directory / "logs" / "t-0").glob("producer-state-*.json"))
    assert len(snapshots) == 1, snapshots
    snapshots[0].unlink()
    return producer


def _flip_sequence_bit(directory: Path, batch_number: int) -> Path:
    segment = directory / "logs" / "t-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    position = 0
    for _ in range(batch_number):
        position += read_header(data, position).size_bytes
    before = read_header(data, position).base_sequence
    data[position + _base_sequence_position() + 3] ^= 0x08
    assert read_header(data, position).base_sequence == before + 8
    segment.write_bytes(bytes(data))
    return segment


def _values(broker: Broker) -> list[bytes | None]:
    fetched = broker.fetch("t", 0, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


@pytest.mark.parametrize("batch_number", [BATCHES - 1, 0], ids=["last-batch", "first-batch"])
def test_a_flipped_sequence_bit_is_refused_not_used(tmp_path: Path, batch_number: int) -> None:
    directory = tmp_path / "data"
    producer = _write(directory)
    segment = _flip_sequence_bit(directory, batch_number)
    # Before the recovery point those bytes were fsynced and acknowledged: damage, not a
    # torn tail. Open says so, naming the file, instead of trusting the sequence.
    with pytest.raises(CorruptLogError) as caught:
        Broker.open(directory, **CONFIG)
    assert caught.value.path == str(segment)
    assert str(segment) in str(caught.value)
    if batch_number != BATCHES - 1:
        return
    # The operator accepts the loss (as the recovery point's own message says): the
    # damaged last batch is then a torn tail, cut by recovery. The producer's next
    # batch is not acknowledged as a duplicate: it learns of the gap, reinitialises,
    # and what it sends is stored.
    (directory / "logs" / "t-0" / "recovery-point").unlink()
    with Broker.open(directory, **CONFIG) as broker:
        stored = (BATCHES - 1) * RECORDS_PER_BATCH
        assert broker.list_offset("t", 0, "latest") == stored
        next_sequence = BATCHES * RECORDS_PER_BATCH
        with pytest.raises(OutOfOrderSequenceError):
            broker.produce("t", 0, batch([b"next"], producer, next_sequence))
        again = broker.init_producer()
        result = broker.produce("t", 0, batch([b"after-0", b"after-1"], again, 0))
        assert (result.base_offset, result.duplicate) == (stored, False)
        assert _values(broker)[-2:] == [b"after-0", b"after-1"]


def test_next_sends_are_stored_after_a_crash_without_damage(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    producer = _write(directory)
    with Broker.open(directory, **CONFIG) as broker:
        next_sequence = BATCHES * RECORDS_PER_BATCH
        result = broker.produce("t", 0, batch([b"next"], producer, next_sequence))
        assert (result.base_offset, result.duplicate) == (next_sequence, False)
        assert _values(broker)[-1] == b"next"


@pytest.mark.parametrize("entry_batches", ["journal_log", "lmdb"])
def test_a_flipped_sequence_bit_in_the_journal_is_refused_not_used(
    tmp_path: Path, entry_batches: str
) -> None:
    # An open transaction's sequences are rebuilt from the local data journal after a
    # restart: the batch CRC must guard them, in the journal log (LMDB naming the record)
    # or in LMDB (no checksums of its own) when it keeps the batch too.
    directory = tmp_path / "data"
    config = {**CONFIG, "journal_entry_batches": entry_batches}
    marker = b"journaled-value-" * 4
    with Broker.open(directory, **config) as broker:
        broker.create_topic("t", partitions=1)
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        sent = batch([marker], producer, 0, transaction_id, codec="none")
        broker.produce("t", 0, sent)
    if entry_batches == "lmdb":
        damaged = directory / "journal" / "data.mdb"
    else:
        (damaged,) = (directory / "logs" / "t-0" / "journal").glob("*.log")
    data = bytearray(damaged.read_bytes())
    position = data.index(sent[8:]) - 8  # the batch is kept whole
    assert data[position : position + len(sent)][8:] == sent[8:]
    data[position + _base_sequence_position() + 3] ^= 0x08
    damaged.write_bytes(bytes(data))
    with Broker.open(directory, **config) as broker:
        following = batch([b"second"], producer, 1, transaction_id, codec="none")
        with pytest.raises(CorruptJournalError) as caught:
            broker.produce("t", 0, following)
        named = directory / "journal" if entry_batches == "lmdb" else damaged
        assert str(named) in str(caught.value)
