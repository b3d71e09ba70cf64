"""The one record decoder: what it decodes, what it refuses (and how it says so), and that
``RecordBatch.records()`` and compaction's spans are both exactly its answer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_sections import (
    DAMAGED,
    FIRST_TIMESTAMP_MS,
    batch_of,
    damaged_sections,
    header_of,
)

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_builder import RecordBatchBuilder, encode_record
from twinlog.engine.records.batch_format import (
    validate_batch,
)
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.record_decoder import RECORD_BYTES_MIN, decode_records
from twinlog.engine.records.rewrite import iter_record_spans, records_section, require_keys

# --- what it decodes ------------------------------------------------------------------


def test_pinned_records_decode_into_columns() -> None:
    # The two records of docs/formats.md's worked example (record bytes 67..91).
    section = bytes.fromhex("1a 00 00 00 04 6b31 0a 68656c6c6f 00 14 00 0a 02 01 01 02 0268 0276")
    columns = decode_records(section, header_of(2, 1))
    assert columns.starts() == [0, 14]
    assert columns.ends == [14, len(section)]
    assert columns.offsets == [100, 101]
    assert columns.timestamps_ms == [FIRST_TIMESTAMP_MS, FIRST_TIMESTAMP_MS + 5]
    assert columns.keys == [b"k1", None]
    assert columns.values == [b"hello", None]
    assert columns.headers == [(), (("h", b"v"),)]
    assert len(columns) == 2


@pytest.mark.parametrize(
    "value_bytes", [0, 63, 64, 8191, 8192, 1 << 20], ids=["0", "63", "64", "8191", "8192", "1MiB"]
)
def test_every_varint_width_decodes(value_bytes: int) -> None:
    # One-, two- and three-byte lengths, and (with 9000 records) offset deltas of 1..3 bytes
    # and timestamp deltas beyond the two-byte inline path.
    builder = RecordBatchBuilder("none")
    count = 3 if value_bytes > 8192 else 9000
    for index in range(count):
        builder.append(b"v" * value_bytes, key=b"k", timestamp_ms=FIRST_TIMESTAMP_MS + index * 7)
    batch = RecordBatch(builder.build())
    columns = decode_records(records_section(batch.buffer, batch.header), batch.header)
    assert columns.offsets == list(range(count))
    assert columns.timestamps_ms == [FIRST_TIMESTAMP_MS + index * 7 for index in range(count)]
    assert set(columns.values) == {b"v" * value_bytes}


def test_columns_append_to_what_they_hold() -> None:
    record = encode_record(0, 0, b"k", b"v", None)
    header = header_of(1, 0)
    columns = decode_records(record, header)
    assert decode_records(memoryview(record), header, columns) is columns
    assert columns.values == [b"v", b"v"]
    assert all(type(value) is bytes for value in columns.values)  # never a memoryview
    columns.truncate(1)
    assert (columns.ends, columns.offsets, columns.keys) == ([len(record)], [100], [b"k"])


# --- what it refuses --------------------------------------------------------------------


# Each names the record and a byte of the records section.
@pytest.mark.parametrize(("section", "record_count", "last_offset_delta", "message"), DAMAGED)
def test_damaged_records_name_the_record_and_the_byte(
    section: bytes, record_count: int, last_offset_delta: int, message: str
) -> None:
    batch = batch_of(section, record_count, last_offset_delta)
    header = validate_batch(batch)
    for decode in (
        lambda: decode_records(section, header),
        lambda: list(RecordBatch(batch).records()),
        lambda: list(iter_record_spans(records_section(batch, header), header)),
        lambda: require_keys(batch, header, "topic t"),
    ):
        with pytest.raises(CorruptBatchError) as caught:
            decode()
        text = str(caught.value)
        assert message in text
        assert re.search(r"\brecord \d+\b", text), text
        assert re.search(r"\bbyte \d+\b", text), text
        assert "batch at offset 100" in text


def test_the_smallest_record_is_six_bytes() -> None:
    smallest = encode_record(0, 0, None, None, None)
    assert len(smallest) == 1 + RECORD_BYTES_MIN
    assert decode_records(smallest, header_of(1, 0)).values == [None]


# --- one decoder for every reader --------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(damaged=damaged_sections(), codec=st.sampled_from(["none", "zstd"]))
def test_records_and_spans_accept_and_refuse_the_same_bytes(
    damaged: tuple[bytes, int, int], codec: str
) -> None:
    section, record_count, last_offset_delta = damaged
    batch = batch_of(section, record_count, last_offset_delta, codec)
    header = validate_batch(batch)
    outcomes = []
    for decode in (
        lambda: [tuple(r) for r in RecordBatch(batch).records()],
        lambda: list(iter_record_spans(records_section(batch, header), header)),
    ):
        try:
            outcomes.append(decode())
        except CorruptBatchError:  # InvalidRecordError for a bad record, a subclass
            outcomes.append(CorruptBatchError)
    records, spans = outcomes
    assert (records is CorruptBatchError) == (spans is CorruptBatchError)
    if spans is CorruptBatchError:
        return
    assert isinstance(records, list) and isinstance(spans, list)
    assert b"".join(section[span.start : span.end] for span in spans) == section
    assert [(s.offset, s.timestamp_ms, s.key, s.is_tombstone) for s in spans] == [
        (offset, timestamp_ms, key, value is None)
        for offset, timestamp_ms, key, value, _ in records
    ]


@settings(max_examples=400, deadline=None)
@given(damaged=damaged_sections(), keep_values=st.booleans())
def test_views_decode_and_refuse_as_copies_do_and_copy_nothing(
    damaged: tuple[bytes, int, int], keep_values: bool
) -> None:
    """``views=True`` (the door check, the journal's read for a copy) over a memoryview:
    the same records, or the same refusal with the same message, as over bytes."""
    section, record_count, last_offset_delta = damaged
    header = validate_batch(batch_of(section, record_count, last_offset_delta))
    outcomes = []
    for given_section, views in ((section, False), (memoryview(section), True)):
        try:
            columns = decode_records(given_section, header, keep_values=keep_values, views=views)
        except CorruptBatchError as error:
            outcomes.append(str(error))
            continue
        outcomes.append(
            [
                columns.ends,
                columns.offsets,
                columns.timestamps_ms,
                [None if k is None else bytes(k) for k in columns.keys],
                [None if v is None else bytes(v) for v in columns.values],
                columns.headers,
            ]
        )
        if views:  # every key and value a view of the section, never a copy
            for part in (*columns.keys, *columns.values):
                assert part is None or (
                    isinstance(part, memoryview) and part.obj is given_section.obj
                )
            for _, value in (h for headers in columns.headers for h in headers):
                assert value is None or type(value) is bytes
    assert outcomes[0] == outcomes[1]
