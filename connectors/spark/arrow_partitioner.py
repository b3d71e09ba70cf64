"""Kafka's key partitioning (murmur2) for a whole Arrow column of keys at once.

``twinlog.rpc.client.partitioner.partition_for_key`` hashes one key in Python,
some microseconds a key: the largest cost of a keyed Spark write after
compression. Here each step of murmur2 runs for every key at once, as pyarrow
compute over uint32 arrays (whose multiplication wraps as murmur2's does), one
step per four key bytes. Keys longer than ``KEY_BYTES_VECTORISED`` are hashed
one by one (their steps would outnumber what a loop per key costs); the
result is the same either way, as a property test checks against the client's.
"""

from __future__ import annotations

import pyarrow
import pyarrow.compute as pc

from twinlog.rpc.client.partitioner import MURMUR2_M, MURMUR2_SEED, partition_for_key

KEY_BYTES_VECTORISED = 256

_UINT32 = pyarrow.uint32()
_M = pyarrow.scalar(MURMUR2_M, _UINT32)
_SEED = pyarrow.scalar(MURMUR2_SEED, _UINT32)
_SHIFTS = {bits: pyarrow.scalar(bits, _UINT32) for bits in (8, 13, 15, 16, 24)}
_SIGN_CLEARED = pyarrow.scalar(0x7FFFFFFF, _UINT32)
_INT64 = pyarrow.int64()
_ZERO64 = pyarrow.scalar(0, _INT64)


def partitions_for_keys(keys: pyarrow.Array, partitions: int) -> pyarrow.Array:
    """``partition_for_key(key, partitions)`` of each key (a binary array without nulls),
    as an int64 array."""
    if len(keys) == 0:
        return pyarrow.array([], _INT64)
    lengths = pc.binary_length(keys).cast(_INT64)
    if pc.max(lengths).as_py() > KEY_BYTES_VECTORISED:
        return pyarrow.array(
            [partition_for_key(key, partitions) for key in keys.to_pylist()], _INT64
        )
    hashes = _murmur2(keys, lengths)
    positive = pc.bit_wise_and(hashes, _SIGN_CLEARED).cast(_INT64)
    count = pyarrow.scalar(partitions, _INT64)
    return pc.subtract(positive, pc.multiply(pc.divide(positive, count), count))


def _murmur2(keys: pyarrow.Array, lengths: pyarrow.Array) -> pyarrow.Array:
    """Kafka's murmur2 of each key, as uint32 (the bits of the signed int Java returns)."""
    _, offsets_buffer, data = keys.buffers()
    offsets = pyarrow.Array.from_buffers(
        pyarrow.int32(), len(keys) + 1, [None, offsets_buffer], offset=keys.offset
    )
    # A shorter key's steps read past its end, the last key's past the data: into this
    # padding, and are masked.
    data_bytes = (bytes(data) if data is not None else b"") + bytes(KEY_BYTES_VECTORISED + 4)
    key_bytes = pyarrow.Array.from_buffers(
        pyarrow.uint8(), len(data_bytes), [None, pyarrow.py_buffer(data_bytes)]
    )
    starts = offsets.slice(0, len(keys)).cast(_INT64)

    def byte_at(positions: pyarrow.Array, shift: int) -> pyarrow.Array:
        taken = pc.take(key_bytes, positions).cast(_UINT32)
        return pc.shift_left(taken, _SHIFTS[shift]) if shift else taken

    def word_at(positions: pyarrow.Array) -> pyarrow.Array:
        """The little-endian uint32 at each position."""
        word = byte_at(positions, 0)
        for index, shift in ((1, 8), (2, 16), (3, 24)):
            at = pc.add(positions, pyarrow.scalar(index, _INT64))
            word = pc.bit_wise_or(word, byte_at(at, shift))
        return word

    h = pc.bit_wise_xor(_SEED, lengths.cast(_UINT32))
    quads = pc.shift_right(lengths, pyarrow.scalar(2, _INT64))
    for quad in range(pc.max(quads).as_py()):
        k = pc.multiply(word_at(pc.add(starts, pyarrow.scalar(4 * quad, _INT64))), _M)
        k = pc.multiply(pc.bit_wise_xor(k, pc.shift_right(k, _SHIFTS[24])), _M)
        mixed = pc.bit_wise_xor(pc.multiply(h, _M), k)
        longer = pc.greater(quads, pyarrow.scalar(quad, _INT64))
        h = mixed if pc.all(longer).as_py() else pc.if_else(longer, mixed, h)
    tail_at = pc.add(starts, pc.shift_left(quads, pyarrow.scalar(2, _INT64)))
    tail_bytes = pc.bit_wise_and(lengths, pyarrow.scalar(3, _INT64))
    if pc.max(tail_bytes).as_py() > 0:
        for index, shift in ((2, 16), (1, 8), (0, 0)):
            at = pc.add(tail_at, pyarrow.scalar(index, _INT64))
            present = pc.greater(tail_bytes, pyarrow.scalar(index, _INT64))
            h = pc.if_else(present, pc.bit_wise_xor(h, byte_at(at, shift)), h)
        h = pc.if_else(pc.greater(tail_bytes, _ZERO64), pc.multiply(h, _M), h)
    h = pc.bit_wise_xor(h, pc.shift_right(h, _SHIFTS[13]))
    h = pc.multiply(h, _M)
    return pc.bit_wise_xor(h, pc.shift_right(h, _SHIFTS[15]))
