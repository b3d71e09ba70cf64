"""What the broker refuses at the door of produce: every record of every batch is decoded
before anything is written (plain and transactional), and what one request may cost is
bounded (decompressed bytes, records per batch)."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from batch_support import batch_around as support_batch_around

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidConfigError,
    InvalidRecordError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch, encode_record
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.records.compression import CODEC_NONE, CODEC_ZSTD


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        opened.create_topic("orders", partitions=2)
        opened.create_topic("latest", partitions=1, config={"cleanup.policy": "compact"})
        yield opened


def batch_around(
    section: bytes,
    record_count: int,
    last_offset_delta: int,
    codec: int = CODEC_NONE,
    *,
    producer_id: int = -1,
    producer_generation: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch with a valid CRC around any records section, as a hostile client sends."""
    return support_batch_around(
        section,
        record_count,
        last_offset_delta=last_offset_delta,
        codec=codec,
        timestamp_ms=1_700_000_000_000,
        producer_id=producer_id,
        producer_generation=producer_generation,
        transactional=transactional,
    )


def records(*deltas: int) -> bytes:
    return b"".join(encode_record(delta, 0, b"k", b"v", None) for delta in deltas)


BAD_SECTIONS = [
    pytest.param(records(0, 0, 0), 3, "record 1 has offset delta 0, expected 1..2", id="repeat"),
    pytest.param(records(2, 1, 0), 3, "record 1 has offset delta 1, expected 3..2", id="back"),
    pytest.param(records(0, 2, 1), 3, "record 2 has offset delta 1, expected 3..2", id="swap"),
    pytest.param(records(0), 3, "record 1 runs past the end", id="count-too-high"),
    pytest.param(records(0, 1, 2) + b"\x02", 3, "1 bytes left after its 3", id="trailing"),
    pytest.param(b"\x00" * 30, 3, "record 0 says 0 bytes", id="garbage"),
    pytest.param(
        records(0, 1) + encode_record(2, 0, b"k", b"v", [("ok", b"1")]).replace(b"ok", b"\xff\xfe"),
        3,
        "record 2 has a header key that is not UTF-8",
        id="header-key",
    ),
]


@pytest.mark.parametrize(("section", "count", "problem"), BAD_SECTIONS)
@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_ZSTD], ids=["none", "zstd"])
def test_a_plain_batch_with_bad_records_is_refused_naming_topic_partition_and_record(
    broker: Broker, section: bytes, count: int, problem: str, codec: int
) -> None:
    batch = batch_around(section, count, count - 1, codec)
    with pytest.raises(InvalidRecordError, match=problem) as refused:
        broker.produce("orders", 1, batch)
    error = refused.value
    assert (error.topic, error.partition) == ("orders", 1)
    assert error.record_index is not None
    assert "orders-1" in str(error) and not error.retriable
    assert broker.fetch("orders", 1, 0).log_end_offset == 0  # nothing was written


def test_a_transactional_batch_with_bad_records_is_refused_before_the_journal(
    broker: Broker,
) -> None:
    identity = broker.init_producer("txn-1")
    transaction_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    broker.add_partitions_to_transaction(
        transaction_id,
        identity.producer_id,
        identity.producer_generation,
        [("orders", 0)],  # type: ignore[list-item]
    )
    batch = batch_around(
        records(0, 0),
        2,
        1,
        producer_id=identity.producer_id,
        producer_generation=identity.producer_generation,
        transactional=True,
    )
    with pytest.raises(InvalidRecordError, match=r"orders-0.*record 1 has offset delta 0"):
        broker.produce("orders", 0, batch, transaction_id=transaction_id)
    assert broker.partition(TopicPartition("orders", 0)).journaled_entries(transaction_id) == 0


def test_good_batches_still_pass_and_read_back(broker: Broker) -> None:
    for codec in ("none", "zstd"):
        broker.produce("orders", 0, build_batch([b"a", b"b", b"c"], codec))
    result = broker.fetch("orders", 0, 0)
    offsets = [r.offset for b in iter_batches(result.records) for r in b.records()]
    assert offsets == [0, 1, 2, 3, 4, 5]


# --- a batch's size: its topic's limit ---------------------------------------------------

KIB = 1024


def _transactional(broker: Broker, topic: str, value: bytes) -> tuple[ProducerIdentity, int, bytes]:
    """A producer of ``topic``, its open transaction and a batch of ``value`` in it."""
    identity = broker.init_producer(f"txn-{topic}")
    transaction_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    batch = build_batch(
        [value],
        "none",
        producer_id=identity.producer_id,
        producer_generation=identity.producer_generation,
        base_sequence=0,
        transactional=True,
    )
    return identity, transaction_id, batch


def test_a_batch_is_held_to_its_topics_limit_plain_or_transactional(tmp_path: Path) -> None:
    """The broker's batch_bytes_max is the default; a topic's max.message.bytes, larger or
    smaller, is the limit its batches are held to, before anything is journaled or written."""
    with Broker.open(tmp_path / "data", batch_bytes_max=64 * KIB) as broker:
        broker.create_topic("default")
        broker.create_topic("large", config={"max.message.bytes": str(256 * KIB)})
        broker.create_topic("small", config={"max.message.bytes": str(16 * KIB)})
        over_default = build_batch([bytes(100 * KIB)], "none")
        with pytest.raises(BatchTooLargeError) as refused:
            broker.produce("default", 0, over_default)
        message = str(refused.value)
        assert f"a batch of {len(over_default)} bytes for default-0" in message
        assert f"its topic's limit of {64 * KIB} bytes" in message
        for setting in ("max.message.bytes", "broker's batch_bytes_max", "max.request.size"):
            assert setting in message
        assert broker.fetch("default", 0, 0).log_end_offset == 0
        # A topic that allows more takes the batch: plain, and journaled then copied.
        assert broker.produce("large", 0, over_default).base_offset == 0
        identity, transaction_id, batch = _transactional(broker, "large", bytes(100 * KIB))
        broker.produce("large", 0, batch, transaction_id=transaction_id)
        broker.commit_transaction(
            transaction_id, identity.producer_id, identity.producer_generation, True
        )
        assert broker.fetch("large", 0, 0).log_end_offset == 2
        # One that allows less refuses a batch the broker's default would take.
        small = build_batch([bytes(20 * KIB)], "none")
        with pytest.raises(
            BatchTooLargeError, match=f"small-0 is over its topic's limit of {16 * KIB}"
        ):
            broker.produce("small", 0, small)
        identity, transaction_id, batch = _transactional(broker, "small", bytes(20 * KIB))
        with pytest.raises(
            BatchTooLargeError, match=f"small-0 is over its topic's limit of {16 * KIB}"
        ):
            broker.produce("small", 0, batch, transaction_id=transaction_id)
        assert broker.partition(TopicPartition("small", 0)).journaled_entries(transaction_id) == 0
        assert broker.fetch("small", 0, 0).log_end_offset == 0


# --- bounded cost -------------------------------------------------------------------------


def zstd_bomb(size_bytes: int) -> bytes:
    """A few KiB of zstd that declare and hold ``size_bytes`` of zeros."""
    section = zstandard.ZstdCompressor(level=19, write_content_size=True).compress(
        bytes(size_bytes)
    )
    return support_batch_around(section, 1, codec=CODEC_ZSTD, section_is_compressed=True)


@pytest.mark.parametrize("topic", ["latest", "orders"])
def test_a_zstd_bomb_is_refused_without_allocating_what_it_declares(
    broker: Broker, topic: str
) -> None:
    bomb = zstd_bomb(256 * MEBIBYTE)
    assert len(bomb) < 16 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(BatchTooLargeError, match="batch_decompressed_bytes_max"):
            broker.produce(topic, 0, bomb)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 4 * MEBIBYTE


def test_a_frame_that_holds_more_than_it_declares_is_refused_after_one_piece(
    broker: Broker,
) -> None:
    # The frame header says 100 bytes; the blocks hold 64 MiB of zeros.
    honest = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(
        bytes(64 * MEBIBYTE)
    )
    lying = bytearray(honest)
    assert lying[4] & 0xE0 == 0  # no content size, not single segment: a window byte follows
    lying[4] |= 0x20  # single segment: the next byte is now a one-byte content size
    lying[5] = 100
    batch = support_batch_around(bytes(lying), 1, codec=CODEC_ZSTD, section_is_compressed=True)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptBatchError):
            broker.produce("orders", 0, bytes(batch))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 8 * MEBIBYTE


def test_many_records_in_a_tiny_batch_are_refused_by_count(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", batch_records_max=1000) as broker:
        broker.create_topic("orders")
        broker.produce("orders", 0, build_batch([b""] * 1000, "zstd"))
        with pytest.raises(BatchTooLargeError, match=r"1001 records.*batch_records_max \(1000\)"):
            broker.produce("orders", 0, build_batch([b""] * 1001, "zstd"))


def test_the_default_records_limit_refuses_two_million_records(broker: Broker) -> None:
    # 2,000,000 empty records: ~1 KiB compressed, 14 MB decompressed.
    section = b"".join(
        encode_record(delta, 0, None, b"", None) for delta in range(0, 2_000_000, 100_000)
    )
    batch = batch_around(section, 2_000_000, 1_999_999, CODEC_ZSTD)
    with pytest.raises(BatchTooLargeError, match="2000000 records"):
        broker.produce("orders", 0, batch)


def test_decompression_in_flight_is_bounded_across_requests(tmp_path: Path) -> None:
    # Four threads each send a batch that declares 3 MiB; the budget holds 4 MiB, so they
    # take turns (none fails: the wait is short) and no two are decompressed at once.
    values = [bytes(1024)] * (3 * 1024)
    batch = build_batch(values, "zstd")
    with Broker.open(
        tmp_path / "data",
        batch_decompressed_bytes_max=4 * MEBIBYTE,
        decompressed_bytes_in_flight_max=4 * MEBIBYTE,
    ) as broker:
        broker.create_topic("orders")
        errors: list[BaseException] = []

        def send() -> None:
            try:
                broker.produce("orders", 0, batch)
            except BaseException as error:  # collected for the assertion below
                errors.append(error)

        threads = [threading.Thread(target=send) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert broker.fetch("orders", 0, 0).log_end_offset == 4 * len(values)


def test_limits_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="batch_records_max"):
        Broker.open(tmp_path / "a", batch_records_max=0)
    with pytest.raises(
        InvalidConfigError, match=r"batch_bytes_max \(message.max.bytes\) is 1073741825"
    ):
        Broker.open(tmp_path / "c", batch_bytes_max=(1 << 30) + 1)  # a topic's could not be
    with pytest.raises(InvalidConfigError, match="decompressed_bytes_in_flight_max"):
        Broker.open(
            tmp_path / "b",
            batch_decompressed_bytes_max=64 * MEBIBYTE,
            decompressed_bytes_in_flight_max=32 * MEBIBYTE,
        )
