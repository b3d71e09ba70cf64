"""Many whole records sections to Arrow arrays at once: the read path's fast path.

With the compiled record decoder built, ``arrays_of_sections`` takes them: the engine's
``column_buffers.sections_to_columns`` walks every record in C and copies each key and
value once into Arrow's own layout, which becomes the arrays without another copy.
Without it (``TWINLOG_NO_EXTENSIONS``, or no compiler at install), ``decode_sections``
below does it with Arrow compute:

``decode_sections`` walks the records of many batches with one short Python loop
(each record's length varint only) and decodes every other field with pyarrow
compute, a few dozen array operations for thousands of records: per record it
costs a fraction of ``decode_records``, which runs dozens of bytecodes per field.
Keys and values are cut out of the sections by Arrow (``binary_slices``), never
made into a Python ``bytes`` each.

It takes only the common shape: every varint of one or two bytes (lengths below
8 KiB, timestamp deltas within 8 s, offset deltas below 8192), no headers. For
anything else, malformed records included, it answers None and the caller
decodes those sections with ``decode_records``, the engine's one decoder, which
decides what is refused and how. So this path accepts a subset of what
``decode_records`` accepts and, for it, gives the same columns (a property test
holds it to that).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow
import pyarrow.compute as pc

from twinlog.connectors.spark.arrow_slices import binary_slices
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.column_buffers import ColumnBuffers, sections_to_columns
from twinlog.engine.records.record_decoder import RECORD_BYTES_MIN

VARINT_LONG_BIT = 0x80
# Operands as Arrow scalars: pyarrow converts a Python int operand on every call, at ten
# times the cost of the operation on thousands of records.
_INT64 = pyarrow.int64()
_ZERO, _ONE, _SEVEN, _MINUS_ONE = (pyarrow.scalar(n, _INT64) for n in (0, 1, 7, -1))
_LOW_BITS, _LONG_BIT = pyarrow.scalar(0x7F, _INT64), pyarrow.scalar(VARINT_LONG_BIT, _INT64)


@dataclass(frozen=True)
class SectionArrays:
    """The records of some sections as Arrow arrays, one item per record, in order."""

    keys: pyarrow.Array  # binary
    values: pyarrow.Array  # binary
    offsets: pyarrow.Array  # int64
    timestamps_ms: pyarrow.Array  # int64


def arrays_of_sections(
    sections: list[tuple[BatchHeader, bytes | memoryview]],
) -> SectionArrays | None:
    """The records of ``sections`` ((header, decompressed records section), in log order)
    from the compiled walk; None where ``decode_records`` must decode them."""
    buffers = sections_to_columns(sections)
    return None if buffers is None else arrays_of(buffers)


def arrays_of(buffers: ColumnBuffers) -> SectionArrays:
    """``buffers`` as Arrow arrays, sharing their memory."""
    rows = buffers.rows

    def binary(starts: bytearray, data: bytearray, valid: bytearray | None) -> pyarrow.Array:
        validity = None if valid is None else pyarrow.py_buffer(valid)
        return pyarrow.Array.from_buffers(
            pyarrow.binary(), rows, [validity, pyarrow.py_buffer(starts), pyarrow.py_buffer(data)]
        )

    def int64(column: bytearray) -> pyarrow.Array:
        return pyarrow.Array.from_buffers(_INT64, rows, [None, pyarrow.py_buffer(column)])

    return SectionArrays(
        keys=binary(buffers.key_starts, buffers.key_data, buffers.key_valid),
        values=binary(buffers.value_starts, buffers.value_data, buffers.value_valid),
        offsets=int64(buffers.offsets),
        timestamps_ms=int64(buffers.timestamps_ms),
    )


class _Declined(Exception):
    """A record outside the fast path's shape (or malformed): decode_records decides."""


def decode_sections(
    data: bytes, sections: list[tuple[BatchHeader, int, int]]
) -> SectionArrays | None:
    """The records of ``sections`` ((header, start, end) positions of each decompressed
    records section in ``data``, in log order, back to back, the last ending at
    ``len(data)``); None unless every record has the common shape and is well formed."""
    try:
        return _decode(data, sections)
    except (_Declined, IndexError, pyarrow.ArrowIndexError):
        # IndexError: a length walked off the data (Python); ArrowIndexError: a field
        # position past the data (a take). Both mean a malformed record.
        return None


def _record_starts(
    data: bytes, sections: list[tuple[BatchHeader, int, int]]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(start of each record, and its batch's base offset, last offset delta and first
    timestamp): the one loop per record, reading only each record's length."""
    starts: list[int] = []
    add = starts.append
    base_offsets: list[int] = []
    last_offset_deltas: list[int] = []
    first_timestamps_ms: list[int] = []
    for header, start, end in sections:
        position = start
        for _ in range(header.record_count):
            add(position)
            byte = data[position]
            if byte < VARINT_LONG_BIT:
                position += 1 + ((byte >> 1) ^ -(byte & 1))
            else:
                second = data[position + 1]
                if second >= VARINT_LONG_BIT:
                    raise _Declined  # a record of 8 KiB or more
                raw = (byte & 0x7F) | (second << 7)
                position += 2 + ((raw >> 1) ^ -(raw & 1))
        if position != end:
            raise _Declined  # the lengths do not tile the section (checked per record below)
        count = header.record_count
        base_offsets += [header.base_offset] * count
        last_offset_deltas += [header.last_offset_delta] * count
        first_timestamps_ms += [header.first_timestamp_ms] * count
    return starts, base_offsets, last_offset_deltas, first_timestamps_ms


def _decode(data: bytes, sections: list[tuple[BatchHeader, int, int]]) -> SectionArrays:
    starts, base_offsets, last_offset_deltas, first_timestamps_ms = _record_starts(data, sections)
    int64 = _INT64
    if not starts:  # batches of no records (and, checked above, empty sections)
        empty = pyarrow.array([], pyarrow.binary())
        return SectionArrays(empty, empty, pyarrow.array([], int64), pyarrow.array([], int64))
    data_bytes = pyarrow.Array.from_buffers(
        pyarrow.uint8(), len(data), [None, pyarrow.py_buffer(data)]
    )
    record_starts = pyarrow.array(starts, int64)
    record_ends = pyarrow.array([*starts[1:], len(data)], int64)

    def varint(positions: pyarrow.Array) -> tuple[pyarrow.Array, pyarrow.Array | pyarrow.Scalar]:
        """(zig-zag value, size in bytes) of the varint at each position; one or two bytes."""
        first = pc.take(data_bytes, positions).cast(int64)
        if pc.max(first).as_py() < VARINT_LONG_BIT:
            raw, size = first, _ONE
        else:
            second = pc.take(data_bytes, pc.add(positions, _ONE)).cast(int64)
            long = pc.greater_equal(first, _LONG_BIT)
            if pc.any(pc.and_(long, pc.greater_equal(second, _LONG_BIT))).as_py():
                raise _Declined  # three bytes or more
            raw = pc.add(
                pc.bit_wise_and(first, _LOW_BITS),
                pc.if_else(long, pc.shift_left(second, _SEVEN), _ZERO),
            )
            size = pc.add(long.cast(int64), _ONE)
        value = pc.bit_wise_xor(pc.shift_right(raw, _ONE), pc.negate(pc.bit_wise_and(raw, _ONE)))
        return value, size

    _, length_bytes = varint(record_starts)  # _record_starts read the lengths themselves
    bodies = pc.add(record_starts, length_bytes)
    if pc.min(pc.subtract(record_ends, bodies)).as_py() < RECORD_BYTES_MIN:
        raise _Declined
    timestamp_at = pc.add(bodies, _ONE)  # after the attributes byte, which no reader checks
    timestamp_deltas_ms, timestamp_bytes = varint(timestamp_at)
    offset_delta_at = pc.add(timestamp_at, timestamp_bytes)
    offset_deltas, offset_delta_bytes = varint(offset_delta_at)
    key_length_at = pc.add(offset_delta_at, offset_delta_bytes)
    key_lengths, key_length_bytes = varint(key_length_at)
    key_starts = pc.add(key_length_at, key_length_bytes)
    key_ends = pc.add(key_starts, pc.max_element_wise(key_lengths, _ZERO))
    value_lengths, value_length_bytes = varint(key_ends)
    value_starts = pc.add(key_ends, value_length_bytes)
    value_ends = pc.add(value_starts, pc.max_element_wise(value_lengths, _ZERO))
    header_counts = pc.take(data_bytes, value_ends)
    offsets = pc.add(pyarrow.array(base_offsets, int64), offset_deltas)
    well_formed = (
        pc.min(key_lengths).as_py() >= -1
        and pc.min(value_lengths).as_py() >= -1
        and pc.max(header_counts).as_py() == 0  # headers: decode_records
        and pc.all(pc.equal(pc.add(value_ends, _ONE), record_ends)).as_py()
        # offset deltas climb strictly within a batch, from 0 to its last offset delta
        and pc.min(offset_deltas).as_py() >= 0
        and pc.all(pc.less_equal(offset_deltas, pyarrow.array(last_offset_deltas, int64))).as_py()
        and (
            len(offsets) < 2
            or pc.all(pc.greater(offsets.slice(1), offsets.slice(0, len(offsets) - 1))).as_py()
        )
    )
    if not well_formed:
        raise _Declined
    return SectionArrays(
        keys=binary_slices(data, key_starts, key_ends, pc.equal(key_lengths, _MINUS_ONE)),
        values=binary_slices(data, value_starts, value_ends, pc.equal(value_lengths, _MINUS_ONE)),
        offsets=offsets,
        timestamps_ms=pc.add(pyarrow.array(first_timestamps_ms, int64), timestamp_deltas_ms),
    )
