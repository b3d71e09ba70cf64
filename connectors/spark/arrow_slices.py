"""Slices of one buffer as an Arrow binary array, copied by Arrow, not a ``bytes`` each.

A binary array is one data buffer plus the offset where each item starts, the
next item starting where one ends. The slices wanted (each record's key, or
value) have gaps between them, so they are made the items at even indices of a
larger array over the whole buffer whose odd items are the gaps: offsets
start_0, end_0, start_1, end_1, ... (interleaved by one ``take``), then the even
items kept by ``filter``, one C++ pass that copies each slice once.
"""

from __future__ import annotations

import pyarrow
import pyarrow.compute as pc

_INT64 = pyarrow.int64()
_ZERO, _ONE = pyarrow.scalar(0, _INT64), pyarrow.scalar(1, _INT64)
# 0, 1, 2, ...: grown as needed, sliced (without copying) to the length wanted.
_counting = pyarrow.array([], _INT64)


def _counting_to(count: int) -> pyarrow.Array:
    global _counting
    if len(_counting) < count:
        _counting = pyarrow.array(range(max(count, 2 * len(_counting))), _INT64)
    return _counting.slice(0, count)


def binary_slices(
    data: bytes, starts: pyarrow.Array, ends: pyarrow.Array, nulls: pyarrow.Array
) -> pyarrow.Array:
    """``data[starts[i]:ends[i]]`` for each i, null where ``nulls[i]`` (int64 positions,
    ascending and not overlapping: each start at or after the end before it)."""
    count = len(starts)
    if not count:
        return pyarrow.array([], pyarrow.binary())
    # Position j of the interleaved offsets takes starts[j / 2] (j even) or ends[j / 2].
    positions = _counting_to(2 * count)
    halves = pc.shift_right(positions, _ONE)
    odd = pc.bit_wise_and(positions, _ONE)
    boundaries = pc.take(
        pyarrow.concat_arrays([starts, ends]),
        pc.add(halves, pc.multiply(odd, pyarrow.scalar(count, _INT64))),
    ).cast(pyarrow.int32())
    # 2 * count boundaries make 2 * count - 1 items: slice, gap, slice, ..., slice.
    spans = pyarrow.Array.from_buffers(
        pyarrow.binary(),
        2 * count - 1,
        [None, boundaries.buffers()[1], pyarrow.py_buffer(data)],
    )
    keep = pc.equal(odd.slice(0, 2 * count - 1), _ZERO)
    sliced = pc.filter(spans, keep)
    if not pc.any(nulls).as_py():
        return sliced
    return pyarrow.Array.from_buffers(
        pyarrow.binary(),
        count,
        [pc.invert(nulls).buffers()[1], sliced.buffers()[1], sliced.buffers()[2]],
    )
