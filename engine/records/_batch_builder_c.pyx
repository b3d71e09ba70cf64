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
from libc.stdint cimport int32_t, int64_t, uint64_t
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


# --- records straight from column buffers (Arrow's binary layout: binary_column) ---------


cdef struct _Column:
    const int32_t* starts  # from the column's first row
    const unsigned char* data
    Py_ssize_t data_bytes
    const unsigned char* valid  # NULL: no row is null
    Py_ssize_t first_row  # the bit of row 0 in ``valid``


cdef bint _column_of(
    object starts, object data, object valid, Py_ssize_t first_row, Py_ssize_t rows,
    _Column* column, list views,
) except -1:
    """Fill ``column`` from the buffers (held alive in ``views``); False where they are too
    short for ``rows`` rows (the reference then raises its message)."""
    cdef const unsigned char[::1] starts_view = memoryview(starts).cast("B")
    cdef const unsigned char[::1] data_view = memoryview(data).cast("B")
    cdef const unsigned char[::1] valid_view
    views.append(starts_view)
    views.append(data_view)
    if first_row < 0 or starts_view.shape[0] < (first_row + rows + 1) * 4:
        return False
    column.starts = (<const int32_t*>&starts_view[0]) + first_row
    column.data_bytes = data_view.shape[0]
    column.data = &data_view[0] if column.data_bytes > 0 else <const unsigned char*>b""
    column.valid = NULL
    column.first_row = first_row
    if valid is not None:
        valid_view = memoryview(valid).cast("B")
        views.append(valid_view)
        if valid_view.shape[0] < (first_row + rows + 7) // 8:
            return False
        column.valid = &valid_view[0] if valid_view.shape[0] > 0 else NULL
    return True


cdef inline bint _item(
    const _Column* column, Py_ssize_t row, Py_ssize_t* begin, Py_ssize_t* size,
) noexcept nogil:
    """Row ``row``'s bytes (``size`` -1 where null); False where its start and end do not
    lie in the data buffer."""
    cdef Py_ssize_t bit = column.first_row + row
    if column.valid != NULL and not (column.valid[bit >> 3] >> (bit & 7)) & 1:
        size[0] = -1
        return True
    cdef int32_t first = column.starts[row]
    cdef int32_t last = column.starts[row + 1]
    if first < 0 or last < first or last > column.data_bytes:
        return False
    begin[0] = first
    size[0] = last - first
    return True


cdef inline Py_ssize_t _put_item(
    unsigned char* out, const _Column* column, Py_ssize_t begin, Py_ssize_t size,
) noexcept nogil:
    """The item's length varint and bytes at ``out`` (-1 alone where null); bytes written."""
    cdef Py_ssize_t at = _put_varint(out, size)
    if size > 0:
        memcpy(out + at, column.data + begin, size)
        at += size
    return at


def encode_column_records(
    list parts,
    Py_ssize_t rows,
    object value_starts, object value_data, object value_valid, Py_ssize_t value_first_row,
    object key_starts, object key_data, object key_valid, Py_ssize_t key_first_row,
    bytes prefix,
    Py_ssize_t delta,
    Py_ssize_t size_bytes,
    Py_ssize_t limit,
    Py_ssize_t start,
    Py_ssize_t stop,
):
    """Rows ``start`` to ``stop`` of a value column (and a key column, unless
    ``key_starts`` is None), both of ``rows`` rows in Arrow's binary layout, as records
    appended to ``parts`` in one bytes object: the same bytes as the Python loop of
    ``append_many`` makes of the rows (the differential tests compare the batches).
    (index after the last row added, record count, estimated size), or None (nothing
    added) where the buffers do not hold the rows they claim (the reference says why)."""
    if not 0 <= start <= stop <= rows:
        return None
    cdef list views = []
    cdef _Column values, keys
    cdef bint keyed = key_starts is not None
    if not _column_of(value_starts, value_data, value_valid, value_first_row, rows, &values, views):
        return None
    if keyed and not _column_of(key_starts, key_data, key_valid, key_first_row, rows, &keys, views):
        return None
    cdef const unsigned char* prefix_data = <const unsigned char*>PyBytes_AS_STRING(prefix)
    cdef Py_ssize_t prefix_bytes = PyBytes_GET_SIZE(prefix)
    cdef Py_ssize_t index, row_delta, total_bytes = 0
    cdef Py_ssize_t key_begin = 0, key_size = -1, value_begin = 0, value_size = -1
    cdef Py_ssize_t body_bytes, record_bytes, at = 0
    cdef Py_ssize_t reached = start
    cdef bint consistent = True, full = False
    # First pass: each record's size, up to the limit (a batch takes at least one record);
    # every row is checked, beyond the limit too, as the reference reads them all.
    with nogil:
        row_delta = delta
        for index in range(start, stop):
            if not _item(&values, index, &value_begin, &value_size):
                consistent = False
                break
            if keyed and not _item(&keys, index, &key_begin, &key_size):
                consistent = False
                break
            if full:
                continue
            body_bytes = (
                prefix_bytes + _varint_bytes(row_delta)
                + (1 if key_size < 0 else _varint_bytes(key_size) + key_size)
                + (1 if value_size < 0 else _varint_bytes(value_size) + value_size)
                + 1  # the header count
            )
            record_bytes = _varint_bytes(body_bytes) + body_bytes
            if row_delta and size_bytes + total_bytes + record_bytes > limit:
                full = True
                continue
            total_bytes += record_bytes
            row_delta += 1
            reached = index + 1
    if not consistent:
        return None
    if reached == start:
        return start, delta, size_bytes
    cdef bytes chunk = PyBytes_FromStringAndSize(NULL, total_bytes)
    cdef unsigned char* out = <unsigned char*>PyBytes_AS_STRING(chunk)
    key_size = -1
    # Second pass: write them (every item was checked by the first).
    with nogil:
        row_delta = delta
        for index in range(start, reached):
            _item(&values, index, &value_begin, &value_size)
            if keyed:
                _item(&keys, index, &key_begin, &key_size)
            body_bytes = (
                prefix_bytes + _varint_bytes(row_delta)
                + (1 if key_size < 0 else _varint_bytes(key_size) + key_size)
                + (1 if value_size < 0 else _varint_bytes(value_size) + value_size)
                + 1
            )
            at += _put_varint(out + at, body_bytes)
            memcpy(out + at, prefix_data, prefix_bytes)
            at += prefix_bytes
            at += _put_varint(out + at, row_delta)
            at += _put_item(out + at, &keys, key_begin, key_size)
            at += _put_item(out + at, &values, value_begin, value_size)
            out[at] = 0  # no headers
            at += 1
            row_delta += 1
    assert at == total_bytes, (at, total_bytes)
    PyList_Append(parts, chunk)
    return reached, row_delta, size_bytes + total_bytes
