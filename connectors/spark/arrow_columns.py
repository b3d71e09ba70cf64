"""An Arrow binary (or string) array handed to the engine's batch builder as its buffers.

``RecordBatchBuilder.append_columns`` encodes records straight from a column in Arrow's
binary layout (``twinlog.engine.records.binary_column``): a write task gives it the
Arrow arrays Spark sends, with no ``bytes`` made per row (``to_pylist`` was a tenth of a
write task's time). Strings are their UTF-8 bytes, unchanged: a cast to binary is free.
"""

from __future__ import annotations

import pyarrow

from twinlog.engine.records.binary_column import BinaryColumn

_BINARY = pyarrow.binary()
_NO_DATA = b""


def binary_array(column: pyarrow.Array | pyarrow.ChunkedArray) -> pyarrow.Array:
    """A binary or string column (or their large kinds) as one binary array: strings'
    UTF-8 bytes, not copied. A large one (int64 starts) is cast, which Arrow refuses for
    a column of 2 GiB or more (a write task's Arrow batches are far smaller)."""
    if isinstance(column, pyarrow.ChunkedArray):
        column = column.combine_chunks()
    return column if column.type == _BINARY else column.cast(_BINARY)


def binary_column_of(array: pyarrow.Array | pyarrow.ChunkedArray) -> BinaryColumn:
    """``array`` (as ``binary_array`` takes it) as a ``BinaryColumn``, sharing its buffers."""
    array = binary_array(array)
    valid, starts, data = array.buffers()
    return BinaryColumn(
        len(array),
        starts,
        data if data is not None else _NO_DATA,
        valid if array.null_count else None,
        array.offset,
    )
