"""Producer generations are Kafka's 16-bit producer epochs: when a transactional id's run
out, it gets a new producer id at generation 0; a generation outside 0..32767 is refused."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from broker_support import batch
from coordinator_support import A0, make

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import (
    InvalidProducerGenerationError,
    UnknownProducerIdError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import (
    ATTRIBUTES_OFFSET,
    CRC_FORMAT,
    CRC_OFFSET,
    PRODUCER_GENERATION_MAX,
)
from twinlog.engine.transactions.coordinator import GENERATION_EXHAUSTED_FROM
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import InitProducer

OLD_PRODUCER_ID = (7 << 8) | 0  # coordinator partition 0
GENERATION = struct.Struct(">h")
GENERATION_OFFSET = struct.calcsize(">qiibIhiqqq")  # after the producer id


def test_kafkas_rule_for_exhausted_epochs() -> None:
    assert PRODUCER_GENERATION_MAX == 32767  # Short.MAX_VALUE
    assert GENERATION_EXHAUSTED_FROM == 32766  # Short.MAX_VALUE - 1 (KIP-360)


def test_an_exhausted_generation_gives_the_transactional_id_a_new_producer_id(
    tmp_path: Path,
) -> None:
    # A producer entry near the limit, as 32k re-initialisations would have left it.
    journal = TxnJournal(tmp_path / "txn" / "0")
    journal.append(InitProducer(1, "app", OLD_PRODUCER_ID, GENERATION_EXHAUSTED_FROM - 1, 60_000))
    journal.close()
    coordinator, applier = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    assert identity == ProducerIdentity(OLD_PRODUCER_ID, GENERATION_EXHAUSTED_FROM)
    last = (identity.producer_id, identity.producer_generation)
    txn_id = coordinator.begin(*last)
    coordinator.add_partitions(txn_id, *last, [A0])

    new = coordinator.init_producer("app", 60_000)
    assert new.producer_id != OLD_PRODUCER_ID and new.producer_generation == 0
    assert applier.calls == [("abort", A0, txn_id)]  # the old id's open transaction ended
    assert coordinator.transactional_id_of(new.producer_id) == "app"
    with pytest.raises(UnknownProducerIdError):  # the old id is fenced: it names nothing now
        coordinator.begin(*last)
    coordinator.begin(new.producer_id, new.producer_generation)
    coordinator.close()

    coordinator, _ = make(tmp_path)  # journaled like any INIT_PRODUCER
    assert coordinator.transactional_id_of(new.producer_id) == "app"
    assert coordinator.transactional_id_of(OLD_PRODUCER_ID) is None
    assert coordinator.init_producer("app", 60_000) == ProducerIdentity(new.producer_id, 1)
    coordinator.close()


@pytest.mark.parametrize("generation", [-2, PRODUCER_GENERATION_MAX + 1, 1 << 31])
def test_a_generation_outside_16_bits_is_refused(tmp_path: Path, generation: int) -> None:
    coordinator, _ = make(tmp_path)
    identity = coordinator.init_producer("app", 60_000)
    with pytest.raises(InvalidProducerGenerationError, match=r"outside 0\.\.32767"):
        coordinator.begin(identity.producer_id, generation)
    coordinator.close()
    builder = RecordBatchBuilder("none", producer_id=1, producer_generation=generation)
    builder.append(b"x")
    with pytest.raises(InvalidProducerGenerationError):
        builder.build()  # the header could not hold it


def test_a_batch_with_a_negative_generation_is_refused_at_the_door(tmp_path: Path) -> None:
    with Broker.open(tmp_path, journal_partitions=1, offsets_partitions=1) as broker:
        broker.create_topic("t")
        identity = broker.init_producer()
        forged = bytearray(batch([b"x"], identity, 0))
        GENERATION.pack_into(forged, GENERATION_OFFSET, -2)  # a hand-built batch: CRC redone
        CRC_FORMAT.pack_into(forged, CRC_OFFSET, crc32c(bytes(forged[ATTRIBUTES_OFFSET:])))
        with pytest.raises(InvalidProducerGenerationError, match="-2"):
            broker.produce("t", 0, bytes(forged))
        assert broker.fetch("t", 0, 0).log_end_offset == 0
