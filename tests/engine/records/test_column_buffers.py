"""Many sections as column buffers: the compiled walk (``_record_decoder_c.sections_to_columns``)
gives exactly what its reference (``decode_records``, packed) gives, buffers byte for
byte, and declines exactly where the reference does: a section ``decode_records``
refuses, a record with headers, a sum beyond int64."""

from __future__ import annotations

import importlib
from array import array
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_sections import DAMAGED, batch_of, header_of

from twinlog.engine.records import column_buffers
from twinlog.engine.records.batch_builder import encode_record
from twinlog.engine.records.batch_format import BatchHeader, validate_batch
from twinlog.engine.records.column_buffers import ColumnBuffers, sections_to_columns_python
from twinlog.engine.records.record_decoder import decode_records


def _compiled() -> ModuleType:
    """Built by every install with a compiler (CI's): its absence is a broken install."""
    return importlib.import_module("twinlog.engine.records._record_decoder_c")


def _compiled_answer(sections: list[tuple[BatchHeader, Any]]) -> ColumnBuffers | None:
    made = _compiled().sections_to_columns(sections)
    return None if made is None else ColumnBuffers(*made)


def _assert_alike(sections: list[tuple[BatchHeader, bytes]]) -> ColumnBuffers | None:
    """Both walks on bytes and on memoryviews of them: the same answer."""
    expected = sections_to_columns_python(sections)
    for views in (False, True):
        given_sections: list[tuple[BatchHeader, Any]] = [
            (header, memoryview(section) if views else section) for header, section in sections
        ]
        assert _compiled_answer(given_sections) == expected, (views, sections)
    return expected


def _unpacked(buffers: ColumnBuffers) -> dict[str, list[Any]]:
    """The buffers read back as Python values, row by row."""

    def binary(starts: bytearray, data: bytearray, valid: bytearray | None) -> list[Any]:
        positions = array("i", bytes(starts))
        return [
            None
            if valid is not None and not valid[row >> 3] & (1 << (row & 7))
            else bytes(data[positions[row] : positions[row + 1]])
            for row in range(buffers.rows)
        ]

    return {
        "offsets": list(array("q", bytes(buffers.offsets))),
        "timestamps_ms": list(array("q", bytes(buffers.timestamps_ms))),
        "keys": binary(buffers.key_starts, buffers.key_data, buffers.key_valid),
        "values": binary(buffers.value_starts, buffers.value_data, buffers.value_valid),
    }


def test_the_compiled_walk_is_the_one_in_use() -> None:
    assert column_buffers.COMPILED


def test_pinned_sections_give_the_decoders_records() -> None:
    first = encode_record(0, 5, b"k1", b"hello", []) + encode_record(2, -3, None, b"", [])
    second = encode_record(0, 0, b"", None, []) + encode_record(1, 1 << 40, b"k" * 300, b"v", [])
    sections = [(header_of(2, 2), first), (header_of(2, 1), second)]
    buffers = _assert_alike(sections)
    assert buffers is not None
    expected: dict[str, list[Any]] = {"offsets": [], "timestamps_ms": [], "keys": [], "values": []}
    for header, section in sections:
        records = decode_records(section, header)
        expected["offsets"] += records.offsets
        expected["timestamps_ms"] += records.timestamps_ms
        expected["keys"] += records.keys
        expected["values"] += records.values
    assert _unpacked(buffers) == expected
    assert buffers.key_valid is not None and buffers.value_valid is not None  # nulls present


def test_no_null_means_no_bitmap() -> None:
    section = b"".join(encode_record(d, 0, b"k", b"v%d" % d, []) for d in range(9))
    buffers = _assert_alike([(header_of(9, 8), section)])
    assert buffers is not None and buffers.key_valid is None and buffers.value_valid is None


def test_no_sections_and_no_records_give_empty_columns() -> None:
    for sections in ([], [(header_of(0, 0), b"")]):
        buffers = _assert_alike(sections)
        assert buffers is not None and buffers.rows == 0
        assert bytes(buffers.key_starts) == bytes(4)  # one position: 0


@pytest.mark.parametrize(("section", "record_count", "last_offset_delta", "message"), DAMAGED)
def test_damaged_sections_are_declined_by_both(
    section: bytes, record_count: int, last_offset_delta: int, message: str
) -> None:
    header = validate_batch(batch_of(section, record_count, last_offset_delta))
    good = encode_record(0, 0, b"k", b"v", [])
    assert _assert_alike([(header_of(1, 0), good), (header, section)]) is None


def test_headers_are_left_to_the_decoder() -> None:
    section = encode_record(0, 0, b"k", b"v", []) + encode_record(1, 0, b"k", b"v", [("h", b"x")])
    assert _assert_alike([(header_of(2, 1), section)]) is None


def test_sums_beyond_int64_are_declined_by_both() -> None:
    section = encode_record(0, 1, None, None, []) + encode_record(1, 5, None, None, [])
    header = header_of(2, 1)
    for odd in (
        header._replace(first_timestamp_ms=(1 << 63) - 2),
        header._replace(base_offset=(1 << 63) - 1),
    ):
        assert _assert_alike([(odd, section)]) is None


record_strategy = st.tuples(
    st.none() | st.binary(max_size=12),
    st.none() | st.binary(max_size=300),
    st.sampled_from([0, 0, 0, 1, 200]),  # offset gap before it (compaction)
    st.integers(-(1 << 20), 1 << 20) | st.integers(-(1 << 62), 1 << 62),
    st.booleans() | st.just(False),  # headers, now and then
)


@st.composite
def many_sections(draw: st.DrawFn) -> list[tuple[BatchHeader, bytes]]:
    """Sections of header-less records mostly, now and then headers or damage."""
    made = []
    for _ in range(draw(st.integers(1, 4))):
        delta = -1
        parts = []
        for key, value, gap, timestamp_delta_ms, has_headers in draw(
            st.lists(record_strategy, min_size=0, max_size=8)
        ):
            delta += 1 + gap
            headers = [("h", b"x")] if has_headers and draw(st.integers(0, 3)) == 0 else []
            parts.append(encode_record(delta, timestamp_delta_ms, key, value, headers))
        section = bytearray(b"".join(parts))
        record_count, last_offset_delta = len(parts), max(delta, 0)
        if section and draw(st.integers(0, 4)) == 0:
            spot = draw(st.integers(0, len(section) - 1))
            section[spot] = draw(st.integers(0, 255))
        header = validate_batch(batch_of(bytes(section), record_count, last_offset_delta))
        made.append((header, bytes(section)))
    return made


@settings(max_examples=400, deadline=None)
@given(sections=many_sections())
def test_any_sections_give_the_same_buffers_or_are_declined_by_both(
    sections: list[tuple[BatchHeader, bytes]],
) -> None:
    _assert_alike(sections)
