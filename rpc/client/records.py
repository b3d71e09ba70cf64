"""What the client hands to users: consumed records and produced records' metadata."""

from __future__ import annotations

from typing import NamedTuple

Headers = tuple[tuple[str, bytes | None], ...]


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


class RecordMetadata(NamedTuple):
    """Where a produced record went. ``offset`` is -1 for a transactional record.

    A transactional record's offset is assigned when its transaction is applied to the
    data log, after commit; read it back with a consumer if you need it.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
