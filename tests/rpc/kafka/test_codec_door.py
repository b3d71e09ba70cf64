"""The Kafka door's codecs, over the raw protocol: a gzip, snappy, lz4 or zstd batch is
stored byte for byte (CRC and all); a damaged section of any codec is refused
CORRUPT_MESSAGE, and a decompression bomb of any codec RECORD_LIST_TOO_LARGE before it is
inflated, holding none of the broker's decompression budget; nothing is written for
either. twinlog's own Producer writes each codec for its Consumer."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_format import (
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORDS_OFFSET,
    pack_header,
    validate_batch,
)
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.records.compression import CODEC_BY_NAME
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings

KAFKA_CODECS = ["gzip", "snappy", "lz4", "zstd"]
LIMIT_BYTES = 4 * MEBIBYTE  # the broker's batch_decompressed_bytes_max here
BOMB_BYTES = 24 * MEBIBYTE
_names = itertools.count()


@dataclass
class SmallServer:
    """A broker with a small decompression limit, behind a Kafka listener (the shape of
    the folder's ``kafka_server``, which this module's fixture replaces)."""

    broker: Broker
    listener: KafkaListener

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{next(_names)}"
        Admin(self.broker).create_topic(name, partitions=1)
        return name


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmallServer]:
    directory: Path = tmp_path_factory.mktemp("codecs")
    broker = Broker.open(
        directory / "data",
        batch_bytes_max=8 * MEBIBYTE,
        batch_decompressed_bytes_max=LIMIT_BYTES,
        decompressed_bytes_in_flight_max=2 * LIMIT_BYTES,
    )
    listener = KafkaListener(
        broker, "127.0.0.1", 0, KafkaListenerSettings(frame_bytes_max=16 << 20)
    )
    listener.start()
    try:
        yield SmallServer(broker, listener)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def _values(codec: str) -> list[bytes]:
    return [f"{codec}-{number}-".encode() * 30 for number in range(40)]


def _kafka_batch(codec: str, values: list[bytes]) -> bytes:
    """A batch as kafka-python's producer builds it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_BY_NAME[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        assert builder.append(offset, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def _produce(raw: Any, topic: str, batch: bytes) -> Any:
    Data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5_000,
        topic_data=[
            Data(name=topic, partition_data=[Data.PartitionProduceData(index=0, records=batch)])
        ],
    )
    return raw.call(request, ProduceResponse, 9).responses[0].partition_responses[0]


@pytest.mark.parametrize("codec", KAFKA_CODECS)
def test_a_batch_is_stored_byte_for_byte(kafka_server: Any, raw: Any, codec: str) -> None:
    topic = kafka_server.topic(f"bytes-{codec}")
    sent = _kafka_batch(codec, _values(codec))
    assert _produce(raw, topic, sent).error_code == 0
    stored = bytes(kafka_server.broker.fetch(topic, 0, 0).records)
    # The log stamps its leader epoch (outside the CRC); the base offset is 0 as sent.
    # Every other byte, the CRC, the attributes and the compressed section, is the client's.
    epoch_end = PARTITION_LEADER_EPOCH_OFFSET + 4
    assert len(stored) == len(sent)
    assert stored[:PARTITION_LEADER_EPOCH_OFFSET] == sent[:PARTITION_LEADER_EPOCH_OFFSET]
    assert stored[epoch_end:] == sent[epoch_end:]
    assert validate_batch(stored).codec == CODEC_BY_NAME[codec]


def _damaged(codec: str) -> bytes:
    """A batch of ``codec`` whose section is garbage under a CRC that matches it."""
    header = validate_batch(_kafka_batch(codec, [b"x" * 200]))
    buffer = bytearray(RECORDS_OFFSET) + bytes(range(7, 47))
    pack_header(
        buffer,
        base_offset=0,
        attributes=header.attributes,
        last_offset_delta=0,
        first_timestamp_ms=header.first_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=-1,
        producer_generation=-1,
        base_sequence=-1,
        record_count=1,
    )
    return bytes(buffer)


@pytest.mark.parametrize("codec", KAFKA_CODECS)
def test_a_damaged_section_of_each_codec_is_refused_and_nothing_written(
    kafka_server: Any, raw: Any, codec: str
) -> None:
    topic = kafka_server.topic(f"damaged-{codec}")
    answer = _produce(raw, topic, _damaged(codec))
    assert answer.error_code == kafka.errors.CorruptRecordError.errno
    message = answer.error_message
    assert message.startswith(codec) and "records section" in message, message
    assert kafka_server.broker.list_offset(topic, 0, "latest") == 0


@pytest.mark.parametrize("codec", KAFKA_CODECS)
def test_a_bomb_of_each_codec_is_refused_before_it_is_inflated(
    kafka_server: Any, raw: Any, codec: str
) -> None:
    """``BOMB_BYTES`` of zeros in one record: refused from what the section declares or
    from a count in small dropped pieces; the budget never holds a byte of it."""
    topic = kafka_server.topic(f"bomb-{codec}")
    bomb = _kafka_batch(codec, [bytes(BOMB_BYTES)])
    assert len(bomb) < BOMB_BYTES // 16
    budget = kafka_server.broker.decompression_budget
    peak_before = budget.peak_reserved_bytes
    answer = _produce(raw, topic, bomb)
    assert answer.error_code == kafka.errors.RecordListTooLargeError.errno
    assert "batch_decompressed_bytes_max" in answer.error_message, answer.error_message
    assert codec in answer.error_message
    assert budget.peak_reserved_bytes == peak_before < BOMB_BYTES
    assert kafka_server.broker.list_offset(topic, 0, "latest") == 0


@pytest.mark.parametrize("codec", ["lz4", "snappy", "gzip"])
def test_twinlogs_producer_writes_each_codec(kafka_server: Any, codec: str) -> None:
    topic = kafka_server.topic(f"own-{codec}")
    broker = kafka_server.broker
    with Producer(broker, compression=codec) as producer:
        for value in _values(codec):
            producer.send(topic, value, partition=0)
    stored = broker.fetch(topic, 0, 0).records
    assert {batch.header.codec for batch in iter_batches(stored)} == {CODEC_BY_NAME[codec]}
    with Consumer(broker) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        found: list[Any] = []
        while len(found) < len(_values(codec)):
            polled = consumer.poll(timeout_ms=500)
            assert polled, "the records never came back"
            found += polled
    assert [record.value for record in found] == _values(codec)
