"""Zig-zag variable-length integers, as in Kafka's record format (and protobuf's sint).

A signed value ``n`` is zig-zag mapped to ``(n << 1) ^ (n >> 63)`` and written
7 bits at a time, least significant group first, with the high bit of each
byte meaning "more bytes follow". So ``0 -> 00``, ``-1 -> 01``, ``1 -> 02``,
``300 -> d8 04``.

Encoding is on the producer's hot path (one call per field per record), so
small values come from a precomputed table.
"""

from __future__ import annotations

from twinlog.engine.base.errors import CorruptBatchError

VARINT_BYTES_MAX = 5  # a 32-bit value takes at most 5 groups of 7 bits
VARLONG_BYTES_MAX = 10  # a 64-bit value takes at most 10

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Zig-zag varint bytes of a signed 64-bit ``value``."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varint value {value} does not fit in 64 bits")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# Lengths of keys, values and headers up to 16 KiB, deltas and -1 (null) hit this table.
# ``SMALL_VARINTS[n]`` for 0 <= n < SMALL_VARINTS_COUNT is ``encode_varint(n)``, for a
# hot loop that saves the call.
SMALL_VARINTS_COUNT = 1 << 14
SMALL_VARINTS: tuple[bytes, ...] = tuple(encode_varlong(n) for n in range(SMALL_VARINTS_COUNT))
MINUS_ONE: bytes = encode_varlong(-1)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint bytes of ``value``; fast for 0 <= value < 16384 and -1."""
    if 0 <= value < SMALL_VARINTS_COUNT:
        return SMALL_VARINTS[value]
    if value == -1:
        return MINUS_ONE
    return encode_varlong(value)


def decode_varint(
    buffer: bytes | memoryview, position: int, bytes_max: int = VARLONG_BYTES_MAX
) -> tuple[int, int]:
    """Decode one zig-zag varint at ``position``; return (value, position after it).

    Raises CorruptBatchError if the bytes end before the varint does, if it
    runs longer than ``bytes_max`` bytes, or if its value does not fit in a
    signed 64-bit integer.
    """
    result = 0
    shift = 0
    end = len(buffer)
    start = position
    while True:
        if position >= end:
            raise CorruptBatchError(
                f"varint at byte {start} runs past the end of the records section ({end} bytes)"
            )
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if position - start >= bytes_max:
            raise CorruptBatchError(
                f"varint at byte {start} is longer than {bytes_max} bytes (not a valid varint)"
            )
    if result >> 64:
        # Ten groups of 7 bits hold 70: the top six must be zero, else the value is
        # beyond int64 and no writer of this format could have produced it.
        raise CorruptBatchError(
            f"varint at byte {start} holds a value of {result.bit_length()} bits, "
            "more than the 64 a varlong may have (not a valid varint)"
        )
    return (result >> 1) ^ -(result & 1), position
