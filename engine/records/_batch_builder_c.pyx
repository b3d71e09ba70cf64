# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The batch builder's ``append_many`` loop, compiled: the twin of the Python loop in
``batch_builder.RecordBatchBuilder.append_many`` for header-less records.

Per record it writes the framing (length, attributes and timestamp delta, offset delta,
key length and key, value length) into one bytes object and adds the value itself
(not copied) and the header count: the records section ``build()`` joins is the same,
byte for byte, as the Python loop's (the differential tests compare the batches). It
declines (None, nothing added) for a key that is not bytes, which the Python loop
takes as any buffer.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

cdef enum:
    VARINT_BYTES_MAX = 10


cdef inline Py_ssize_t _put_varint(unsigned char* out, int64_t value) noexcept nogil:
    """Zig-zag varint of ``value`` at ``out``; the bytes written (``varint.encode_varlong``)."""
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef Py_ssize_t written = 0
    while raw > 0x7F:
        out[written] = <unsigned char>((raw & 0x7F) | 0x80)
        raw >>= 7
        written += 1
    out[written] = <unsigned char>raw
    return written + 1


cdef inline Py_ssize_t _varint_bytes(int64_t value) noexcept nogil:
    cdef unsigned char scratch[VARINT_BYTES_MAX]
    return _put_varint(scratch, value)


def encode_records(
    list parts,
    object values,
    object keys,
    bytes prefix,
    Py_ssize_t delta,
    Py_ssize_t size_bytes,
    Py_ssize_t limit,
    Py_ssize_t start,
    bytes no_headers,
):
    """Add ``values[start:]`` (keys from ``keys``, or none) as records to ``parts``, as
    the Python loop does: (index after the last record added, record count, estimated
    size), or None (nothing added) where the Python loop must run."""
    cdef Py_ssize_t count = len(values)
    cdef Py_ssize_t index
    cdef object key, value
    if keys is not None:
        for index in range(start, count):
            key = keys[index]
            if key is not None and type(key) is not bytes:
                return None
    cdef Py_ssize_t prefix_bytes = PyBytes_GET_SIZE(prefix)
    cdef Py_ssize_t key_bytes, value_bytes, body_bytes, record_bytes, head_bytes, at
    cdef Py_ssize_t offset_bytes, key_length_bytes, value_length_bytes, length_bytes
    cdef bytes framing
    cdef char* out
    index = start
    while index < count:
        value = values[index]
        key = keys[index] if keys is not None else None
        offset_bytes = _varint_bytes(delta)
        if key is None:
            key_bytes = 0
            key_length_bytes = 1  # -1
        else:
            key_bytes = PyBytes_GET_SIZE(key)
            key_length_bytes = _varint_bytes(key_bytes)
        if value is None:
            value_bytes = 0
            value_length_bytes = 1  # -1
        else:
            value_bytes = len(value)
            value_length_bytes = _varint_bytes(value_bytes)
        body_bytes = (
            prefix_bytes + offset_bytes + key_length_bytes + key_bytes + value_length_bytes
            + value_bytes + 1  # the header count
        )
        length_bytes = _varint_bytes(body_bytes)
        record_bytes = length_bytes + body_bytes
        if delta and size_bytes + record_bytes > limit:
            break
        head_bytes = length_bytes + prefix_bytes + offset_bytes + key_length_bytes + key_bytes
        framing = PyBytes_FromStringAndSize(NULL, head_bytes + value_length_bytes)
        out = PyBytes_AS_STRING(framing)
        at = _put_varint(<unsigned char*>out, body_bytes)
        memcpy(out + at, PyBytes_AS_STRING(prefix), prefix_bytes)
        at += prefix_bytes
        at += _put_varint(<unsigned char*>out + at, delta)
        if key is None:
            at += _put_varint(<unsigned char*>out + at, -1)
        else:
            at += _put_varint(<unsigned char*>out + at, key_bytes)
            memcpy(out + at, PyBytes_AS_STRING(key), key_bytes)
            at += key_bytes
        at += _put_varint(<unsigned char*>out + at, -1 if value is None else value_bytes)
        PyList_Append(parts, framing)
        PyList_Append(parts, b"" if value is None else value)
        PyList_Append(parts, no_headers)
        size_bytes += record_bytes
        delta += 1
        index += 1
    return index, delta, size_bytes
