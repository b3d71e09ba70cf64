"""The read path's fast decoding (arrow_records, arrow_slices, sections) against the engine's
decoder, and the builder that chooses between them: no SparkSession."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pyarrow
import pytest
from batch_support import batch_around
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.connectors.spark.arrow_records import arrays_of_sections, decode_sections
from twinlog.connectors.spark.record_columns import ColumnBuilder
from twinlog.connectors.spark.schema import arrow_schema, source_schema
from twinlog.connectors.spark.sections import records_section
from twinlog.engine.base.errors import CorruptBatchError, InvalidRecordError
from twinlog.engine.records import column_buffers
from twinlog.engine.records.batch_builder import RecordBatchBuilder, encode_record
from twinlog.engine.records.batch_format import read_header
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.compression import CODEC_NONE, CODEC_ZSTD, compress
from twinlog.engine.records.record_decoder import decode_records
from twinlog.engine.records.rewrite import records_section as engine_records_section

TWO_BYTE_VARINT = range(-8192, 8192)  # zig-zag values that take one or two bytes
BASE_TIMESTAMP_MS = 1_700_000_000_000

# One record: key, value, headers, offset gap before it (compaction), timestamp delta.
record_strategy = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300) | st.binary(min_size=8200, max_size=8300),
    st.just([]) | st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4))),
    st.sampled_from([0, 0, 0, 1, 70, 9000]),
    st.integers(-9000, 9000),
)
batches_strategy = st.lists(
    st.tuples(st.lists(record_strategy, min_size=1, max_size=12), st.integers(0, 5)),
    min_size=1,
    max_size=4,
)
# What the fast path must take: no headers, every varint of one or two bytes.
common_record_strategy = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=100) | st.binary(min_size=64, max_size=8000),
    st.just([]),
    st.sampled_from([0, 0, 0, 1, 70, 3000]),
    st.integers(-8192, 8191),
)
common_batches_strategy = st.lists(
    st.tuples(st.lists(common_record_strategy, min_size=1, max_size=12), st.integers(0, 5)),
    min_size=1,
    max_size=4,
)


def sections_of(
    batches: list[tuple[list[Any], int]],
) -> list[tuple[Any, bytes]]:
    """(header, records section) of each batch, base offsets climbing with gaps between."""
    made = []
    base_offset = 3
    for records, gap_after in batches:
        delta = -1
        parts = []
        for key, value, headers, gap, timestamp_delta_ms in records:
            delta += 1 + gap
            parts.append(encode_record(delta, timestamp_delta_ms, key, value, headers))
        section = b"".join(parts)
        header = read_header(
            batch_around(
                section,
                len(records),
                last_offset_delta=delta,
                base_offset=base_offset,
                timestamp_ms=BASE_TIMESTAMP_MS,
            )
        )
        made.append((header, section))
        base_offset = header.next_offset + gap_after
    return made


def joined(sections: list[tuple[Any, bytes]]) -> tuple[bytes, list[tuple[Any, int, int]]]:
    positions = []
    position = 0
    for header, section in sections:
        positions.append((header, position, position + len(section)))
        position += len(section)
    return b"".join(section for _, section in sections), positions


def common_shape(batches: list[tuple[list[Any], int]]) -> bool:
    """Every varint of one or two bytes and no headers: what the fast path must take."""
    for records, _ in batches:
        delta = -1
        for key, value, headers, gap, timestamp_delta_ms in records:
            delta += 1 + gap
            size = len(encode_record(delta, timestamp_delta_ms, key, value, headers))
            if headers or size > 8193 or delta not in TWO_BYTE_VARINT:
                return False
            if timestamp_delta_ms not in TWO_BYTE_VARINT:
                return False
    return True


@settings(max_examples=100, deadline=None)
@given(batches=common_batches_strategy | batches_strategy)
def test_fast_path_gives_what_decode_records_gives(batches: list[tuple[list[Any], int]]) -> None:
    # The fast path takes exactly the common shape (common_shape, worked out record by
    # record: gaps can push a common-looking batch's offset deltas past two bytes).
    sections = sections_of(batches)
    expected_keys: list[bytes | None] = []
    expected_values: list[bytes | None] = []
    expected_offsets: list[int] = []
    expected_timestamps_ms: list[int] = []
    for header, section in sections:
        expected = decode_records(section, header)
        expected_keys += expected.keys
        expected_values += expected.values
        expected_offsets += expected.offsets
        expected_timestamps_ms += expected.timestamps_ms
    decoded = decode_sections(*joined(sections))
    if common_shape(batches):
        assert decoded is not None
    else:
        assert decoded is None  # headers or a long varint: the engine's decoder decodes it
        return
    assert decoded.keys.to_pylist() == expected_keys
    assert decoded.values.to_pylist() == expected_values
    assert decoded.offsets.to_pylist() == expected_offsets
    assert decoded.timestamps_ms.to_pylist() == expected_timestamps_ms
    decoded.keys.validate(full=True)
    decoded.values.validate(full=True)


@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.lists(
                st.tuples(
                    st.none() | st.binary(max_size=8),
                    st.none() | st.binary(max_size=200),
                    st.just([]),
                    st.sampled_from([0, 0, 2]),
                    st.integers(-100, 100),
                ),
                min_size=1,
                max_size=5,
            ),
            st.just(0),
        ),
        min_size=1,
        max_size=3,
    ),
    damage=st.data(),
)
def test_fast_path_declines_what_decode_records_refuses(
    batches: list[tuple[list[Any], int]], damage: st.DataObject
) -> None:
    sections = sections_of(batches)
    victim = damage.draw(st.integers(0, len(sections) - 1))
    header, section = sections[victim]
    damaged = bytearray(section)
    for _ in range(damage.draw(st.integers(1, 2))):
        spot = damage.draw(st.integers(0, len(damaged)))
        kind = damage.draw(st.sampled_from(["byte", "cut", "insert", "count"]))
        if kind == "byte" and spot < len(damaged):
            damaged[spot] = damage.draw(st.integers(0, 255))
        elif kind == "cut":
            del damaged[spot:]
        elif kind == "insert":
            damaged[spot:spot] = damage.draw(st.binary(min_size=1, max_size=3))
        elif kind == "count":
            header = header._replace(record_count=damage.draw(st.integers(0, 6)))
    sections[victim] = (header, bytes(damaged))
    try:
        for each_header, each_section in sections:
            decode_records(each_section, each_header)
        refused = False
    except CorruptBatchError:
        refused = True
    decoded = decode_sections(*joined(sections))
    if refused:
        assert decoded is None
    elif decoded is not None:
        expected = [
            offset
            for each_header, each_section in sections
            for offset in decode_records(each_section, each_header).offsets
        ]
        assert decoded.offsets.to_pylist() == expected


@settings(max_examples=100, deadline=None)
@given(batches=common_batches_strategy | batches_strategy)
def test_compiled_walk_gives_what_decode_records_gives(
    batches: list[tuple[list[Any], int]],
) -> None:
    """The compiled walk takes every header-less shape (any varint width), as valid Arrow
    arrays sharing the walk's buffers; where the Arrow compute path takes them too, the
    two give the same arrays."""
    sections = sections_of(batches)
    decoded = arrays_of_sections(sections)
    has_headers = any(headers for records, _ in batches for _, _, headers, _, _ in records)
    if has_headers:
        assert decoded is None
        return
    assert decoded is not None
    for array in (decoded.keys, decoded.values, decoded.offsets, decoded.timestamps_ms):
        array.validate(full=True)
    expected = [decode_records(section, header) for header, section in sections]
    assert decoded.keys.to_pylist() == [k for e in expected for k in e.keys]
    assert decoded.values.to_pylist() == [v for e in expected for v in e.values]
    assert decoded.offsets.to_pylist() == [o for e in expected for o in e.offsets]
    assert decoded.timestamps_ms.to_pylist() == [t for e in expected for t in e.timestamps_ms]
    computed = decode_sections(*joined(sections))
    if computed is not None:
        assert computed == decoded


# --- the builder: fast and engine paths mixed, as a read meets them ------------------------


@contextmanager
def walk(compiled: bool) -> Iterator[None]:
    """The builder's whole batches through the compiled walk, or Arrow compute (as without
    the extension)."""
    assert column_buffers.COMPILED, "the install builds the compiled record decoder"
    with mock.patch.object(column_buffers, "COMPILED", compiled):
        yield


@st.composite
def stored_batches(draw: st.DrawFn) -> list[RecordBatch]:
    """Batches as a log holds them: zstd or not, transactional or not, some compacted
    (offset gaps), some with headers, one after another."""
    made: list[RecordBatch] = []
    base_offset = draw(st.integers(0, 5))
    for records, _ in draw(batches_strategy):
        transactional = draw(st.booleans())
        codec = draw(st.sampled_from([CODEC_NONE, CODEC_ZSTD]))
        if draw(st.booleans()):  # as a producer builds it: no gaps
            builder = RecordBatchBuilder(
                "zstd" if codec == CODEC_ZSTD else "none",
                producer_id=7 if transactional else -1,
                producer_generation=0 if transactional else -1,
                base_sequence=0 if transactional else -1,
                transactional=transactional,
            )
            for key, value, headers, _, timestamp_delta_ms in records:
                builder.append(
                    value,
                    key=key,
                    headers=headers,
                    timestamp_ms=BASE_TIMESTAMP_MS + abs(timestamp_delta_ms),
                )
            built = bytearray(builder.build())
            built[0:8] = base_offset.to_bytes(8, "big")  # outside the CRC, as the log writes
            batch = RecordBatch(bytes(built))
        else:
            header, section = sections_of([(records, 0)])[0]
            batch = RecordBatch(
                batch_around(
                    section,
                    len(records),
                    last_offset_delta=header.last_offset_delta,
                    codec=codec,
                    base_offset=base_offset,
                    timestamp_ms=BASE_TIMESTAMP_MS,
                    producer_id=7 if transactional else -1,
                    producer_generation=0 if transactional else -1,
                    transactional=transactional,
                )
            )
        made.append(batch)
        base_offset = batch.header.next_offset + draw(st.integers(0, 3))
    return made


@settings(max_examples=150, deadline=None)
@given(
    batches=stored_batches(), include_headers=st.booleans(), cut=st.data(), compiled=st.booleans()
)
def test_builder_reads_many_batches_as_the_engine_does(
    batches: list[RecordBatch], include_headers: bool, cut: st.DataObject, compiled: bool
) -> None:
    first, end = batches[0].header.base_offset, batches[-1].header.next_offset
    low = cut.draw(st.integers(first, end - 1))
    high = cut.draw(st.integers(low + 1, end))
    flush_after = cut.draw(st.sets(st.integers(0, len(batches) - 1)))
    schema = arrow_schema(source_schema(include_headers))
    builder = ColumnBuilder("t", 1, low, high, schema, include_headers)
    flushed = []
    with walk(compiled):
        for index, batch in enumerate(batches):
            builder.add_batch(batch.header, batch.buffer)
            if index in flush_after:
                flushed.append(builder.flush())
        flushed.append(builder.flush())
    for arrow_batch in flushed:
        assert arrow_batch.schema.equals(schema)
        arrow_batch.validate(full=True)
    rows = pyarrow.Table.from_batches(flushed, schema=schema).to_pylist()
    expected = [
        record for batch in batches for record in batch.records() if low <= record.offset < high
    ]
    assert [row["offset"] for row in rows] == [record.offset for record in expected]
    for row, record in zip(rows, expected, strict=True):
        assert (row["key"], row["value"]) == (record.key, record.value)
        assert round(row["timestamp"].timestamp() * 1000) == record.timestamp_ms
        assert (row["topic"], row["partition"], row["timestampType"]) == ("t", 1, 0)
        if include_headers:
            assert [(h["key"], h["value"]) for h in row["headers"]] == list(record.headers)
        else:
            assert "headers" not in row


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled-walk", "arrow-compute"])
def test_builder_names_the_batch_a_flush_refuses(compiled: bool) -> None:
    good = encode_record(0, 0, b"k", b"v", [])
    bad = bytearray(encode_record(1, 0, b"k", b"v", []))
    bad[-1] = 5  # a header count of -3
    batch = RecordBatch(batch_around(good + bytes(bad), 2, base_offset=40, codec=CODEC_ZSTD))
    builder = ColumnBuilder("t", 1, 0, 100, arrow_schema(source_schema(False)), False)
    with walk(compiled):
        builder.add_batch(batch.header, batch.buffer)  # whole batches are decoded at flush
        with pytest.raises(
            InvalidRecordError, match=r"t-1: the batch at offset 40 .*seek to 42 to skip"
        ):
            builder.flush()
        assert len(builder) == 0
        assert builder.flush().num_rows == 0


# --- sections: one zstd call, the engine's refusals -------------------------------------------


def test_records_section_is_the_engines() -> None:
    section = b"".join(encode_record(d, 0, None, b"%d" % d * 50, []) for d in range(20))
    for codec in (CODEC_NONE, CODEC_ZSTD):
        batch = batch_around(section, 20, codec=codec)
        header = read_header(batch)
        assert bytes(records_section(header, batch)) == section
        assert bytes(engine_records_section(batch, header)) == section


@pytest.mark.parametrize(
    "compressed",
    [
        compress(CODEC_ZSTD, b"abc" * 100) + b"trailing",  # data after the frame
        compress(CODEC_ZSTD, b"abc" * 100) * 2,  # a second frame
        compress(CODEC_ZSTD, b"abc" * 100)[:-4],  # a cut frame
    ],
)
def test_records_section_refuses_what_the_engine_refuses_in_its_words(compressed: bytes) -> None:
    batch = batch_around(compressed, 1, codec=CODEC_ZSTD, section_is_compressed=True)
    header = read_header(batch)
    with pytest.raises(CorruptBatchError) as engine_error:
        engine_records_section(batch, header)
    with pytest.raises(CorruptBatchError) as error:
        records_section(header, batch)
    assert str(error.value) == str(engine_error.value)
