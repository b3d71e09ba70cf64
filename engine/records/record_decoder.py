"""The one decoder of a batch's records section: every reader of records calls it.

``RecordBatch.records()`` (consumers, the broker, the transaction journal),
log compaction (``rewrite.iter_record_spans`` and ``require_keys``) and the
Spark read path (``ColumnBuilder``) all walk the records through
``decode_records``, so they accept and refuse exactly the same bytes.

It is the Spark read's hot loop, so it decodes straight into one list per field
(``RecordColumns``) rather than building an object per record, and decodes the
one- and two-byte varints inline (most lengths, deltas and counts: a value of
1 KiB has a two-byte length, offset deltas below 8192 take two bytes);
``decode_varint`` takes the rest.

Every malformed byte raises InvalidRecordError (a CorruptBatchError) naming the
record's index and a byte position in the (decompressed) records section, never
IndexError, struct.error or UnicodeDecodeError. Offset deltas must climb strictly
(compaction leaves gaps, never repeats): otherwise a consumer would see offsets
3, 2, 4, 4, 4.

Two twins, one answer: ``decode_records_python`` below is the reference;
``_record_decoder_c.decode_into`` (Cython, built by setup.py) walks the same grammar
in C and, on any byte the reference would refuse, hands the section back to the
reference, which words the refusal. ``decode_records`` uses the compiled one when it
is built and ``TWINLOG_NO_EXTENSIONS`` is not set (``engine.base.extensions``); the
differential tests (tests/engine/records/test_record_decoder_twins.py) run both on
the same bytes.
"""

from __future__ import annotations

from typing import Any, cast

from twinlog.engine.base import extensions
from twinlog.engine.base.errors import CorruptBatchError, InvalidRecordError
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.varint import VARINT_BYTES_MAX, VARLONG_BYTES_MAX, decode_varint

Header = tuple[str, bytes | None]
Headers = tuple[Header, ...]

# The smallest record: attributes, timestamp delta, offset delta, key length,
# value length and header count, one byte each.
RECORD_BYTES_MIN = 6
_NO_HEADERS: Headers = ()


class RecordColumns:
    """The records of one or more records sections, one list per field (item i: record i).

    ``ends`` holds the position after each record in its section; a record
    starts where the one before it ends (the first at 0).
    """

    __slots__ = ("ends", "headers", "keys", "offsets", "timestamps_ms", "values")

    def __init__(self) -> None:
        self.ends: list[int] = []
        self.offsets: list[int] = []
        self.timestamps_ms: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Headers] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def starts(self) -> list[int]:
        """The position of each record's length varint (valid for one section's records)."""
        return [0, *self.ends[:-1]] if self.ends else []

    def _lists(self) -> tuple[list[Any], ...]:
        return (self.ends, self.offsets, self.timestamps_ms, self.keys, self.values, self.headers)

    def truncate(self, rows: int) -> None:
        """Drop the records from index ``rows`` on."""
        for column in self._lists():
            del column[rows:]

    def extend_from(self, other: RecordColumns, indices: list[int]) -> None:
        """Append the records of ``other`` at ``indices``, in that order."""
        for mine, theirs in zip(self._lists(), other._lists(), strict=True):
            mine.extend([theirs[index] for index in indices])


class _VarintError(Exception):
    """A varint ``decode_varint`` refused; ``decode_records`` adds the record to the message."""


def _read_varint(section: bytes, position: int, bytes_max: int) -> tuple[int, int]:
    """The slow path: a varint of three bytes or more (or a bad one)."""
    try:
        return decode_varint(section, position, bytes_max)
    except CorruptBatchError as error:
        raise _VarintError(str(error)) from None


def _corrupt(header: BatchHeader, index: int, position: int, problem: str) -> InvalidRecordError:
    return InvalidRecordError(
        f"record {index} {problem}, at byte {position} of the records section of the batch "
        f"at offset {header.base_offset}",
        offset=header.base_offset,
        record_index=index,
        next_offset=header.next_offset,
    )


# The grammar (the same as in batch_format.py); the comments in decode_records name
# these fields:
#
#   Record =>
#     length               varint  bytes that follow, at least RECORD_BYTES_MIN
#     attributes           int8    unused, 0
#     timestamp_delta      varlong timestamp minus first_timestamp_ms
#     offset_delta         varint  offset minus base_offset, 0..last_offset_delta, above
#                                  the record before's
#     key_length           varint  -1 for a null key
#     key                  bytes
#     value_length         varint  -1 for a null value
#     value                bytes
#     header_count         varint  0.. (each header takes at least 2 bytes)
#     headers              Header*
#
#   Header =>
#     key_length varint (never -1), key bytes (UTF-8), value_length varint (-1 null),
#     value bytes
#
# Each record must end exactly where its length says, and the section exactly
# after record_count records. Varints are zig-zag: (raw >> 1) ^ -(raw & 1).


_COMPILED = extensions.load("twinlog.engine.records._record_decoder_c")
COMPILED = _COMPILED is not None  # is decode_records the compiled twin?


def decode_records(
    section: bytes | memoryview,
    header: BatchHeader,
    columns: RecordColumns | None = None,
    *,
    keep_values: bool = True,
    views: bool = False,
) -> RecordColumns:
    """Decode the ``header.record_count`` records of ``section`` (decompressed) into
    ``columns``: ``decode_records_python``'s answer, from the compiled twin when built."""
    if _COMPILED is None:
        return decode_records_python(section, header, columns, keep_values=keep_values, views=views)
    if columns is None:
        columns = RecordColumns()
    if type(section) is not bytes and not views:
        section = bytes(section)
    if _COMPILED.decode_into(
        section,
        header.base_offset,
        header.first_timestamp_ms,
        header.last_offset_delta,
        header.record_count,
        columns,
        keep_values,
    ):
        return columns
    # A refusal (or an int64 oddity): the reference decides, with its message.
    return decode_records_python(section, header, columns, keep_values=keep_values, views=views)


def check_records(section: bytes | memoryview, header: BatchHeader) -> bool:
    """Check every record of ``section`` as ``decode_records`` decodes it, keeping nothing
    (the door of produce: the batch itself is what gets written). True if every record has
    a key, False if one has a null key; InvalidRecordError as ``decode_records`` raises it."""
    if _COMPILED is not None:
        verdict = _COMPILED.check_records(section, header.last_offset_delta, header.record_count)
        if verdict >= 0:
            return bool(verdict)
    return check_records_python(section, header)


def check_records_python(section: bytes | memoryview, header: BatchHeader) -> bool:
    """The reference of ``check_records``: the records decoded, values not kept, nothing
    copied."""
    columns = decode_records_python(section, header, keep_values=False, views=True)
    return None not in columns.keys


def decode_records_python(
    section: bytes | memoryview,
    header: BatchHeader,
    columns: RecordColumns | None = None,
    *,
    keep_values: bool = True,
    views: bool = False,
) -> RecordColumns:
    """The reference. Decode the ``header.record_count`` records of ``section`` (decompressed) into ``columns``.

    Appends to ``columns`` (a new RecordColumns if None) and returns it. Raises
    InvalidRecordError for any malformed record; ``columns`` may then hold the
    records before it. ``keep_values=False`` checks every value as well but keeps
    None in its place (the check at the door of produce: copying each value out
    was a third of its cost, and only keys are looked at there). ``views``: a
    ``section`` that is not bytes is not copied, and its keys and values are views
    of it (for a caller that only looks at them or copies them onward itself); header
    values are copied still.
    """
    if columns is None:
        columns = RecordColumns()
    if type(section) is not bytes and not views:
        section = bytes(section)  # one copy, so that each key and value slice is bytes
    # With ``views`` a memoryview, read like bytes here; its slices are views (the
    # columns say bytes: the callers that ask for views know what they hold).
    section = cast(bytes, section)
    # Bound methods and header fields in locals: this loop runs once per record read.
    add_end = columns.ends.append
    add_offset = columns.offsets.append
    add_timestamp = columns.timestamps_ms.append
    add_key = columns.keys.append
    add_value = columns.values.append
    add_headers = columns.headers.append
    base_offset = header.base_offset
    first_timestamp_ms = header.first_timestamp_ms
    last_offset_delta = header.last_offset_delta
    end = len(section)
    position = start = index = 0
    previous_delta = -1
    try:
        for index in range(header.record_count):
            start = position
            # length
            byte = section[position]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                position += 2
            else:
                length, position = _read_varint(section, position, VARINT_BYTES_MAX)
            record_end = position + length
            if length < RECORD_BYTES_MIN or record_end > end:
                raise _corrupt(
                    header,
                    index,
                    start,
                    f"says {length} bytes, but {end - position} remain (and a record "
                    f"takes at least {RECORD_BYTES_MIN})",
                )
            position += 1  # attributes, unused
            # timestamp_delta
            byte = section[position]
            if byte < 0x80:
                timestamp_delta_ms = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                timestamp_delta_ms = (raw >> 1) ^ -(raw & 1)
                position += 2
            else:
                timestamp_delta_ms, position = _read_varint(section, position, VARLONG_BYTES_MAX)
            # offset_delta
            byte = section[position]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                offset_delta = (raw >> 1) ^ -(raw & 1)
                position += 2
            else:
                offset_delta, position = _read_varint(section, position, VARINT_BYTES_MAX)
            if not previous_delta < offset_delta <= last_offset_delta:
                raise _corrupt(
                    header,
                    index,
                    start,
                    f"has offset delta {offset_delta}, expected {previous_delta + 1}.."
                    f"{last_offset_delta} (above the record before's, at most the batch's last)",
                )
            previous_delta = offset_delta
            # key_length, key
            byte = section[position]
            if byte < 0x80:
                size = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                size = (raw >> 1) ^ -(raw & 1)
                position += 2
            else:
                size, position = _read_varint(section, position, VARINT_BYTES_MAX)
            if size == -1:
                key = None
            elif 0 <= size <= record_end - position:
                key = section[position : position + size]
                position += size
            else:
                raise _corrupt(
                    header,
                    index,
                    position,
                    f"has key length {size}, but {record_end - position} bytes of it remain",
                )
            # value_length, value
            byte = section[position]
            if byte < 0x80:
                size = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                size = (raw >> 1) ^ -(raw & 1)
                position += 2
            else:
                size, position = _read_varint(section, position, VARINT_BYTES_MAX)
            if size == -1:
                value = None
            elif 0 <= size <= record_end - position:
                value = section[position : position + size] if keep_values else None
                position += size
            else:
                raise _corrupt(
                    header,
                    index,
                    position,
                    f"has value length {size}, but {record_end - position} bytes of it remain",
                )
            # header_count, headers
            byte = section[position]
            if byte == 0:
                headers = _NO_HEADERS
                position += 1
            else:
                headers, position = _decode_headers(section, position, record_end, header, index)
            if position != record_end:
                raise _corrupt(
                    header,
                    index,
                    start,
                    f"says it ends at byte {record_end}, but its fields end at byte {position}",
                )
            add_end(record_end)
            add_offset(base_offset + offset_delta)
            add_timestamp(first_timestamp_ms + timestamp_delta_ms)
            add_key(key)
            add_value(value)
            add_headers(headers)
    except IndexError:
        raise _corrupt(
            header, index, start, f"runs past the end of the records section ({end} bytes)"
        ) from None
    except _VarintError as error:
        raise _corrupt(header, index, start, f"holds a bad varint ({error})") from None
    if position != end:
        raise InvalidRecordError(
            f"the records section of the batch at offset {base_offset} has {end - position} "
            f"bytes left after its {header.record_count} records: record "
            f"{header.record_count} would start at byte {position}",
            offset=base_offset,
            record_index=header.record_count,
            next_offset=header.next_offset,
        )
    return columns


def _decode_headers(
    section: bytes, position: int, record_end: int, header: BatchHeader, index: int
) -> tuple[Headers, int]:
    """(headers, position after them) of the record ``index`` whose header count is at
    ``position``. Out of the hot loop, which inlines only the common count of 0;
    header key and value lengths below 64 are decoded inline here."""
    count, position = _read_varint(section, position, VARINT_BYTES_MAX)
    if not 0 <= count <= (record_end - position) // 2:
        raise _corrupt(
            header,
            index,
            position,
            f"says {count} headers, but {record_end - position} bytes remain for them "
            "(each takes at least 2)",
        )
    headers: list[Header] = []
    for _ in range(count):
        byte = section[position]
        if byte < 0x80:
            size = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            size, position = _read_varint(section, position, VARINT_BYTES_MAX)
        if not 0 <= size <= record_end - position:
            what = "a null key" if size == -1 else f"key length {size}"
            raise _corrupt(header, index, position, f"has a header with {what}")
        try:
            name = str(section[position : position + size], "utf-8")  # bytes or a view
        except UnicodeDecodeError:
            raise _corrupt(header, index, position, "has a header key that is not UTF-8") from None
        position += size
        byte = section[position]
        if byte < 0x80:
            size = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            size, position = _read_varint(section, position, VARINT_BYTES_MAX)
        if size == -1:
            headers.append((name, None))
        elif 0 <= size <= record_end - position:
            value = section[position : position + size]
            headers.append((name, value if type(value) is bytes else bytes(value)))
            position += size
        else:
            raise _corrupt(header, index, position, f"has a header value length {size}")
    return tuple(headers), position
