"""A record's fields checked, and measured, before the producer queues anything.

The batch builder writes a record's parts into the batch one after another: a
``str`` value used to fail half-way through (a bare TypeError from deep inside),
leaving a batch with a torn record or an empty batch that later failed with a
traceback. Checking every field first means a refused record leaves nothing
behind, and the error names the field and the fix.

Thread rule: pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.errors import RecordTooLargeError
from twinlog.engine.records.batch_builder import Header
from twinlog.engine.records.batch_format import RECORDS_OFFSET

RECORD_OVERHEAD_BYTES = 24  # varints and attributes of one record, a generous estimate


@dataclass(frozen=True, slots=True)
class PreparedRecord:
    """Fields the batch builder can encode without failing, and their size in a batch."""

    value: bytes | None
    key: bytes | None
    headers: list[Header] | None
    size_bytes: int  # an upper bound of the encoded record


def _as_bytes(data: Any, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray):
        return bytes(data)
    if isinstance(data, memoryview):
        return data.tobytes()  # len() of a memoryview counts items, not bytes
    hint = f" (encode it first, e.g. {what}.encode())" if isinstance(data, str) else ""
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__}{hint}")


def _headers(headers: Sequence[Header] | None) -> tuple[list[Header] | None, int]:
    if not headers:
        return None, 0
    if isinstance(headers, str | bytes) or not isinstance(headers, Sequence):
        raise TypeError(
            f"headers must be a list of (str, bytes) pairs, not {type(headers).__name__}"
        )
    checked: list[Header] = []
    size_bytes = 0
    for index, pair in enumerate(headers):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"headers[{index}] must be a (str, bytes) pair, not {pair!r}")
        name, value = pair
        if not isinstance(name, str):
            raise TypeError(
                f"headers[{index}] name must be str, not {type(name).__name__}"
                + (" (decode it, e.g. name.decode())" if isinstance(name, bytes) else "")
            )
        try:
            encoded_name = name.encode("utf-8")
        except UnicodeEncodeError as error:
            raise TypeError(f"headers[{index}] name {name!r} is not valid UTF-8: {error}") from None
        data = _as_bytes(value, f"headers[{index}] value")
        checked.append((name, data))
        size_bytes += len(encoded_name) + len(data or b"") + 10  # two length varints
    return checked, size_bytes


def prepare_record(
    value: Any, key: Any, headers: Sequence[Header] | None, batch_bytes_max: int
) -> PreparedRecord:
    """Check types and size; raise TypeError or RecordTooLargeError before anything is queued."""
    checked_value = _as_bytes(value, "value")
    checked_key = _as_bytes(key, "key")
    checked_headers, headers_bytes = _headers(headers)
    size_bytes = (
        RECORD_OVERHEAD_BYTES + len(checked_value or b"") + len(checked_key or b"") + headers_bytes
    )
    if RECORDS_OFFSET + size_bytes > batch_bytes_max:
        raise RecordTooLargeError(
            f"a record of {size_bytes} bytes (key, value and headers) does not fit in a batch "
            f"of batch_bytes_max={batch_bytes_max}, the largest this producer sends (the "
            "server's default limit too); send smaller records, or raise batch_bytes_max on "
            "both the producer and the server"
        )
    return PreparedRecord(checked_value, checked_key, checked_headers, size_bytes)


@dataclass(frozen=True, slots=True)
class PreparedRecords:
    """The records of one ``send_batch`` call, checked: lists the builder reads by index."""

    values: list[bytes | None]
    keys: list[bytes | None] | None
    headers: list[list[Header] | None] | None
    size_bytes: list[int]  # an upper bound of each encoded record

    def __len__(self) -> int:
        return len(self.values)


def prepare_records(
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    headers: Sequence[Sequence[Header] | None] | None,
    batch_bytes_max: int,
) -> PreparedRecords:
    """``prepare_record`` for many records at once: every one is checked before any is
    queued. The common case (bytes values, no keys, no headers) costs one pass."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"values must be a list of bytes (or None), not {type(values).__name__}")
    count = len(values)
    for name, column in (("keys", keys), ("headers", headers)):
        if column is not None and (
            isinstance(column, str | bytes) or not isinstance(column, Sequence)
        ):
            raise TypeError(f"{name} must be a list or None, not {type(column).__name__}")
        if column is not None and len(column) != count:
            raise ValueError(
                f"{name} has {len(column)} items but values has {count}: give one per value"
            )
    checked_values = list(values)
    for index, value in enumerate(checked_values):
        if value is not None and type(value) is not bytes:
            checked_values[index] = _as_bytes(value, f"values[{index}]")
    checked_keys: list[bytes | None] | None = None
    if keys is not None:
        checked_keys = list(keys)
        for index, key in enumerate(checked_keys):
            if key is not None and type(key) is not bytes:
                checked_keys[index] = _as_bytes(key, f"keys[{index}]")
    checked_headers: list[list[Header] | None] | None = None
    headers_bytes = [0] * count
    if headers is not None:
        checked_headers = []
        for index, record_headers in enumerate(headers):
            try:
                checked, headers_bytes[index] = _headers(record_headers)
            except TypeError as error:
                raise TypeError(f"headers of record {index}: {error}") from None
            checked_headers.append(checked)
    size_bytes = [
        RECORD_OVERHEAD_BYTES + (len(value) if value is not None else 0) + extra
        for value, extra in zip(checked_values, headers_bytes, strict=True)
    ]
    if checked_keys is not None:
        size_bytes = [
            size + (len(key) if key is not None else 0)
            for size, key in zip(size_bytes, checked_keys, strict=True)
        ]
    largest = max(size_bytes, default=0)
    if RECORDS_OFFSET + largest > batch_bytes_max:
        index = size_bytes.index(largest)
        raise RecordTooLargeError(
            f"record {index} of the batch is {largest} bytes (key, value and headers) and "
            f"does not fit in a batch of batch_bytes_max={batch_bytes_max}; nothing of the "
            "batch was queued; send smaller records, or raise batch_bytes_max on both the "
            "producer and the server"
        )
    return PreparedRecords(checked_values, checked_keys, checked_headers, size_bytes)
