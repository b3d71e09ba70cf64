# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The record decoder's hot loop, compiled: the twin of ``record_decoder.decode_records_python``.

``decode_into`` walks a records section exactly as the Python reference does and appends
the same values to the same ``RecordColumns`` lists. It never words an error itself: on
any byte the reference would refuse, and on the rare input the reference accepts but a
64-bit sum cannot hold (a timestamp or offset beyond int64), it puts the columns back as
they were and returns False; the caller then runs the reference on the same bytes, which
raises the one message users see (or decodes the oddity with Python's integers). So the
refusals and their messages are the reference's by construction, and the differential
tests pin that this function refuses exactly where the reference does.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t

cdef enum:
    RECORD_BYTES_MIN = 6  # record_decoder.RECORD_BYTES_MIN
    VARINT_BYTES_MAX = 5  # varint.VARINT_BYTES_MAX
    VARLONG_BYTES_MAX = 10  # varint.VARLONG_BYTES_MAX

cdef tuple _NO_HEADERS = ()


cdef inline bint _varint(
    const unsigned char* data, Py_ssize_t end, Py_ssize_t* position, int bytes_max,
    int64_t* value,
) noexcept nogil:
    """A zig-zag varint at ``position[0]``, as ``varint.decode_varint`` reads it; False where
    it would raise (past the end, longer than ``bytes_max``, beyond 64 bits). One and two
    bytes (most lengths, deltas and counts) are read here, in line; longer ones by
    ``_varint_long``, kept out of line so the loops that call this stay small."""
    cdef Py_ssize_t at = position[0]
    cdef uint64_t result
    if at + 1 < end:
        if data[at] < 0x80:
            result = data[at]
            position[0] = at + 1
        elif data[at + 1] < 0x80:
            result = (data[at] & 0x7F) | (<uint64_t>data[at + 1] << 7)
            position[0] = at + 2
        else:
            return _varint_long(data, end, position, bytes_max, value)
        value[0] = <int64_t>((result >> 1) ^ (<uint64_t>0 - (result & 1)))
        return True
    return _varint_long(data, end, position, bytes_max, value)


cdef bint _varint_long(
    const unsigned char* data, Py_ssize_t end, Py_ssize_t* position, int bytes_max,
    int64_t* value,
) noexcept nogil:
    """``_varint`` of any length, near the end of the data too."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef Py_ssize_t at = position[0]
    cdef Py_ssize_t start = at
    cdef unsigned char byte
    while True:
        if at >= end:
            return False
        byte = data[at]
        at += 1
        if shift == 63 and (byte & 0x7F) > 1:
            return False  # the value would need more than 64 bits
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            break
        shift += 7
        if at - start >= bytes_max:
            return False
    value[0] = <int64_t>((result >> 1) ^ (<uint64_t>0 - (result & 1)))
    position[0] = at
    return True


cdef inline bint _adds_within_int64(int64_t a, int64_t b) noexcept nogil:
    if b > 0:
        return a <= INT64_MAX - b
    return a >= INT64_MIN - b


cdef object _headers(
    object section, const unsigned char* data, Py_ssize_t end, Py_ssize_t* position,
    int64_t record_end,
):
    """The headers of a record whose header count is at ``position[0]``, or None where
    the reference would refuse them."""
    cdef int64_t count, size
    cdef Py_ssize_t at = position[0]
    cdef int64_t index
    cdef list headers
    if not _varint(data, end, &at, VARINT_BYTES_MAX, &count):
        return None
    if record_end - at < 0 or not 0 <= count <= (record_end - at) // 2:
        return None
    headers = []
    for index in range(count):
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &size):
            return None
        if not 0 <= size <= record_end - at:
            return None
        try:
            name = PyUnicode_DecodeUTF8(<const char*>data + at, size, NULL)
        except UnicodeDecodeError:
            return None
        at += size
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &size):
            return None
        if size == -1:
            headers.append((name, None))
        elif 0 <= size <= record_end - at:
            headers.append((name, PyBytes_FromStringAndSize(<const char*>data + at, size)))
            at += size
        else:
            return None
    position[0] = at
    return tuple(headers)


cdef inline object _piece(
    object section, const unsigned char* data, Py_ssize_t position, int64_t size, bint as_bytes
):
    """A key or value as the reference slices it: bytes from bytes, else the section's
    own slice (a memoryview's is a view)."""
    if as_bytes:
        return PyBytes_FromStringAndSize(<const char*>data + position, size)
    return section[position : position + size]


cdef bint _walk(
    object section,
    const unsigned char* data,
    Py_ssize_t end,
    int64_t base_offset,
    int64_t first_timestamp_ms,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
    object columns,
    bint keep_values,
    bint* keyless,
) except -1:
    """The one walk of the grammar. With ``columns`` (not None) it appends each record's
    fields to them; with None it only checks, allocating nothing but header names, and
    sets ``keyless[0]`` if a record has a null key. False where the reference must decide
    (columns then hold some records: the caller puts them back)."""
    cdef bint collect = columns is not None
    cdef bint as_bytes = type(section) is bytes
    cdef list ends, offsets, timestamps, keys, values, all_headers
    if collect:
        ends = columns.ends
        offsets = columns.offsets
        timestamps = columns.timestamps_ms
        keys = columns.keys
        values = columns.values
        all_headers = columns.headers
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t index
    cdef int64_t length, record_end, timestamp_delta, offset_delta, size
    cdef int64_t previous_delta = -1
    cdef object key = None, value = None, headers = _NO_HEADERS
    for index in range(record_count):
        if not _varint(data, end, &position, VARINT_BYTES_MAX, &length):
            return False
        record_end = position + length
        if length < RECORD_BYTES_MIN or record_end > end:
            return False
        position += 1  # attributes, unused
        if not _varint(data, end, &position, VARLONG_BYTES_MAX, &timestamp_delta):
            return False
        if not _varint(data, end, &position, VARINT_BYTES_MAX, &offset_delta):
            return False
        if not previous_delta < offset_delta <= last_offset_delta:
            return False
        previous_delta = offset_delta
        # key
        if not _varint(data, end, &position, VARINT_BYTES_MAX, &size):
            return False
        if size == -1:
            key = None
            keyless[0] = True
        elif 0 <= size <= record_end - position:
            if collect:
                key = _piece(section, data, position, size, as_bytes)
            position += size
        else:
            return False
        # value
        if not _varint(data, end, &position, VARINT_BYTES_MAX, &size):
            return False
        if size == -1:
            value = None
        elif 0 <= size <= record_end - position:
            value = None
            if collect and keep_values:
                value = _piece(section, data, position, size, as_bytes)
            position += size
        else:
            return False
        # headers
        if position >= end:
            return False
        if data[position] == 0:
            headers = _NO_HEADERS
            position += 1
        else:
            headers = _headers(section, data, end, &position, record_end)
            if headers is None:
                return False
        if position != record_end:
            return False
        if not collect:
            continue
        if not _adds_within_int64(base_offset, offset_delta) or not _adds_within_int64(
            first_timestamp_ms, timestamp_delta
        ):
            return False  # Python's integers hold the sum: the reference decodes it
        ends.append(record_end)
        offsets.append(base_offset + offset_delta)
        timestamps.append(first_timestamp_ms + timestamp_delta)
        keys.append(key)
        values.append(value)
        all_headers.append(headers)
    return position == end


cdef enum:
    CHECK_REFUSED = 0  # the reference must decide
    CHECK_KEYED = 1  # well formed, every record keyed
    CHECK_KEYLESS = 2  # well formed, a record has a null key
    CHECK_HEADERS = 3  # a record has headers: the object walk checks their names


cdef int _check_walk(
    const unsigned char* data,
    Py_ssize_t end,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
) noexcept nogil:
    """``_walk``'s grammar for a check, in C alone: no object is touched, so the GIL can be
    released and nothing is counted per record. Headers (their names are UTF-8 the
    reference decodes) are left to ``_walk``: CHECK_HEADERS at the first record that has
    any.

    Each record's fields are read from ``at`` while the next record starts at
    ``record_end``, known from its length alone: the next record's reads do not wait for
    this one's (the processor overlaps them), which halves the time of small records."""
    cdef Py_ssize_t position = 0  # where the record begins
    cdef Py_ssize_t at  # inside the record
    cdef Py_ssize_t index
    cdef int64_t length, record_end, timestamp_delta, offset_delta, size
    cdef int64_t previous_delta = -1
    cdef bint keyless = False
    for index in range(record_count):
        if not _varint(data, end, &position, VARINT_BYTES_MAX, &length):
            return CHECK_REFUSED
        record_end = position + length
        if length < RECORD_BYTES_MIN or record_end > end:
            return CHECK_REFUSED
        at = position + 1  # attributes, unused
        position = record_end
        if not _varint(data, end, &at, VARLONG_BYTES_MAX, &timestamp_delta):
            return CHECK_REFUSED
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &offset_delta):
            return CHECK_REFUSED
        if not previous_delta < offset_delta <= last_offset_delta:
            return CHECK_REFUSED
        previous_delta = offset_delta
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &size):  # key
            return CHECK_REFUSED
        if size == -1:
            keyless = True
        elif 0 <= size <= record_end - at:
            at += size
        else:
            return CHECK_REFUSED
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &size):  # value
            return CHECK_REFUSED
        if size != -1:
            if 0 <= size <= record_end - at:
                at += size
            else:
                return CHECK_REFUSED
        if at >= end:
            return CHECK_REFUSED
        if data[at] != 0:
            return CHECK_HEADERS
        if at + 1 != record_end:
            return CHECK_REFUSED
    if position != end:
        return CHECK_REFUSED
    return CHECK_KEYLESS if keyless else CHECK_KEYED


def decode_into(
    object section,
    int64_t base_offset,
    int64_t first_timestamp_ms,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
    object columns,
    bint keep_values,
):
    """Append the ``record_count`` records of ``section`` (bytes, or any contiguous buffer
    whose slices the caller wants as they come) to ``columns``; True, or False (columns
    unchanged) where the reference must decide."""
    cdef const unsigned char[::1] buffer
    try:
        buffer = section
    except (TypeError, ValueError, BufferError):
        return False  # not a contiguous byte buffer: the reference reads it
    cdef Py_ssize_t end = buffer.shape[0]
    cdef const unsigned char* data = &buffer[0] if end > 0 else <const unsigned char*>b""
    cdef bint keyless = False
    cdef Py_ssize_t rows_before = len(columns.offsets)
    if _walk(
        section, data, end, base_offset, first_timestamp_ms, last_offset_delta, record_count,
        columns, keep_values, &keyless,
    ):
        return True
    # The reference decides: put the columns back as they were.
    for column in (
        columns.ends, columns.offsets, columns.timestamps_ms, columns.keys, columns.values,
        columns.headers,
    ):
        del column[rows_before:]
    return False


def check_records(object section, int64_t last_offset_delta, Py_ssize_t record_count):
    """Check the records of ``section`` as ``decode_into`` would decode them, keeping
    nothing: 1 if they are well formed and every one has a key, 0 if well formed with a
    null key among them, -1 where the reference must decide (a refusal)."""
    cdef const unsigned char[::1] buffer
    try:
        buffer = section
    except (TypeError, ValueError, BufferError):
        return -1  # not a contiguous byte buffer: the reference reads it
    cdef Py_ssize_t end = buffer.shape[0]
    cdef const unsigned char* data = &buffer[0] if end > 0 else <const unsigned char*>b""
    cdef bint keyless = False
    cdef int checked
    with nogil:  # a megabyte takes a tenth of a millisecond: others may run meanwhile
        checked = _check_walk(data, end, last_offset_delta, record_count)
    if checked == CHECK_KEYED:
        return 1
    if checked == CHECK_KEYLESS:
        return 0
    if checked == CHECK_REFUSED:
        return -1
    if not _walk(section, data, end, 0, 0, last_offset_delta, record_count, None, False, &keyless):
        return -1
    return 0 if keyless else 1
