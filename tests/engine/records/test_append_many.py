"""``RecordBatchBuilder.append_many`` writes the same bytes as ``append`` record by record,
and stops at ``size_bytes_max`` without ever leaving a batch empty."""

from __future__ import annotations

import random

import pytest

from twinlog.engine.records.batch_builder import Header, RecordBatchBuilder
from twinlog.engine.records.batch_format import RECORDS_OFFSET, read_header, unpack_header
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.record_decoder import decode_records


def _random_rows(
    generator: random.Random, count: int
) -> tuple[list[bytes | None], list[bytes | None], list[list[Header] | None]]:
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    headers: list[list[Header] | None] = []
    for _ in range(count):
        values.append(
            None
            if generator.random() < 0.1
            else generator.randbytes(generator.choice((0, 5, 300, 20_000)))
        )
        keys.append(
            None if generator.random() < 0.5 else generator.randbytes(generator.randrange(40))
        )
        headers.append(
            None
            if generator.random() < 0.6
            else [
                (f"h{i}", None if i == 2 else generator.randbytes(i * 7))
                for i in range(generator.randrange(4))
            ]
        )
    return values, keys, headers


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_the_same_bytes_as_one_append_per_record(seed: int, compression: str) -> None:
    generator = random.Random(seed)
    values, keys, headers = _random_rows(generator, 200)
    one_by_one = RecordBatchBuilder(compression, producer_id=9, base_sequence=4)
    many = RecordBatchBuilder(compression, producer_id=9, base_sequence=4)
    one_by_one.append(b"first", timestamp_ms=1_000)  # a later timestamp delta, as in use
    many.append(b"first", timestamp_ms=1_000)
    for value, key, header in zip(values, keys, headers, strict=True):
        one_by_one.append(value, key, header, timestamp_ms=1_234)
    assert many.append_many(values, keys, headers, timestamp_ms=1_234) == len(values)
    assert many.build() == one_by_one.build()


def test_keyless_values_alone_match_too() -> None:
    values = [bytes([i]) * i for i in range(50)]
    one_by_one = RecordBatchBuilder("none")
    for value in values:
        one_by_one.append(value, timestamp_ms=7)
    many = RecordBatchBuilder("none")
    assert many.append_many(values, timestamp_ms=7) == 50
    built = many.build()
    assert built == one_by_one.build()
    columns = decode_records(built[RECORDS_OFFSET:], read_header(built))
    assert columns.values == values


def test_it_stops_before_the_record_that_would_pass_the_limit_and_resumes_from_there() -> None:
    values = [b"x" * 1000] * 10
    limit = 3_500
    parts = []
    start = 0
    while start < len(values):
        builder = RecordBatchBuilder("none")
        reached = builder.append_many(values, timestamp_ms=5, start=start, size_bytes_max=limit)
        assert reached > start  # never an empty batch
        assert builder.estimated_size_bytes <= limit
        parts.append(reached - start)
        start = reached
        builder.build()
    assert sum(parts) == 10 and len(parts) == 4  # 3 + 3 + 3 + 1 records of ~1 KiB


def test_an_empty_builder_takes_one_record_larger_than_the_limit() -> None:
    builder = RecordBatchBuilder("none")
    assert builder.append_many([b"y" * 5_000, b"z"], timestamp_ms=5, size_bytes_max=1_000) == 1
    assert len(builder) == 1


def test_a_call_that_adds_no_record_leaves_the_batch_timestamps_alone() -> None:
    """A full batch refuses the next call's first record: the batch's max timestamp stays
    its records' (the Spark writer builds and sends the batch right after)."""
    builder = RecordBatchBuilder("none")
    builder.append(b"a", timestamp_ms=100)
    size_bytes = builder.estimated_size_bytes
    assert builder.append_many([b"x" * 500], timestamp_ms=999, size_bytes_max=size_bytes + 10) == 0
    header = unpack_header(builder.build())
    assert (header.first_timestamp_ms, header.max_timestamp_ms) == (100, 100)


def test_append_value_writes_what_append_writes() -> None:
    values = [b"", b"v", b"w" * 200, b"x" * 20_000]
    one = RecordBatchBuilder("none")
    lean = RecordBatchBuilder("none")
    for index, value in enumerate(values):
        timestamp_ms = 1_000 + index * 300  # deltas of one and of two varint bytes
        assert one.append(value, timestamp_ms=timestamp_ms) == lean.append_value(
            value, timestamp_ms
        )
    assert lean.build() == one.build()


def test_append_value_past_the_varint_table_and_back_in_time() -> None:
    """Offset deltas past 16,383 and a timestamp before the first take encode_varint's
    slow path in append_value; the bytes are still append's."""
    one = RecordBatchBuilder("none")
    lean = RecordBatchBuilder("none")
    for index in range(16_400):
        timestamp_ms = 5_000 - (index % 3)  # deltas 0, -1, -2
        assert one.append(b"v", timestamp_ms=timestamp_ms) == lean.append_value(b"v", timestamp_ms)
    assert lean.estimated_size_bytes == one.estimated_size_bytes
    assert lean.build() == one.build()


def test_append_value_with_repeated_timestamps_writes_what_append_writes() -> None:
    """Records within one millisecond reuse the last timestamp delta's varint; a new
    millisecond, a later one or one going back, is encoded afresh."""
    timestamps_ms = [900, 900, 900, 1_200, 1_200, 800, 800, 900, 70_000, 70_000]
    one = RecordBatchBuilder("none")
    lean = RecordBatchBuilder("none")
    for timestamp_ms in timestamps_ms:
        assert one.append(b"v", timestamp_ms=timestamp_ms) == lean.append_value(b"v", timestamp_ms)
    built = lean.build()
    assert built == one.build()
    assert [record.timestamp_ms for record in RecordBatch(built).records()] == timestamps_ms


def test_append_value_with_repeated_value_sizes_writes_what_append_writes() -> None:
    """Values of the last value's size reuse its length's varint; another size (one or
    two or three varint bytes) is encoded afresh."""
    sizes = [10, 10, 200, 10, 10, 20_000, 20_000, 0, 0, 200]
    one = RecordBatchBuilder("none")
    lean = RecordBatchBuilder("none")
    for index, size in enumerate(sizes):
        value = bytes([index]) * size
        assert one.append(value, timestamp_ms=7) == lean.append_value(value, 7)
    assert lean.estimated_size_bytes == one.estimated_size_bytes
    built = lean.build()
    assert built == one.build()
    assert [len(record.value or b"") for record in RecordBatch(built).records()] == sizes


def test_append_value_after_build_is_refused_within_the_same_millisecond() -> None:
    builder = RecordBatchBuilder("none")
    builder.append_value(b"first", 5)
    builder.build()
    with pytest.raises(RuntimeError, match="built already"):
        builder.append_value(b"second", 5)


def test_the_estimated_size_is_the_built_size_uncompressed() -> None:
    """The producer fills batches by estimated_size_bytes: for "none" it is exact, after
    every kind of append."""
    builder = RecordBatchBuilder("none")
    builder.append(b"a" * 300, key=b"k", headers=[("h", b"1"), ("n", None)], timestamp_ms=7)
    builder.append(None, timestamp_ms=9)
    builder.append_value(b"b" * 20_000, 8)
    builder.append_many([b"c", None, b"d" * 17_000], keys=[None, b"key", None], timestamp_ms=6)
    size_bytes = builder.estimated_size_bytes
    assert len(builder.build()) == size_bytes
