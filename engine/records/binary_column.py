"""A column of byte strings in Arrow's binary layout, as a writer of columns hands it over.

A columnar writer (Spark's, through Arrow) holds each row's key and value not as a
``bytes`` each but as three flat buffers: the items' data end to end, an int32 start per
row and one more (row *i* is ``data[starts[i]:starts[i + 1]]``), and a validity bitmap
(a bit per row, least significant first, 0 where the row is null; absent when none is).
An Arrow array may begin inside its buffers (a slice): ``first_row`` is its offset there.

``RecordBatchBuilder.append_columns`` encodes records straight from such columns (the
compiled builder reads the buffers in C; its reference reads them with ``items`` below,
and both refuse the same inconsistent buffers with the same message). This module knows
nothing of pyarrow: the caller hands over the buffers (``pyarrow.Array.buffers()``).
"""

from __future__ import annotations

from array import array
from typing import NamedTuple, Protocol

# Arrow's binary arrays hold their items' positions as int32, in the machine's order.
START_BYTES = 4


class Buffer(Protocol):
    """Anything that exports a contiguous byte buffer (bytes, memoryview, pyarrow.Buffer)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...


class BinaryColumn(NamedTuple):
    """``rows`` byte strings (or nulls) in Arrow's binary layout."""

    rows: int
    starts: Buffer  # int32 per row and one more, native order, from row ``first_row`` on
    data: Buffer  # the items' bytes end to end
    valid: Buffer | None  # a bit per row from bit ``first_row`` on, 0 where null; None: none is
    first_row: int = 0  # where the column begins in ``starts`` and ``valid`` (Arrow's offset)


def items(column: BinaryColumn, start: int, stop: int) -> list[bytes | None]:
    """Rows ``start`` to ``stop`` of ``column`` as bytes (None where null): the reference
    reading of the layout. ValueError, naming what is wrong, for buffers that do not hold
    the rows they claim (a caller's bug; the compiled builder declines them to here)."""
    check_rows(column, start, stop)
    first = column.first_row
    starts_view = memoryview(column.starts).cast("B")
    starts = array("i")  # native order, as Arrow writes them
    starts.frombytes(starts_view[(first + start) * START_BYTES : (first + stop + 1) * START_BYTES])
    data = memoryview(column.data).cast("B")
    valid = None if column.valid is None else memoryview(column.valid).cast("B")
    rows: list[bytes | None] = []
    for index in range(stop - start):
        row = first + start + index
        if valid is not None and not valid[row >> 3] >> (row & 7) & 1:
            rows.append(None)
            continue
        begin, end = starts[index], starts[index + 1]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(
                f"binary column: row {start + index} spans bytes {begin} to {end} of a data "
                f"buffer of {len(data)}: the starts buffer does not fit the data"
            )
        rows.append(bytes(data[begin:end]))
    return rows


def check_rows(column: BinaryColumn, start: int, stop: int) -> None:
    """ValueError unless rows ``start`` to ``stop`` are within the column and its starts and
    validity buffers hold them."""
    if not 0 <= start <= stop <= column.rows or column.first_row < 0:
        raise ValueError(
            f"binary column: rows {start} to {stop} asked of a column of {column.rows} rows "
            f"(first row {column.first_row})"
        )
    starts_bytes = memoryview(column.starts).nbytes
    needed = (column.first_row + column.rows + 1) * START_BYTES
    if starts_bytes < needed:
        raise ValueError(
            f"binary column: its starts buffer holds {starts_bytes} bytes, {needed} needed for "
            f"{column.rows} rows from row {column.first_row}"
        )
    if column.valid is not None:
        valid_bytes = memoryview(column.valid).nbytes
        needed = (column.first_row + column.rows + 7) // 8
        if valid_bytes < needed:
            raise ValueError(
                f"binary column: its validity buffer holds {valid_bytes} bytes, {needed} "
                f"needed for {column.rows} rows from row {column.first_row}"
            )
