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

``sections_to_columns`` walks the same grammar over many sections for a columnar reader
(``column_buffers``), writing keys, values, offsets and timestamps straight into
Arrow's layout; its reference is ``decode_records`` packed into the same buffers.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memset

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


cdef struct _Columns:
    # For sections_to_columns: counted by a first pass (the pointers NULL), filled by the
    # second, which never goes past what the first counted (the *_max).
    Py_ssize_t rows_max
    Py_ssize_t key_bytes_max
    Py_ssize_t value_bytes_max
    Py_ssize_t rows
    Py_ssize_t key_bytes
    Py_ssize_t value_bytes
    Py_ssize_t null_keys
    Py_ssize_t null_values
    int64_t* offsets
    int64_t* timestamps_ms
    int32_t* key_starts  # rows + 1 positions in key_data: Arrow's binary offsets
    unsigned char* key_data
    unsigned char* key_valid  # a bit per row, set where the key is not null
    int32_t* value_starts
    unsigned char* value_data
    unsigned char* value_valid


cdef inline bint _take_fields(
    _Columns* columns,
    bint fill,
    int64_t offset,
    int64_t timestamp_ms,
    const unsigned char* key,
    int64_t key_size,
    const unsigned char* value,
    int64_t value_size,
) noexcept nogil:
    """One well-formed record's fields: counted, or written at the next row. False where
    a second pass meets more than the first counted."""
    cdef Py_ssize_t row = columns.rows
    if fill and (
        row >= columns.rows_max
        or (key_size > 0 and columns.key_bytes + key_size > columns.key_bytes_max)
        or (value_size > 0 and columns.value_bytes + value_size > columns.value_bytes_max)
    ):
        return False
    columns.rows = row + 1
    if fill:
        columns.offsets[row] = offset
        columns.timestamps_ms[row] = timestamp_ms
        columns.key_starts[row] = <int32_t>columns.key_bytes
        columns.value_starts[row] = <int32_t>columns.value_bytes
    if key_size == -1:
        columns.null_keys += 1
    else:
        if fill:
            memcpy(columns.key_data + columns.key_bytes, key, key_size)
            columns.key_valid[row >> 3] |= 1 << (row & 7)
        columns.key_bytes += key_size
    if value_size == -1:
        columns.null_values += 1
    else:
        if fill:
            memcpy(columns.value_data + columns.value_bytes, value, value_size)
            columns.value_valid[row >> 3] |= 1 << (row & 7)
        columns.value_bytes += value_size
    return True


cdef inline int _check_walk_from(
    const unsigned char* data,
    Py_ssize_t end,
    Py_ssize_t position,
    Py_ssize_t index_first,
    int64_t previous_delta,
    bint keyless,
    int64_t base_offset,
    int64_t first_timestamp_ms,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
    _Columns* columns,
    bint fill,
) noexcept nogil:
    """``_walk``'s grammar in C alone: no object is touched, so the GIL can be released
    and nothing is counted per record. Headers (their names are UTF-8 the reference
    decodes) are left to ``_walk``: CHECK_HEADERS at the first record that has any.

    With ``columns`` (not NULL; ``sections_to_columns``) it also takes every record's
    fields: counted into ``columns`` (``fill`` False) or written at its row onwards
    (``fill`` True, after a first pass counted them); an offset or timestamp sum beyond
    int64 is then CHECK_REFUSED (the reference decides). Inlined, the door's check
    (``columns`` NULL) compiles to the check alone.

    Each record's fields are read from ``at`` while the next record starts at
    ``record_end``, known from its length alone: the next record's reads do not wait for
    this one's (the processor overlaps them), which halves the time of small records.

    It starts at the record ``index_first``, at ``position``, with the offset delta of the
    record before (``previous_delta``, -1 for none) and whether a null key came before
    (``keyless``): where ``_check_common`` hands over."""
    cdef Py_ssize_t at, key_at, value_at  # inside the record
    cdef Py_ssize_t index, row
    cdef int64_t length, record_end, timestamp_delta, offset_delta, key_size, value_size
    for index in range(index_first, record_count):
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
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &key_size):
            return CHECK_REFUSED
        key_at = at
        if key_size == -1:
            keyless = True
        elif 0 <= key_size <= record_end - at:
            at += key_size
        else:
            return CHECK_REFUSED
        if not _varint(data, end, &at, VARINT_BYTES_MAX, &value_size):
            return CHECK_REFUSED
        value_at = at
        if value_size != -1:
            if 0 <= value_size <= record_end - at:
                at += value_size
            else:
                return CHECK_REFUSED
        if at >= end:
            return CHECK_REFUSED
        if data[at] != 0:
            return CHECK_HEADERS
        if at + 1 != record_end:
            return CHECK_REFUSED
        if columns != NULL:
            if not _adds_within_int64(base_offset, offset_delta) or not _adds_within_int64(
                first_timestamp_ms, timestamp_delta
            ):
                return CHECK_REFUSED
            if not _take_fields(
                columns, fill, base_offset + offset_delta, first_timestamp_ms + timestamp_delta,
                data + key_at, key_size, data + value_at, value_size,
            ):
                return CHECK_REFUSED
    if position != end:
        return CHECK_REFUSED
    return CHECK_KEYLESS if keyless else CHECK_KEYED


cdef enum:
    # _check_common stops this far before the end: its reads past a record's fields (two
    # bytes at most, a key's bytes being checked against the record's end first) stay in
    # the data without a test of the end at each one.
    COMMON_SLACK_BYTES = 16


cdef inline bint _skip_varint2(
    const unsigned char* data, Py_ssize_t* at, uint64_t* raw
) noexcept nogil:
    """A varint of one or two bytes at ``at[0]``, its raw value (zig-zag: twice a value
    >= 0, odd for a negative one) into ``raw``; False for a longer one. Reads the byte
    after without a test of the end: the caller knows it is in the data."""
    cdef uint64_t first = data[at[0]]
    cdef uint64_t second
    if first < 0x80:
        raw[0] = first
        at[0] += 1
        return True
    second = data[at[0] + 1]
    if second >= 0x80:
        return False
    raw[0] = (first & 0x7F) | (second << 7)
    at[0] += 2
    return True


cdef inline Py_ssize_t _common_lane(
    const unsigned char* data,
    Py_ssize_t end,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
    Py_ssize_t* position_out,
    bint* keyless_out,
) noexcept nogil:
    """How many records from the first the door's fast lane accepts (``_check_common``),
    the position after them in ``position_out``, and whether it read a null key (the
    record it stops at included: the walk reads the same key there, so its answer is
    the same) in ``keyless_out``."""
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t index = 0
    cdef Py_ssize_t at, record_end
    cdef Py_ssize_t reads_end = end - COMMON_SLACK_BYTES
    cdef uint64_t raw
    cdef bint keyless = False
    if record_count - 1 <= last_offset_delta:  # else a delta must be past it: the walk words it
        while index < record_count and position < reads_end:
            at = position
            if not _skip_varint2(data, &at, &raw) or raw & 1:
                break  # a long or negative length
            record_end = at + <Py_ssize_t>(raw >> 1)
            if record_end > reads_end:
                break
            at += 1  # attributes, unused
            if not _skip_varint2(data, &at, &raw):  # the timestamp delta: any value
                break
            # The offset delta, raw: twice the index it must equal; three bytes past 8,191.
            if not _skip_varint2(data, &at, &raw):
                if data[at + 2] >= 0x80:
                    break
                raw = (data[at] & 0x7F) | (<uint64_t>(data[at + 1] & 0x7F) << 7) | (
                    <uint64_t>data[at + 2] << 14
                )
                at += 3
            if raw != <uint64_t>(2 * index):
                break
            if not _skip_varint2(data, &at, &raw):  # the key's size
                break
            if raw == 1:
                keyless = True  # a null key
            elif raw & 1 or <Py_ssize_t>(raw >> 1) > record_end - at:
                break
            else:
                at += <Py_ssize_t>(raw >> 1)
            if not _skip_varint2(data, &at, &raw):  # the value's size
                break
            if raw != 1:  # not a null value
                if raw & 1:
                    break
                at += <Py_ssize_t>(raw >> 1)  # beyond the record if too long: tested next
            if at + 1 != record_end or data[at] != 0:
                break  # sizes that miss the record's end, or headers
            position = record_end
            index += 1
    position_out[0] = position
    keyless_out[0] = keyless
    return index


cdef inline int _check_common(
    const unsigned char* data,
    Py_ssize_t end,
    int64_t last_offset_delta,
    Py_ssize_t record_count,
) noexcept nogil:
    """The door's check (``_check_walk_from`` the first record on, with no columns) with
    a fast lane for the records producers send: lengths, timestamp deltas, key and value
    sizes of one or two bytes, offset deltas 0, 1, 2, ... (up to three bytes), no
    headers. A record it is not sure
    of, and the last ones (``COMMON_SLACK_BYTES``), go to ``_check_walk_from`` from that
    record on, which decides as before: this lane only ever accepts what the walk would.

    Why a second loop: at 100-byte records the walk's cost is its instructions (about
    110 a record: each varint tests the end, zig-zag decodes and is compared), not a
    chain of loads. Here a field's bounds come from its record's end, tested once; the
    offset delta is compared with the one expected, undecoded; a length shorter than a
    record's minimum cannot pass the field walk, so it is not tested apart."""
    cdef Py_ssize_t position
    cdef bint keyless
    cdef Py_ssize_t index = _common_lane(
        data, end, last_offset_delta, record_count, &position, &keyless
    )
    return _check_walk_from(
        data, end, position, index, index - 1, keyless, 0, 0, last_offset_delta,
        record_count, NULL, False,
    )


def common_lane_records(object section, int64_t last_offset_delta, Py_ssize_t record_count):
    """How many records of ``section``, from the first, ``check_records``' fast lane
    accepts on its own (the rest go to the full walk): for the tests that pin which
    records take it, since a lane that declines every record checks the same, slower."""
    cdef const unsigned char[::1] buffer = section
    cdef Py_ssize_t end = buffer.shape[0]
    cdef const unsigned char* data = &buffer[0] if end > 0 else <const unsigned char*>b""
    cdef Py_ssize_t position
    cdef bint keyless
    return _common_lane(data, end, last_offset_delta, record_count, &position, &keyless)


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
        checked = _check_common(data, end, last_offset_delta, record_count)
    if checked == CHECK_KEYED:
        return 1
    if checked == CHECK_KEYLESS:
        return 0
    if checked == CHECK_REFUSED:
        return -1
    if not _walk(section, data, end, 0, 0, last_offset_delta, record_count, None, False, &keyless):
        return -1
    return 0 if keyless else 1


# --- many sections into column buffers (Arrow's layout), for columnar readers --------------


cdef bint _columns_pass(list batches, _Columns* columns, bint fill) except -1:
    """One pass of ``_check_walk_from`` over every (header, section) of ``batches``."""
    cdef const unsigned char[::1] buffer
    cdef const unsigned char* data
    cdef Py_ssize_t end
    cdef int64_t base_offset, first_timestamp_ms, last_offset_delta
    cdef Py_ssize_t record_count
    cdef int walked
    for header, section in batches:
        try:
            buffer = section
        except (TypeError, ValueError, BufferError):
            return False  # not a contiguous byte buffer: decode_records reads it
        end = buffer.shape[0]
        data = &buffer[0] if end > 0 else <const unsigned char*>b""
        base_offset = header.base_offset
        first_timestamp_ms = header.first_timestamp_ms
        last_offset_delta = header.last_offset_delta
        record_count = header.record_count
        with nogil:  # the buffer is held (exported) by ``buffer`` meanwhile
            walked = _check_walk_from(
                data, end, 0, 0, -1, False, base_offset, first_timestamp_ms,
                last_offset_delta, record_count, columns, fill,
            )
        if walked != CHECK_KEYED and walked != CHECK_KEYLESS:
            return False  # a refusal, or headers: decode_records decides
    return True


cdef bytearray _zeroed(Py_ssize_t size):
    cdef bytearray made = PyByteArray_FromStringAndSize(NULL, size)
    memset(PyByteArray_AS_STRING(made), 0, size)
    return made


def sections_to_columns(list batches):
    """The records of ``batches`` ((header, decompressed records section) each, in log
    order) as column buffers in Arrow's layout: (rows, offsets, timestamps_ms, key_starts,
    key_data, key_valid, value_starts, value_data, value_valid), the first two int64 per
    row, the starts int32 per row and one more, the valid bitmaps a bit per row (None
    where no row is null). None where ``decode_records`` must decide: a section it would
    refuse, a record with headers, a sum beyond int64, keys or values of 2 GiB or more."""
    cdef _Columns counted
    memset(&counted, 0, sizeof(_Columns))
    if not _columns_pass(batches, &counted, False):
        return None
    if counted.key_bytes > INT32_MAX or counted.value_bytes > INT32_MAX:
        return None  # beyond Arrow's binary offsets
    cdef Py_ssize_t rows = counted.rows
    cdef Py_ssize_t valid_bytes = (rows + 7) >> 3
    offsets = PyByteArray_FromStringAndSize(NULL, rows * 8)
    timestamps_ms = PyByteArray_FromStringAndSize(NULL, rows * 8)
    key_starts = PyByteArray_FromStringAndSize(NULL, (rows + 1) * 4)
    value_starts = PyByteArray_FromStringAndSize(NULL, (rows + 1) * 4)
    key_data = PyByteArray_FromStringAndSize(NULL, counted.key_bytes)
    value_data = PyByteArray_FromStringAndSize(NULL, counted.value_bytes)
    key_valid = _zeroed(valid_bytes)
    value_valid = _zeroed(valid_bytes)
    cdef _Columns columns
    memset(&columns, 0, sizeof(_Columns))
    columns.rows_max = rows
    columns.key_bytes_max = counted.key_bytes
    columns.value_bytes_max = counted.value_bytes
    columns.offsets = <int64_t*>PyByteArray_AS_STRING(offsets)
    columns.timestamps_ms = <int64_t*>PyByteArray_AS_STRING(timestamps_ms)
    columns.key_starts = <int32_t*>PyByteArray_AS_STRING(key_starts)
    columns.key_data = <unsigned char*>PyByteArray_AS_STRING(key_data)
    columns.key_valid = <unsigned char*>PyByteArray_AS_STRING(key_valid)
    columns.value_starts = <int32_t*>PyByteArray_AS_STRING(value_starts)
    columns.value_data = <unsigned char*>PyByteArray_AS_STRING(value_data)
    columns.value_valid = <unsigned char*>PyByteArray_AS_STRING(value_valid)
    # The second pass walks what the first checked (the caller's sections, unchanged); it
    # checks again, and a difference declines rather than writes past a buffer.
    if not _columns_pass(batches, &columns, True) or (
        columns.rows != rows
        or columns.key_bytes != counted.key_bytes
        or columns.value_bytes != counted.value_bytes
    ):
        return None
    columns.key_starts[rows] = <int32_t>columns.key_bytes
    columns.value_starts[rows] = <int32_t>columns.value_bytes
    return (
        rows,
        offsets,
        timestamps_ms,
        key_starts,
        key_data,
        key_valid if counted.null_keys else None,
        value_starts,
        value_data,
        value_valid if counted.null_values else None,
    )
