"""Client-side builder of record batches (see ``twinlog.engine.records.batch_format`` for the layout).

A producer appends records, then ``build()`` encodes them once, compresses the
records section once and computes the CRC once. The broker never re-encodes
what this produces.

Thread rule: a builder belongs to one thread (the producer's batching thread).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from twinlog.engine.base import extensions
from twinlog.engine.records import binary_column
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_GENERATION,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORDS_OFFSET,
    TRANSACTIONAL_MASK,
    encode_header,
)
from twinlog.engine.records.binary_column import BinaryColumn
from twinlog.engine.records.compression import CODEC_NONE, ZSTD_LEVEL_DEFAULT, codec_id, compress
from twinlog.engine.records.varint import (
    MINUS_ONE,
    SMALL_VARINTS,
    SMALL_VARINTS_COUNT,
    encode_varint,
)

Header = tuple[str, bytes | None]

# The compiled twin of append_many's loop (``_batch_builder_c``), when built and not
# forced off (``engine.base.extensions``); the loop below stays the reference.
_COMPILED = extensions.load("twinlog.engine.records._batch_builder_c")
COMPILED = _COMPILED is not None

_RECORD_ATTRIBUTES = b"\x00"
_NO_HEADERS = encode_varint(0)
assert len(_RECORD_ATTRIBUTES) == len(MINUS_ONE) == len(_NO_HEADERS) == 1  # append_value
_join = b"".join


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode_nullable(data: bytes | None) -> tuple[bytes, bytes]:
    if data is None:
        return MINUS_ONE, b""
    return encode_varint(len(data)), data


def _encode_headers(headers: Sequence[Header] | None) -> bytes:
    if not headers:
        return _NO_HEADERS
    parts = [encode_varint(len(headers))]
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8")
        parts.append(encode_varint(len(encoded_key)))
        parts.append(encoded_key)
        parts.extend(_encode_nullable(header_value))
    return b"".join(parts)


class RecordBatchBuilder:
    """Accumulates records and builds one batch.

    ``compression`` is "zstd" (default) or "none". Producer id, generation and
    base sequence identify the batch for idempotence; ``transactional`` sets the
    transactional attribute bit. Which transaction the batch belongs to is not in
    the batch (as in Kafka): the produce request carries it beside the batch.

    Each record is kept as a few parts (its encoded fields, the value itself, not
    copied) in one list; ``build()`` joins them once into the records section, runs
    the CRC over it and puts the header in front (``encode_header``). A
    buffer grown record by record instead was reallocated and copied as it grew,
    and with other allocations between its growths (a producer's futures) that
    cost more than encoding the records did. So a value given as a bytearray or a
    memoryview must not change until ``build()`` (the producer's checks copy those).
    """

    def __init__(
        self,
        compression: str = "zstd",
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_generation: int = NO_PRODUCER_GENERATION,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
        compression_level: int = ZSTD_LEVEL_DEFAULT,
    ) -> None:
        self.codec = codec_id(compression)
        self.compression_level = compression_level
        self.producer_id = producer_id
        self.producer_generation = producer_generation
        self.base_sequence = base_sequence
        self.transactional = transactional
        self._parts: list[bytes] = []  # joined by build()
        # Uncompressed size the batch would have now (an upper bound when compressed): the
        # header and the joined parts. A plain attribute, read per record by the producer.
        self.estimated_size_bytes = RECORDS_OFFSET
        self._record_count = 0
        self._first_timestamp_ms: int | None = None
        self._max_timestamp_ms = -1
        self._built = False  # build() hands the buffer out: no append or build after it
        # The last timestamp append_value saw and its delta's varint (after the attributes
        # byte): a producer sends many records within one millisecond. build() forgets it,
        # so no append follows a build.
        self._cached_timestamp_ms: int | None = None
        self._cached_attributes_and_delta = b""
        # The last value length append_value saw, and the null key's -1 with its varint:
        # a producer's values are often all of one size.
        self._cached_value_bytes = -1
        self._cached_value_length = b""

    def __len__(self) -> int:
        return self._record_count

    def _timestamp_delta(self, timestamp_ms: int) -> bytes:
        """The varint of a record's timestamp delta; notes its timestamp in the batch's
        first and max timestamps. Raises RuntimeError once the batch is built."""
        if self._built:
            raise RuntimeError("this batch was built already: start a new RecordBatchBuilder")
        first_timestamp_ms = self._first_timestamp_ms
        if first_timestamp_ms is None:
            first_timestamp_ms = self._first_timestamp_ms = timestamp_ms
        if timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = timestamp_ms
        return encode_varint(timestamp_ms - first_timestamp_ms)

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
    ) -> int:
        """Add a record; return its offset delta within the batch."""
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        timestamp_delta = self._timestamp_delta(timestamp_ms)
        offset_delta = self._record_count
        offset = encode_varint(offset_delta)
        key_length, key_bytes = _encode_nullable(key)
        value_length, value_bytes = _encode_nullable(value)
        headers_bytes = _encode_headers(headers)
        body_length = (
            1
            + len(timestamp_delta)
            + len(offset)
            + len(key_length)
            + len(key_bytes)
            + len(value_length)
            + len(value_bytes)
            + len(headers_bytes)
        )
        length = encode_varint(body_length)
        self._parts += (
            _join(
                (
                    length,
                    _RECORD_ATTRIBUTES,
                    timestamp_delta,
                    offset,
                    key_length,
                    key_bytes,
                    value_length,
                )
            ),
            value_bytes,
            headers_bytes,
        )
        self.estimated_size_bytes += len(length) + body_length
        self._record_count = offset_delta + 1
        return offset_delta

    def append_value(self, value: bytes, timestamp_ms: int) -> int:
        """``append(value, timestamp_ms=timestamp_ms)`` for a key-less, header-less record
        of bytes: the same bytes, fewer steps (the producer's ``send`` of a bare value).

        One record per call is the producer's hot path: the record goes in as six parts
        (length, attributes and timestamp delta, offset delta, null key and value length,
        value, header count) that ``build()`` joins with the others, two of them cached
        from the record before: no bytes are made for the record itself."""
        if timestamp_ms == self._cached_timestamp_ms:
            attributes_and_delta = self._cached_attributes_and_delta
        else:
            attributes_and_delta = _RECORD_ATTRIBUTES + self._timestamp_delta(timestamp_ms)
            self._cached_timestamp_ms = timestamp_ms
            self._cached_attributes_and_delta = attributes_and_delta
        # encode_varint's table looked up here for the values that are in it
        offset_delta = self._record_count
        offset = (
            SMALL_VARINTS[offset_delta]
            if offset_delta < SMALL_VARINTS_COUNT
            else encode_varint(offset_delta)
        )
        value_bytes = len(value)
        if value_bytes == self._cached_value_bytes:
            null_key_and_value_length = self._cached_value_length
        else:
            null_key_and_value_length = MINUS_ONE + encode_varint(value_bytes)
            self._cached_value_bytes = value_bytes
            self._cached_value_length = null_key_and_value_length
        # + the header count's one byte
        body_bytes = (
            len(attributes_and_delta)
            + len(offset)
            + len(null_key_and_value_length)
            + value_bytes
            + 1
        )
        length = (
            SMALL_VARINTS[body_bytes]
            if body_bytes < SMALL_VARINTS_COUNT
            else encode_varint(body_bytes)
        )
        # Not joined here: build() joins every part once.
        self._parts += (
            length,
            attributes_and_delta,
            offset,
            null_key_and_value_length,
            value,
            _NO_HEADERS,
        )
        self.estimated_size_bytes += len(length) + body_bytes
        self._record_count = offset_delta + 1
        return offset_delta

    def extend(self, values: Iterable[bytes | None], timestamp_ms: int | None = None) -> None:
        """Add many key-less, header-less records with one timestamp."""
        values = values if isinstance(values, Sequence) else list(values)
        self.append_many(values, timestamp_ms=timestamp_ms)

    def append_many(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[Header] | None] | None = None,
        timestamp_ms: int | None = None,
        start: int = 0,
        size_bytes_max: int | None = None,
    ) -> int:
        """Add ``values[start:]`` (with ``keys[i]`` and ``headers[i]`` when given), all with
        one timestamp; return the index after the last record added.

        Stops before a record that would take the batch past ``size_bytes_max``, but a
        batch always takes at least one record (an empty builder takes a record of any
        size: the caller checked it against its own limit). The same bytes as ``append``
        record by record, at about a third of its cost: one loop, no per-record calls
        for the common parts (the batch-API and Spark path)."""
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        # Put back if no record fits: the batch's timestamps are its records' only.
        timestamps_before = (self._first_timestamp_ms, self._max_timestamp_ms)
        prefix = _RECORD_ATTRIBUTES + self._timestamp_delta(timestamp_ms)
        prefix_bytes = len(prefix)
        limit = size_bytes_max if size_bytes_max is not None else 1 << 62
        parts = self._parts
        size_bytes = self.estimated_size_bytes
        delta = self._record_count
        index = start
        count = len(values)
        compiled = None
        if _COMPILED is not None and headers is None:
            compiled = _COMPILED.encode_records(
                parts, values, keys, prefix, delta, size_bytes, limit, start, _NO_HEADERS
            )
        if compiled is not None:
            index, delta, size_bytes = compiled
            count = index  # done: the loop below is the reference, for what it declined
        encode = encode_varint
        no_headers = _NO_HEADERS
        null = MINUS_ONE
        while index < count:
            value = values[index]
            key = keys[index] if keys is not None else None
            offset = encode(delta)
            if key is None:
                key_part = null
            else:
                key_part = encode(len(key)) + key
            if value is None:
                value_length = null
                value_bytes = 0
            else:
                value_bytes = len(value)
                value_length = encode(value_bytes)
            headers_part = no_headers if headers is None else _encode_headers(headers[index])
            body_length = (
                prefix_bytes
                + len(offset)
                + len(key_part)
                + len(value_length)
                + value_bytes
                + len(headers_part)
            )
            length = encode(body_length)
            record_bytes = len(length) + body_length
            if delta and size_bytes + record_bytes > limit:
                break
            # Not joined here: build() joins every part once.
            parts += (length, prefix, offset, key_part, value_length, value or b"", headers_part)
            size_bytes += record_bytes
            delta += 1
            index += 1
        if index == start:
            self._first_timestamp_ms, self._max_timestamp_ms = timestamps_before
        self.estimated_size_bytes = size_bytes
        self._record_count = delta
        return index

    def append_columns(
        self,
        values: BinaryColumn,
        keys: BinaryColumn | None = None,
        timestamp_ms: int | None = None,
        start: int = 0,
        stop: int | None = None,
        size_bytes_max: int | None = None,
    ) -> int:
        """``append_many`` of rows ``start`` to ``stop`` (default: the last) of ``values``
        (with ``keys``'s, when given), columns in Arrow's binary layout; return the row
        after the last record added. The same bytes as ``append_many`` of those rows as
        ``bytes``, which the compiled builder writes straight from the buffers, once, with
        no object per row (a columnar writer's path: Spark's). ValueError for buffers that
        do not hold the rows they claim (``binary_column.items`` says which)."""
        stop = values.rows if stop is None else stop
        if keys is not None and keys.rows != values.rows:
            raise ValueError(
                f"binary columns of {values.rows} values and {keys.rows} keys: one key per value"
            )
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        if _COMPILED is not None:
            timestamps_before = (self._first_timestamp_ms, self._max_timestamp_ms)
            prefix = _RECORD_ATTRIBUTES + self._timestamp_delta(timestamp_ms)
            no_keys = (None, None, None, 0)
            made = _COMPILED.encode_column_records(
                self._parts, values.rows,
                values.starts, values.data, values.valid, values.first_row,
                *(no_keys if keys is None else (keys.starts, keys.data, keys.valid, keys.first_row)),
                prefix, self._record_count, self.estimated_size_bytes,
                size_bytes_max if size_bytes_max is not None else 1 << 62, start, stop,
            )  # fmt: skip
            if made is not None:
                index, self._record_count, self.estimated_size_bytes = made
                if index == start:
                    self._first_timestamp_ms, self._max_timestamp_ms = timestamps_before
                return int(index)
            # declined (inconsistent buffers): the reference below says what is wrong
            self._first_timestamp_ms, self._max_timestamp_ms = timestamps_before
        value_items = binary_column.items(values, start, stop)
        key_items = None if keys is None else binary_column.items(keys, start, stop)
        return start + self.append_many(
            value_items, key_items, timestamp_ms=timestamp_ms, size_bytes_max=size_bytes_max
        )

    def build(self) -> bytes:
        """The finished batch (base offset 0). Raises ValueError if empty.

        The builder can not be appended to after this.
        """
        if self._built:
            raise RuntimeError("this batch was built already: start a new RecordBatchBuilder")
        if not self._record_count:
            raise ValueError("cannot build an empty record batch: append a record first")
        assert self._first_timestamp_ms is not None
        records_section = _join(self._parts)  # the one copy of the records
        assert len(records_section) == self.estimated_size_bytes - RECORDS_OFFSET
        if self.codec != CODEC_NONE:
            records_section = compress(self.codec, records_section, self.compression_level)
        attributes = self.codec
        if self.transactional:
            attributes |= TRANSACTIONAL_MASK
        header = encode_header(
            records_section,
            base_offset=0,
            attributes=attributes,
            last_offset_delta=self._record_count - 1,
            first_timestamp_ms=self._first_timestamp_ms,
            max_timestamp_ms=self._max_timestamp_ms,
            producer_id=self.producer_id,
            producer_generation=self.producer_generation,
            base_sequence=self.base_sequence,
            record_count=self._record_count,
        )
        self._built = True
        self._cached_timestamp_ms = None  # the next append_value reaches the check
        self._parts = []
        return _join((header, records_section))


def encode_record(
    offset_delta: int,
    timestamp_delta_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] | None,
) -> bytes:
    """One Record, length prefix included (for tests and tools; the builder inlines it)."""
    key_length, key_bytes = _encode_nullable(key)
    value_length, value_bytes = _encode_nullable(value)
    body = b"".join(
        (
            _RECORD_ATTRIBUTES,
            encode_varint(timestamp_delta_ms),
            encode_varint(offset_delta),
            key_length,
            key_bytes,
            value_length,
            value_bytes,
            _encode_headers(headers),
        )
    )
    return encode_varint(len(body)) + body


def build_batch(
    values: Iterable[bytes | None],
    compression: str = "zstd",
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_generation: int = NO_PRODUCER_GENERATION,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    compression_level: int = ZSTD_LEVEL_DEFAULT,
) -> bytes:
    """One batch of the given values (no keys, no headers): a convenience for tests and tools."""
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_generation=producer_generation,
        base_sequence=base_sequence,
        transactional=transactional,
        compression_level=compression_level,
    )
    for value in values:
        builder.append(value)
    return builder.build()
