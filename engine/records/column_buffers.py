"""Many batches' records as column buffers in Arrow's layout, for columnar readers.

A columnar reader (Spark's, through Arrow) wants every record's key, value, offset and
timestamp as a few flat buffers, not an object per field. ``sections_to_columns``
gives them, walking the records with the compiled record decoder
(``_record_decoder_c.sections_to_columns``): one pass in C counts and checks, a second
copies each key and value once into its column, the GIL released meanwhile.

Its reference is the one decoder: ``sections_to_columns_python`` decodes with
``decode_records`` and packs what it gives, and the differential tests demand the same
buffers from both. Both answer None where the caller must decode with
``decode_records`` itself (which raises the one message for a malformed record): a
section it refuses, a record with headers, a key or value column of 2 GiB or more, and
(the compiled one) an offset or timestamp sum beyond int64.

``COMPILED`` says whether the compiled walk is in use. Without it a reader does better
with its own vectorised path than with the Python reference, which decodes record by
record: the reference is here to pin the format, not to be fast.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import NamedTuple

from twinlog.engine.base import extensions
from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.record_decoder import RecordColumns, decode_records

# Arrow's binary arrays hold their items' positions as int32.
COLUMN_BYTES_MAX = 2**31 - 1

_COMPILED = extensions.load("twinlog.engine.records._record_decoder_c")
COMPILED = _COMPILED is not None

Sections = Sequence[tuple[BatchHeader, bytes | memoryview]]


class ColumnBuffers(NamedTuple):
    """The records of some sections, in order, one row each (native byte order)."""

    rows: int
    offsets: bytearray  # int64 per row
    timestamps_ms: bytearray  # int64 per row
    key_starts: bytearray  # int32 per row and one more: row i is key_data[starts[i]:starts[i+1]]
    key_data: bytearray
    # A bit per row (least significant first), 0 where the row is null; None: none is.
    key_valid: bytearray | None
    value_starts: bytearray
    value_data: bytearray
    value_valid: bytearray | None


def sections_to_columns(sections: Sections) -> ColumnBuffers | None:
    """The records of ``sections`` ((header, decompressed records section), in log order)
    as column buffers, or None where ``decode_records`` must decode them; the compiled
    walk when built, else the reference."""
    if _COMPILED is None:
        return sections_to_columns_python(sections)
    made = _COMPILED.sections_to_columns(list(sections))
    return None if made is None else ColumnBuffers(*made)


def sections_to_columns_python(sections: Sections) -> ColumnBuffers | None:
    """The reference: ``decode_records`` on each section, its columns packed."""
    columns = RecordColumns()
    try:
        for header, section in sections:
            decode_records(section, header, columns)
    except CorruptBatchError:
        return None
    if any(columns.headers):
        return None
    keys = _binary_column(columns.keys)
    values = _binary_column(columns.values)
    if keys is None or values is None:
        return None
    try:
        offsets = array("q", columns.offsets)
        timestamps_ms = array("q", columns.timestamps_ms)
    except OverflowError:  # a sum beyond int64 (Python's integers held it)
        return None
    return ColumnBuffers(
        len(columns),
        bytearray(offsets.tobytes()),
        bytearray(timestamps_ms.tobytes()),
        *keys,
        *values,
    )


def _binary_column(
    items: Sequence[bytes | None],
) -> tuple[bytearray, bytearray, bytearray | None] | None:
    """(starts, data, valid bitmap or None) of one binary column; None past int32."""
    starts = array("i", [0])
    data = bytearray()
    valid = bytearray((len(items) + 7) // 8)
    for row, item in enumerate(items):
        if item is not None:
            data += item
            valid[row >> 3] |= 1 << (row & 7)
        if len(data) > COLUMN_BYTES_MAX:
            return None
        starts.append(len(data))
    return bytearray(starts.tobytes()), data, valid if None in items else None
